#!/usr/bin/env bash
# make e2e-k8s: a single-node Kubernetes built here from real parts runs N
# planned blind runs of the synthetic world, once under RuntimeClass runc
# and once under gvisor (runsc), and every collected world must verify
# COMPLETE. Opt-in (not part of make test or CI): it needs root, ~2 GiB of
# disk for the build cache, and about 7 minutes of 2 idle cores the first
# time (e2e/k8s/build.sh; cached afterwards).
#
# Parts: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet
# and kubectl from e2e/k8s/build.sh; etcd, containerd, runc, runsc and the
# CNI plugins from Debian. No registry: the images (a pause image and the
# run image holding cleanroom, node and their libraries) are OCI layouts
# written here and imported into containerd. Everything lives under one
# work directory; the EXIT trap stops every process this script started
# (by PID), their containerd shims (by PID, found by this run's socket
# path), unmounts what was mounted below the work directory, removes the
# network namespaces the CNI plugins made, the node's address link and
# the cgroup root the kubelet used for this run, and the directory itself
# (KEEP=1 keeps it for inspection).
#
# What it does not prove: NetworkPolicy enforcement. That needs a
# policy-enforcing CNI plugin (Calico, Cilium, …), and none is packaged in
# Debian: the plan's NetworkPolicy objects are accepted and ignored here.
# What it proves instead, by mechanism and from inside each pod: the
# node's CNI configuration gives pods no network at all — the loopback
# plugin brings up lo and nothing else is created in the pod's namespace
# (containerd 1.6 refuses a sandbox whose CNI result has no address for
# eth0, so a host-local lease from 192.0.2.0/24, TEST-NET-1, is reported
# as the pod's IP; no interface carries it). The gvisor handler also runs
# runsc with --network=none. Before its run, the pod's command runs
# cleanroom's network check on its own namespace (`sandbox hook
# --own-netns`: links, routes in every table, policy rules, route
# lookups to public addresses — netlink, no capability needed; under
# Debian's runsc, whose netstack answers no rule dump and no lookup, lo
# as the only link and every route on lo are the proof) and runs the
# candidate only if the check proves full isolation; the summary gives
# each run's verdict.
#
# Teardown is checked, not assumed: the host's processes, mounts, network
# namespaces, links, nft ruleset, iptables rules, the cgroups a kubelet,
# containerd or runsc may create, the sysctls the kubelet may set, and the
# well-known state directories are recorded before the run and compared
# after it; anything left is named and fails the run.
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=$PWD
N=${N:-4}
CLASSES=${CLASSES:-"runc gvisor"}
K8S_VERSION=${K8S_VERSION:-v1.37.2}
CACHE=${CLEANROOM_E2E_CACHE:-/var/cache/cleanroom-e2e-k8s}/$K8S_VERSION
export GOFLAGS=-mod=mod
step() { echo "e2e-k8s: [$(date -u +%H:%M:%S)] $*"; }
die() { echo "e2e-k8s: FAILED at: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (kubelet, containerd, mounts)"

step "1/9 Kubernetes binaries ($K8S_VERSION, cache $CACHE)"
e2e/k8s/build.sh || die "building Kubernetes from the module proxy"
K=$CACHE/bin

step "2/9 Debian packages"
need=()
for p in etcd:etcd-server containerd:containerd runc:runc runsc:runsc openssl:openssl node:nodejs; do
  command -v "${p%%:*}" >/dev/null || need+=("${p#*:}")
done
[ -x /usr/lib/cni/loopback ] && [ -x /usr/lib/cni/host-local ] || need+=(containernetworking-plugins)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null || die "apt-get install ${need[*]}"
fi
command -v runsc >/dev/null || { echo "e2e-k8s: runsc is not installable here: gvisor skipped"; CLASSES=${CLASSES//gvisor/}; }

W=$(mktemp -d /tmp/cleanroom-e2e-k8s.XXXXXX)
PIDS=()
# The node's address: a link of this run's own holding one address from
# TEST-NET-2 (198.51.100.0/24, reserved for documentation: nothing routes
# it). The kubelet refuses a loopback node IP, and without a node address
# the apiserver cannot reach the kubelet (no `kubectl logs`). The link is
# a bridge with no ports (this VM's kernel has no dummy driver; a
# portless bridge is the same: it carries no traffic off the host), and
# its address is local: the apiserver reaches the kubelet through lo.
NODELINK=cre2e$$
NODELINK=${NODELINK:0:15}
NODEIP=198.51.100.77
# The kubelet's cgroup root (cgroupRoot): a name of this run's own in
# every hierarchy, so the pods' cgroups (<root>/kubepods/…) are told
# apart from every other cgroup on the host, and the teardown removes
# that tree and nothing else.
CGROOT=$NODELINK
# The top-level cgroups a kubelet, containerd or runsc makes when its
# configuration names none: compared before and after (one appearing
# would be this run's leak) and, if this run made them, removed. Other
# top-level cgroups (other sessions' containers, the machine's own) are
# neither compared nor touched.
CGNAMES="$CGROOT kubepods kubepods.slice k8s.io containerd runsc"
# The hierarchies: one directory per controller (v1, this machine), or the
# unified root (v2), whose subdirectories are cgroups, not hierarchies.
if [ -e /sys/fs/cgroup/cgroup.controllers ]; then CGDIRS=/sys/fs/cgroup/; else CGDIRS=$(ls -d /sys/fs/cgroup/*/); fi
SUMMARY_LINE=""
# The kernel settings the kubelet (protectKernelDefaults: false) may
# change: put back as found.
SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward net.ipv4.conf.all.route_localnet"
# State directories Kubernetes and containerd use by default: every one
# is pointed into $W below; any that appears anyway is reported.
HOSTDIRS="/var/lib/kubelet /var/log/pods /var/log/containers /etc/kubernetes /var/run/kubernetes /var/lib/containerd /opt/containerd /etc/cni /var/lib/cni /run/containerd"
# hoststate: what this run may change on the host, one line per item.
# Other sessions on this machine run cleanroom's sandbox meanwhile: its
# own objects (nft tables cleanroom-*, cgroups under cleanroom-sandbox,
# its unnamed namespaces) come and go and are not this run's, so they are
# left out of the comparison.
hoststate() {
  set +e +o pipefail # a grep that finds nothing is an empty list, not a failure
  ip netns list 2>/dev/null | cut -d' ' -f1 | sed 's/^/netns /'
  ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^($NODELINK|cni|cre2e)" | sed 's/^/link /'
  for t in $(nft list tables 2>/dev/null | awk '$3 !~ /^cleanroom-/ {print $2 "/" $3}'); do
    nft list table "${t%/*}" "${t#*/}" 2>/dev/null | sed "s#^#nft $t #"
  done
  iptables-save 2>/dev/null | grep -v '^[#:]' | sed 's/^/iptables /'
  for c in $CGDIRS; do
    for n in $CGNAMES; do [ -d "$c$n" ] && echo "cgroup $c$n"; done
  done
  for k in $SYSCTLS; do echo "sysctl $k=$(sysctl -n "$k" 2>/dev/null)"; done
  for d in $HOSTDIRS; do [ -e "$d" ] && echo "path $d"; done
  true
}
hoststate | sort >"$W.before"
# The sysctls as they were: restored by the teardown.
SYSCTL_BEFORE=$(for k in $SYSCTLS; do echo "$k=$(sysctl -n "$k" 2>/dev/null)"; done)
teardown() {
  local rc=$?
  set +e
  step "teardown"
  # Processes of this run, by PID: the ones started here (newest first),
  # then those that name the work directory on their command line
  # (containerd's shims, runsc's sandbox and gofer: their own sessions,
  # not children of this script), then every process in the kubelet's
  # cgroup root (the pods' pause and run containers, whose shims are
  # gone).
  for ((i=${#PIDS[@]}-1; i>=0; i--)); do kill "${PIDS[$i]}" 2>/dev/null; done
  sleep 2
  local pass p
  for pass in 1 2 3; do
    for ((i=${#PIDS[@]}-1; i>=0; i--)); do kill -9 "${PIDS[$i]}" 2>/dev/null; done
    for p in $(pgrep -f -- "$W/" || true) $(for c in $CGDIRS; do find "$c$CGROOT" -name cgroup.procs -exec cat {} + 2>/dev/null; done); do
      [ "$p" = $$ ] || kill -9 "$p" 2>/dev/null
    done
    sleep 1
  done
  # Mounts below the work directory (container rootfs, the kubelet's
  # volumes and its rshared root), deepest first, then the pods' network
  # namespaces (ip netns delete unmounts them).
  findmnt -rn -o TARGET | grep "^$W" | sort -r | while read -r m; do umount -l "$m"; done
  for ns in $(ip netns list 2>/dev/null | cut -d' ' -f1); do
    grep -qx "netns $ns" "$W.before" || { case $ns in cni-*) ip netns delete "$ns" ;; esac; }
  done
  ip link delete "$NODELINK" 2>/dev/null
  # The cgroups the cluster made, deepest first (all empty once their
  # processes are gone): the kubelet's root of this run, and any of the
  # default names that was not there before. Nothing else.
  for c in $CGDIRS; do
    for n in $CGNAMES; do
      [ -d "$c$n" ] && ! grep -qx "cgroup $c$n" "$W.before" && find "$c$n" -depth -type d -exec rmdir {} + 2>/dev/null
    done
  done
  echo "$SYSCTL_BEFORE" | while IFS='=' read -r k v; do
    [ -n "$v" ] && [ "$(sysctl -n "$k" 2>/dev/null)" != "$v" ] && sysctl -qw "$k=$v"
  done
  # Directories the parts create at fixed paths whatever their config
  # says (containerd's shim sockets under /run/containerd, libcni's
  # result cache in /var/lib/cni, the kubelet's device-plugins directory
  # and /var/log/containers): removed only when this run made them.
  for d in $HOSTDIRS; do
    grep -qx "path $d" "$W.before" || rm -rf "$d"
  done
  [ "${KEEP:-0}" = 1 ] && echo "e2e-k8s: kept $W" || rm -rf "$W"
  # What is left: a process naming the work directory, a mount below it,
  # and every host item that differs from before the run.
  local left
  left=$( { pgrep -af -- "$W/" | grep -v "^$$ " | sed 's/^/process /'
            findmnt -rn -o TARGET | grep "^$W" | sed 's/^/mount /'
            hoststate | sort | comm -13 "$W.before" - | sed 's/^/added: /'
            hoststate | sort | comm -23 "$W.before" - | grep -v '^sysctl ' | sed 's/^/gone: /'; } | head -20)
  rm -f "$W.before"
  if [ -n "$left" ]; then
    echo "e2e-k8s: teardown left or changed on the host:" >&2
    echo "$left" >&2
    TEARDOWN="teardown LEFT $(echo "$left" | wc -l) items (listed above)"
    [ $rc = 0 ] && rc=1
  else
    TEARDOWN="teardown clean (processes, mounts, netns, links, nft, iptables, cgroups, sysctls, state dirs)"
  fi
  echo "e2e-k8s summary: ${SUMMARY_LINE:-did not reach the runs}; $TEARDOWN; exit $rc"
  exit $rc
}
trap teardown EXIT
trap 'exit 130' INT TERM
start() { # name, then the command: logs to $W/log/name.log, PID kept
  local name=$1; shift
  mkdir -p "$W/log"
  "$@" >"$W/log/$name.log" 2>&1 &
  PIDS+=($!)
  # Stopped by PID in the teardown, not as a job: no "Killed" notice.
  disown $!
}
waitfor() { # description, seconds, command…
  local what=$1 secs=$2; shift 2
  for ((t=0; t<secs; t++)); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  die "$what (not ready after ${secs}s; logs in $W/log)"
}

step "3/9 PKI and kubeconfigs in $W/pki"
P=$W/pki; mkdir -p "$P"
cert() { # name CN O [SAN]
  openssl req -new -newkey rsa:2048 -nodes -keyout "$P/$1.key" -subj "/CN=$2${3:+/O=$3}" -out "$P/$1.csr" 2>/dev/null
  local ext=()
  if [ -n "${4:-}" ]; then printf 'subjectAltName=%s\n' "$4" >"$P/$1.ext"; ext=(-extfile "$P/$1.ext"); fi
  openssl x509 -req -in "$P/$1.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days 1 -out "$P/$1.crt" \
    "${ext[@]}" 2>/dev/null
}
openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$P/ca.key" -subj "/CN=cleanroom-e2e-ca" -days 1 -out "$P/ca.crt" 2>/dev/null
cert apiserver kube-apiserver "" "IP:127.0.0.1,DNS:localhost,IP:10.96.0.1"
cert admin admin system:masters
cert node system:node:e2e-node system:nodes
openssl genrsa -out "$P/sa.key" 2048 2>/dev/null
kubeconfig() { # file cert
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "https://127.0.0.1:16443", certificate-authority: "$P/ca.crt"}}]
users: [{name: u, user: {client-certificate: "$P/$2.crt", client-key: "$P/$2.key"}}]
contexts: [{name: e2e, context: {cluster: e2e, user: u}}]
current-context: e2e
KC
}
kubeconfig "$W/admin.kubeconfig" admin
kubeconfig "$W/node.kubeconfig" node
export KUBECONFIG=$W/admin.kubeconfig
kubectl() { "$K/kubectl" "$@"; }

step "4/9 etcd, kube-apiserver, kube-controller-manager, kube-scheduler"
start etcd etcd --data-dir "$W/etcd" --listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 \
  --listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
  --initial-cluster default=http://127.0.0.1:23800
start kube-apiserver "$K/kube-apiserver" --etcd-servers http://127.0.0.1:23790 --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
  --secure-port 16443 --tls-cert-file "$P/apiserver.crt" --tls-private-key-file "$P/apiserver.key" --client-ca-file "$P/ca.crt" \
  --service-account-key-file "$P/sa.key" --service-account-signing-key-file "$P/sa.key" \
  --service-account-issuer https://kubernetes.default.svc --service-cluster-ip-range 10.96.0.0/24 \
  --authorization-mode Node,RBAC --kubelet-client-certificate "$P/admin.crt" --kubelet-client-key "$P/admin.key" \
  --cert-dir "$W/apiserver" --endpoint-reconciler-type none --kubelet-preferred-address-types InternalIP
waitfor "kube-apiserver" 180 kubectl get --raw /readyz
start kube-controller-manager "$K/kube-controller-manager" --kubeconfig "$W/admin.kubeconfig" --bind-address 127.0.0.1 \
  --service-account-private-key-file "$P/sa.key" --root-ca-file "$P/ca.crt" --leader-elect=false
start kube-scheduler "$K/kube-scheduler" --kubeconfig "$W/admin.kubeconfig" --bind-address 127.0.0.1 --leader-elect=false

step "5/9 images: pause and the run image (cleanroom, node), imported into containerd"
I=$W/img; mkdir -p "$I"
go build -o "$I/cleanroom" ./cmd/cleanroom || die "building cleanroom"
cat >"$I/pause.go" <<'GO'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

// The pod sandbox's only process: wait for the end, reap nothing else.
func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
GO
(cd "$I" && CGO_ENABLED=0 GO111MODULE=off go build -o pause pause.go) || die "building the pause binary"
# oci_image NAME:TAG ROOTFS ENTRYPOINT: writes an OCI image layout tar.
oci_image() {
  local ref=$1 root=$2 entry=$3 d
  d=$(mktemp -d "$I/oci.XXXX"); mkdir -p "$d/blobs/sha256"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$root" -cf "$d/layer.tar" .
  local layer; layer=$(sha256sum "$d/layer.tar" | cut -d' ' -f1); mv "$d/layer.tar" "$d/blobs/sha256/$layer"
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["%s"],"Env":["PATH=/usr/local/bin:/usr/bin:/bin"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$entry" "$layer" >"$d/config.json"
  local cfg; cfg=$(sha256sum "$d/config.json" | cut -d' ' -f1); mv "$d/config.json" "$d/blobs/sha256/$cfg"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%d}]}' \
    "$cfg" "$(stat -c %s "$d/blobs/sha256/$cfg")" "$layer" "$(stat -c %s "$d/blobs/sha256/$layer")" >"$d/manifest.json"
  local man; man=$(sha256sum "$d/manifest.json" | cut -d' ' -f1)
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$man" "$(stat -c %s "$d/manifest.json")" "$ref" "${ref##*:}" >"$d/index.json"
  mv "$d/manifest.json" "$d/blobs/sha256/$man"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$d/oci-layout"
  tar -C "$d" -cf "$I/${ref//[\/:]/_}.tar" oci-layout index.json blobs
  echo "$man"
}
# A file and the shared libraries it loads, copied at their own paths.
withlibs() { # root file…
  local root=$1; shift
  for f in "$@"; do
    for p in "$f" $(ldd "$f" 2>/dev/null | grep -o '/[^ ]*' || true); do
      mkdir -p "$root$(dirname "$p")"; cp -L "$p" "$root$p"
    done
  done
}
mkdir -p "$I/pause-root"; cp "$I/pause" "$I/pause-root/pause"
PAUSE_DIGEST=$(oci_image cleanroom.invalid/pause:e2e "$I/pause-root" /pause)
R=$I/run-root; mkdir -p "$R/usr/local/bin" "$R/tmp" "$R/results" "$R/workspace"
cp "$I/cleanroom" "$R/usr/local/bin/cleanroom"
withlibs "$R" "$I/cleanroom" "$(command -v node)" /bin/sh /usr/bin/env /usr/bin/cat /usr/bin/ls /usr/bin/tail /usr/bin/cut /usr/bin/tr /usr/bin/wc /usr/bin/date /usr/bin/sed
RUN_DIGEST=$(oci_image cleanroom.invalid/run:e2e "$R" /usr/local/bin/cleanroom)
IMAGE=cleanroom.invalid/run@sha256:$RUN_DIGEST

step "6/9 containerd (runc, gvisor), loopback-only CNI, node address $NODEIP on $NODELINK, kubelet"
mkdir -p "$W/cni" "$W/containerd"
# No network for pods: the loopback plugin brings up lo in the pod's
# namespace and nothing else is put there. containerd 1.6 refuses a
# sandbox whose CNI result has no address for eth0, and libcni gives an
# address with no interface to eth0: host-local, run as the last plugin,
# leases one from TEST-NET-1 (192.0.2.0/24, never routed) for the pod's
# status and frees it when the pod goes. No interface carries it, no
# route names it (the in-pod check lists what is there).
cat >"$W/cni/10-e2e.conflist" <<CNI
{"cniVersion": "0.4.0", "name": "e2e", "plugins": [
 {"type": "loopback"},
 {"type": "host-local", "ipam": {"type": "host-local", "dataDir": "$W/cni-ipam", "ranges": [[{"subnet": "192.0.2.0/24"}]]}}]}
CNI
ip link add "$NODELINK" type bridge || die "adding the node's link $NODELINK"
ip addr add "$NODEIP/32" dev "$NODELINK" && ip link set "$NODELINK" up || die "addressing $NODELINK"
# The kubelet's cgroup root must exist; a new cpuset cgroup (v1) starts
# with no CPUs and no memory nodes, so it gets its parent's (a v2 root
# has no cpuset.cpus of its own: there the child inherits).
for c in $CGDIRS; do
  mkdir "$c$CGROOT" || die "creating the cgroup $c$CGROOT"
  if [ -e "${c}cpuset.cpus" ]; then
    cat "${c}cpuset.cpus" >"$c$CGROOT/cpuset.cpus" && cat "${c}cpuset.mems" >"$c$CGROOT/cpuset.mems" || die "cpuset of $c$CGROOT"
  fi
done
#
# runsc through containerd's runc shim (Debian ships no
# containerd-shim-runsc-v1; the shim drives runsc with runc's command
# line), through a wrapper that adds --network=none: the sandbox's
# netstack has only lo, whatever the CNI put in the pod's namespace.
RUNSC=$(command -v runsc 2>/dev/null || echo /usr/bin/runsc)
mkdir -p "$W/bin"
#
# The runc shim knows one process per container: for a container runsc
# adds to the pod's sandbox (CRI annotation container-type "container")
# it records the sandbox's PID, so the container's exit is never seen and
# the pod stays Running until its deadline. The wrapper therefore marks
# every container a sandbox of its own (the pod's containers do not
# share a netstack anyway under --network=none).
# When such a container has exited, containerd kills it anyway; runsc
# answers "sandbox is not running", which the shim (it knows runc's words
# only) takes for a failure, and the exit is never handled: the wrapper
# turns that answer into the success it is.
cat >"$W/bin/runsc-none" <<SH
#!/bin/sh
b=; prev=; cmd=
for a in "\$@"; do
  [ "\$prev" = --bundle ] && b=\$a
  case \$a in create|kill|start|delete|state|run|exec|ps|events|pause|resume|update) [ -z "\$cmd" ] && cmd=\$a ;; esac
  prev=\$a
done
[ -n "\$b" ] && sed -i 's/"io.kubernetes.cri.container-type":"container"/"io.kubernetes.cri.container-type":"sandbox"/' "\$b/config.json"
if [ "\$cmd" = kill ]; then
  out=\$($RUNSC --network=none "\$@" 2>&1) && exit 0
  case \$out in *"is not running"*) exit 0 ;; esac
  printf '%s\\n' "\$out" >&2
  exit 1
fi
exec $RUNSC --network=none "\$@"
SH
chmod +x "$W/bin/runsc-none"
# The kubelet asks for a negative oom_score_adj (the pause sandbox -998,
# Guaranteed pods -997); lowering it needs CAP_SYS_RESOURCE. Where the
# host's bounding set lacks it (this VM: CapBnd without bit 24), runc's
# nsexec dies writing /proc/self/oom_score_adj and every sandbox fails
# with "can't get final child's PID from pipe: EOF". containerd then
# clamps the score to its own (restrict_oom_score_adj, made for rootless).
RESTRICT_OOM=false
[ $(( 0x$(awk '/^CapBnd:/ {print $2}' /proc/self/status) >> 24 & 1 )) = 1 ] || RESTRICT_OOM=true
cat >"$W/containerd/config.toml" <<TOML
version = 2
root = "$W/containerd/root"
state = "$W/containerd/state"
[grpc]
  address = "$W/containerd/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$W/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "cleanroom.invalid/pause:e2e"
  restrict_oom_score_adj = $RESTRICT_OOM
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$W/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gvisor]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.gvisor.options]
        BinaryName = "$W/bin/runsc-none"
TOML
start containerd containerd --config "$W/containerd/config.toml"
waitfor "containerd" 60 ctr -a "$W/containerd/containerd.sock" version
for t in "$I"/*.tar; do
  ctr -a "$W/containerd/containerd.sock" -n k8s.io images import "$t" >/dev/null || die "importing $t"
done
# The plan names the image by digest: that name must resolve locally too,
# or the kubelet would try to pull it from a registry that does not exist.
ctr -a "$W/containerd/containerd.sock" -n k8s.io images tag cleanroom.invalid/run:e2e "$IMAGE" >/dev/null || die "tagging $IMAGE"
cat >"$W/kubelet.yaml" <<KY
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}, x509: {clientCAFile: "$P/ca.crt"}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: /$CGROOT
failSwapOn: false
failCgroupV1: false
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://$W/containerd/containerd.sock
staticPodPath: ""
podLogsDir: "$W/pod-logs"
address: $NODEIP
port: 10250
readOnlyPort: 0
healthzPort: 0
KY
start kubelet "$K/kubelet" --config "$W/kubelet.yaml" --kubeconfig "$W/node.kubeconfig" --root-dir "$W/kubelet" \
  --hostname-override e2e-node --node-ip $NODEIP --cert-dir "$W/kubelet-pki"
waitfor "node e2e-node Ready" 180 sh -c "'$K/kubectl' get node e2e-node -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"

step "7/9 RuntimeClasses, the results volume, $N revealed worlds per class"
mkdir -p "$W/share"
kubectl apply -f - >/dev/null <<YAML || die "RuntimeClasses and the results volume"
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: runc}
handler: runc
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: gvisor
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: cleanroom-e2e-results}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteMany]
  storageClassName: ""
  hostPath: {path: "$W/share", type: Directory}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: cleanroom-results, namespace: default}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: cleanroom-e2e-results
  resources: {requests: {storage: 1Gi}}
YAML
CR=$I/cleanroom
# The pod's command: first the network check of the pod's own namespace
# (its record printed; anything short of full isolation ends the pod
# before the candidate runs, as a failing createRuntime hook stops
# `sandbox bundle`'s container), then the
# measurement and completion of a revealed world, the adapters as plain
# children (the pod's container is the sandbox), the interop findings
# classified as the operator guide does, then the plan entry bound beside
# the final record.
INPOD='cd "$CLEANROOM_RESULTS" || exit 2
t0=$(date +%s%N)
rc=0; cleanroom sandbox hook --own-netns 2>/tmp/net || rc=$?
sed "s/^/netcheck: /" /tmp/net
echo "netcheck: exit $rc"
[ $rc = 0 ] || { echo "netcheck: isolation not proved: the candidate is not run"; exit 3; }
set -e
if ! cleanroom run complete --no-sandbox --world . >/tmp/first 2>&1; then
  cat /tmp/first
  for id in $(cleanroom run finding list --world . --unclassified -q); do
    cleanroom run finding classify "$id" --world . --class GO_PRODUCER_DEFECT --ruling "e2e: the candidate does not observe H4" >/dev/null
  done
  cleanroom run complete --no-sandbox --world .
fi
cleanroom fleet bind
echo "pod-command-ms=$(( ($(date +%s%N) - t0) / 1000000 ))"'

# prepare DIR MODEL: the synthetic world issued, pinned, frozen, revealed.
prepare() {
  cp -r testdata/world "$1"; chmod +x "$1/implementer/tally-candidate"
  ( cd "$1"
    "$CR" release issue docs/spec/proof-wire --spec-revision 1 --experiment-revision 1 --corpus-revision 1 --holdout "$1/governance/holdout" >/dev/null
    "$CR" run pin --world . --reference governance/reference-adapter.json >/dev/null
    # The candidates differ by the model that wrote them: the synthetic
    # world has one candidate program, labelled "candidate".
    "$CR" run freeze --world . --implementation candidate --files implementer/tally-candidate --binary implementer/tally-candidate \
      --toolchain node --model "$2" --tool-version e2e-k8s >/dev/null
    "$CR" run reveal --world . >/dev/null )
}
# The same pod command on this host, for the cluster/local ratio.
prepare "$W/local" scripted-local || die "preparing the local reference run"
l0=$(date +%s%N)
# In a network namespace of its own with only lo up, as a pod has here:
# the command's own check must pass on this host too (unshare's namespace
# goes with its last process; nothing to remove).
(cd "$W/local" && CLEANROOM_RESULTS=$W/local CLEANROOM_RUN=local CLEANROOM_KIND=blind CLEANROOM_RUN_SHA256=$(printf '0%.0s' {1..64}) \
  CLEANROOM_PLAN_SHA256=$(printf '0%.0s' {1..64}) PATH=$I:$PATH unshare --net sh -c 'ip link set lo up && exec sh -c "$1"' - "$INPOD" >"$W/log/local.log" 2>&1) || die "the pod command on this host (log $W/log/local.log)"
LOCAL_MS=$(( ($(date +%s%N) - l0) / 1000000 ))
ms2s() { awk "BEGIN{printf \"%.1f\", $1 / 1000}"; }

# jobstates CLASS: one line per Job of the class: name, then Complete,
# Failed or running.
jobstates() {
  kubectl get jobs -l app.kubernetes.io/managed-by=cleanroom -o \
    jsonpath='{range .items[*]}{.metadata.name} s={.status.succeeded} f={.status.failed}{"\n"}{end}' 2>/dev/null |
    awk -v c="blind-$1-" 'index($1, c) == 1 { s = ($2 == "s=1") ? "Complete" : (($3 != "f=" && $3 != "f=0") ? "Failed" : "running"); print $1, s }'
}

SUMMARY=()
FAIL=0
for class in $CLASSES; do
  step "8/9 [$class] prepare, plan, apply, wait, collect, verify"
  list=$W/runs-$class.json
  echo "[" >"$list"
  for i in $(seq 1 "$N"); do
    name=blind-$class-$i
    w=$W/share/$name
    prepare "$w" "scripted-$i" || die "[$class] preparing $name"
    rec=$w/governance/blind-run.json
    srel=$(sed -n 's/.*"spec_release_id": *"\([^"]*\)".*/\1/p' "$rec" | head -1)
    bpkg=$(sed -n 's/.*"blind_package_id": *"\([^"]*\)".*/\1/p' "$rec" | head -1)
    [ -n "$srel" ] && [ -n "$bpkg" ] || die "[$class] reading srel/bpkg of $name"
    chown -R 65534:65534 "$w"
    [ "$i" -gt 1 ] && echo "," >>"$list"
    node -e 'process.stdout.write(JSON.stringify({name: process.argv[1], kind: "blind", srel: process.argv[2], bpkg: process.argv[3],
      candidate: "candidate", image: process.argv[4], command: ["/bin/sh", "-c", process.argv[5]], runtime_class: process.argv[6],
      allow: [], limits: {cpu: "1", memory: "1Gi", ephemeral_storage: "1Gi", deadline_seconds: 900}, results_claim: "cleanroom-results"}))' \
      "$name" "$srel" "$bpkg" "$IMAGE" "$INPOD" "$class" >>"$list"
  done
  echo "]" >>"$list"
  "$CR" fleet plan --runs "$list" --out "$W/plan-$class" >/dev/null || die "[$class] fleet plan"
  t0=$(date +%s%N)
  kubectl apply -f "$W/plan-$class/k8s/" >/dev/null || die "[$class] kubectl apply -f plan/k8s/"
  # Until every Job is Complete or Failed. A pod whose sandbox the
  # runtime cannot create never fails its Job (the kubelet retries until
  # the deadline): that is read from the events and ends the wait.
  stuck=""
  for ((t=0; t<${WAIT:-1200}; t++)); do
    [ "$(jobstates "$class" | grep -c ' running$')" = 0 ] && [ "$(jobstates "$class" | wc -l)" = "$N" ] && break
    if [ $((t % 10)) = 9 ] && [ $t -ge 60 ]; then
      stuck=$(kubectl get events -o jsonpath='{range .items[?(@.reason=="FailedCreatePodSandBox")]}{.involvedObject.name}: {.message}{"\n"}{end}' 2>/dev/null |
        grep "^blind-$class-" | head -1 || true)
      [ -n "$stuck" ] && break
    fi
    sleep 1
  done
  t1=$(date +%s%N)
  jobstates "$class" >"$W/log/jobs-$class.txt"
  kubectl get jobs,pods -o wide >>"$W/log/jobs-$class.txt" 2>&1
  completed=$(grep -c ' Complete$' "$W/log/jobs-$class.txt" || true)
  # Per run: the Job's start to its completion, as the Job controller
  # recorded them (whole seconds): scheduling, sandbox, image, run.
  per=$(kubectl get jobs -o jsonpath='{range .items[*]}{.metadata.name} {.status.startTime} {.status.completionTime}{"\n"}{end}' |
    grep "^blind-$class-" | sort -V | while read -r n s c; do [ -n "$c" ] && echo $(( $(date -d "$c" +%s) - $(date -d "$s" +%s) )); done | paste -sd/ || true)
  collected=0; verified=0; isolated=0; inpod=(); verdicts=(); reason=""; problems=""; nologs=""
  "$CR" fleet collect --runs "$W/plan-$class/runs.json" --from "$W/share" --into "$W/collected-$class" >"$W/log/collect-$class.log" 2>&1 || true
  for i in $(seq 1 "$N"); do
    name=blind-$class-$i
    # The pod's output through the apiserver, which asks the kubelet
    # at the node's address.
    kubectl logs "job/$name" >"$W/log/pod-$name.log" 2>&1 || nologs+="${nologs:+, }$name ($(tail -1 "$W/log/pod-$name.log" | cut -c1-120))"
    grep -q "^verified .*$name .*COMPLETE" "$W/log/collect-$class.log" && collected=$((collected+1))
    # Verified means COMPLETE: `run verify` also says VERIFIED of a world
    # that is only REVEALED (a run that never completed, as under runsc).
    v=$("$CR" run verify --world "$W/collected-$class/$name" 2>/dev/null || true)
    echo "$v" | grep -q "^VERIFIED" && echo "$v" | grep -q "^run .* COMPLETE$" && verified=$((verified+1))
    # The run's isolation verdict, from the check's record and exit:
    # full, not isolated (a problem found), or not proved (the check
    # could not complete, which is no pass either).
    if grep -q '^netcheck: isolation: full_isolation, enforced=true' "$W/log/pod-$name.log" && grep -q '^netcheck: exit 0$' "$W/log/pod-$name.log"; then
      isolated=$((isolated+1)); verdicts+=(full)
    elif grep -q '^netcheck: isolation: ' "$W/log/pod-$name.log"; then
      verdicts+=("NOT-isolated")
    elif grep -q '^netcheck: ' "$W/log/pod-$name.log"; then
      verdicts+=("not-proved")
    else
      verdicts+=("no-output")
    fi
    # What kept a pod from full isolation: the check's problems, or its
    # error when it could not complete (both printed by the hook).
    [ -z "$problems" ] && problems=$(sed -n 's/^netcheck:   problem: //p; s/^netcheck: cleanroom: //p' "$W/log/pod-$name.log" | paste -sd, | cut -c1-160 || true)
    ms=$(sed -n 's/^pod-command-ms=//p' "$W/log/pod-$name.log"); [ -n "$ms" ] && inpod+=("$(ms2s "$ms")")
    [ -z "$reason" ] && ! grep -q "^$name Complete$" "$W/log/jobs-$class.txt" &&
      reason=$(grep -E '^cleanroom: |error|refus' "$W/log/pod-$name.log" | tail -1 | cut -c1-200 || true)
  done
  kubectl delete -f "$W/plan-$class/k8s/" --wait=true --timeout=120s >/dev/null 2>&1 || true
  total=$(( (t1 - t0) / 1000000 ))
  mean=$(echo "$per" | tr / '\n' | awk 'NF {s += $1; n++} END {if (n) printf "%.1f", s / n}')
  ratio=""
  [ -n "$mean" ] && ratio=$(awk "BEGIN{printf \"%.1f\", $mean * 1000 / $LOCAL_MS}")
  line="$class: planned $N, completed $completed, collected $collected, verified $verified; per-run $([ -n "$per" ] && echo "${per}s" || echo none) (mean ${mean:-?}s; in-pod command $(IFS=/; echo "${inpod[*]:-?}")s; local ${LOCAL_MS:+$(ms2s "$LOCAL_MS")}s; cluster/local ${ratio:-?}x); apply→all Jobs done $(ms2s "$total")s"
  line+="; in-pod isolation check per run: $(IFS=/; echo "${verdicts[*]}") (full in $isolated/$N)${problems:+ (seen: $problems)}"
  [ -n "$nologs" ] && line+="; kubectl logs FAILED: $nologs" && FAIL=1
  # Every class must complete and verify every run: gVisor too, since
  # cleanroom walks descriptors where openat2 is ENOSYS (internal/fsx).
  if [ "$verified" != "$N" ]; then
    line+="; FAILED: ${stuck:-${reason:-see $W/log}}"
    FAIL=1
  fi
  SUMMARY+=("$line")
  step "$line"
done

step "9/9 summary"
SUMMARY_LINE="$(printf '%s; ' "${SUMMARY[@]}")NetworkPolicy: accepted, not enforced (pods have no network here; enforcing it needs a policy-enforcing CNI, none in Debian)"
exit $FAIL
