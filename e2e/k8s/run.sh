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
# network namespaces and the bridge the CNI plugins made for this run, and
# the directory itself (KEEP=1 keeps it for inspection).
#
# What it does not prove: NetworkPolicy enforcement. The CNI here (the
# reference bridge plugin) does not enforce NetworkPolicy — no
# policy-enforcing plugin is packaged in Debian — so the objects are
# accepted and ignored. Each run instead records from inside its pod what
# its network is (links and routes), and the summary counts the runs whose
# pod saw a network it should not (see NET below).
#
# Status when written: not yet seen to print its summary line — the first
# Kubernetes build did not finish in that session. Checked on their own:
# the run image (built, imported, resolved by digest; its command completes
# and binds a revealed world under runc via ctr), the PKI, etcd, and
# containerd's CRI config. Known blocker for gvisor: Debian's runsc lacks
# openat2 (see the containerd section).
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
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null || die "apt-get install ${need[*]}"
fi
command -v runsc >/dev/null || { echo "e2e-k8s: runsc is not installable here: gvisor skipped"; CLASSES=${CLASSES//gvisor/}; }

W=$(mktemp -d /tmp/cleanroom-e2e-k8s.XXXXXX)
PIDS=()
NETNS_BEFORE=$(ip netns list 2>/dev/null | cut -d' ' -f1 | sort)
# containerd's shims keep their sockets and FIFOs under /run/containerd
# whatever the config says: removed at the end only if this run made it.
RUN_CONTAINERD_EXISTED=0; [ -e /run/containerd ] && RUN_CONTAINERD_EXISTED=1
BRIDGE=cre2e$$
BRIDGE=${BRIDGE:0:15}
teardown() {
  local rc=$?
  set +e
  step "teardown"
  for ((i=${#PIDS[@]}-1; i>=0; i--)); do kill "${PIDS[$i]}" 2>/dev/null; done
  # containerd's shims outlive it (they are their own session): the
  # ones serving this run name its socket path on their command line.
  for p in $(pgrep -f -- "$W/containerd/containerd.sock" || true); do kill "$p" 2>/dev/null; done
  sleep 2
  for ((i=${#PIDS[@]}-1; i>=0; i--)); do kill -9 "${PIDS[$i]}" 2>/dev/null; done
  for p in $(pgrep -f -- "$W/containerd/containerd.sock" || true); do kill -9 "$p" 2>/dev/null; done
  findmnt -rn -o TARGET | grep "^$W" | sort -r | while read -r m; do umount -l "$m"; done
  for ns in $(comm -13 <(echo "$NETNS_BEFORE") <(ip netns list 2>/dev/null | cut -d' ' -f1 | sort)); do
    case $ns in cni-*) ip netns delete "$ns" ;; esac
  done
  ip link delete "$BRIDGE" 2>/dev/null
  [ $RUN_CONTAINERD_EXISTED = 0 ] && rm -rf /run/containerd
  [ "${KEEP:-0}" = 1 ] && echo "e2e-k8s: kept $W" || rm -rf "$W"
  exit $rc
}
trap teardown EXIT
trap 'exit 130' INT TERM
start() { # name, then the command: logs to $W/log/name.log, PID kept
  local name=$1; shift
  mkdir -p "$W/log"
  "$@" >"$W/log/$name.log" 2>&1 &
  PIDS+=($!)
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
  --authorization-mode Node,RBAC --kubelet-client-certificate "$P/admin.crt" --kubelet-client-key "$P/admin.key"
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
withlibs "$R" "$I/cleanroom" "$(command -v node)" /bin/sh /usr/bin/env /usr/bin/cat /usr/bin/ls /usr/bin/tail /usr/bin/cut /usr/bin/tr /usr/bin/wc
RUN_DIGEST=$(oci_image cleanroom.invalid/run:e2e "$R" /usr/local/bin/cleanroom)
IMAGE=cleanroom.invalid/run@sha256:$RUN_DIGEST

step "6/9 containerd (runc, gvisor), CNI bridge $BRIDGE, kubelet"
mkdir -p "$W/cni" "$W/containerd"
cat >"$W/cni/10-e2e.conflist" <<CNI
{"cniVersion": "0.4.0", "name": "e2e", "plugins": [
 {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false,
  "ipam": {"type": "host-local", "dataDir": "$W/cni-ipam", "ranges": [[{"subnet": "10.244.77.0/24"}]]}},
 {"type": "loopback"}]}
CNI
# runsc through containerd's runc shim (Debian ships no
# containerd-shim-runsc-v1; the shim drives runsc with runc's command
# line). Seen here with ctr: it starts, and in the pod's network
# namespace (CNI) runsc's netstack takes the pod's interfaces. Debian's
# runsc 20221219 answers ENOSYS to openat2, which cleanroom's evidence
# reader uses, so `run complete` inside a gvisor pod refuses the world
# ("function not implemented") until the reader falls back or a newer
# gVisor is installed.
cat >"$W/containerd/config.toml" <<TOML
version = 2
root = "$W/containerd/root"
state = "$W/containerd/state"
[grpc]
  address = "$W/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "cleanroom.invalid/pause:e2e"
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
        BinaryName = "$(command -v runsc 2>/dev/null || echo /usr/bin/runsc)"
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
failSwapOn: false
failCgroupV1: false
makeIPTablesUtilChains: false
containerRuntimeEndpoint: unix://$W/containerd/containerd.sock
staticPodPath: ""
address: 127.0.0.1
port: 10250
readOnlyPort: 0
healthzPort: 0
KY
start kubelet "$K/kubelet" --config "$W/kubelet.yaml" --kubeconfig "$W/node.kubeconfig" --root-dir "$W/kubelet" \
  --hostname-override e2e-node --node-ip 127.0.0.1
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
# The pod's command: the measurement and completion of a revealed world,
# the adapters as plain children (the pod's container is the sandbox),
# the interop findings classified as the operator guide does, then the
# plan entry bound beside the final record. NET records what network the
# pod saw.
INPOD='set -e; cd "$CLEANROOM_RESULTS"
echo "links=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | tr "\n" " ") routes=$(tail -n +2 /proc/net/route | wc -l)" > /tmp/net
if ! cleanroom run complete --no-sandbox --world . >/tmp/first 2>&1; then
  for id in $(cleanroom run finding list --world . --unclassified -q); do
    cleanroom run finding classify "$id" --world . --class GO_PRODUCER_DEFECT --ruling "e2e: the candidate does not observe H4" >/dev/null
  done
  cleanroom run complete --no-sandbox --world .
fi
cat /tmp/net
cleanroom fleet bind'

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
l0=$(date +%s.%N)
(cd "$W/local" && CLEANROOM_RESULTS=$W/local CLEANROOM_RUN=local CLEANROOM_KIND=blind CLEANROOM_RUN_SHA256=$(printf '0%.0s' {1..64}) \
  CLEANROOM_PLAN_SHA256=$(printf '0%.0s' {1..64}) PATH=$I:$PATH sh -c "$INPOD" >"$W/log/local.log" 2>&1) || die "the pod command on this host (log $W/log/local.log)"
LOCAL=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $l0}")

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
  t0=$(date +%s.%N)
  kubectl apply -f "$W/plan-$class/k8s/" >/dev/null || die "[$class] kubectl apply -f plan/k8s/"
  if ! kubectl wait --for=condition=complete --timeout=1200s job -l "app.kubernetes.io/managed-by=cleanroom" >/dev/null 2>&1; then
    kubectl get jobs,pods -o wide >&2 || true
    FAIL=1
  fi
  t1=$(date +%s.%N)
  per=$(kubectl get jobs -o jsonpath='{range .items[*]}{.metadata.name} {.status.startTime} {.status.completionTime}{"\n"}{end}' |
    grep "^blind-$class-" | while read -r n s c; do [ -n "$c" ] && echo $(( $(date -d "$c" +%s) - $(date -d "$s" +%s) )); done | paste -sd/)
  collected=0; verified=0; net_bad=0
  if "$CR" fleet collect --runs "$W/plan-$class/runs.json" --from "$W/share" --into "$W/collected-$class" > "$W/log/collect-$class.log" 2>&1; then :; fi
  for i in $(seq 1 "$N"); do
    name=blind-$class-$i
    grep -q "^verified .*$name .*COMPLETE" "$W/log/collect-$class.log" && collected=$((collected+1))
    "$CR" run verify --world "$W/collected-$class/$name" 2>/dev/null | grep -q "^VERIFIED" && verified=$((verified+1))
    # Without a policy-enforcing CNI every pod has the bridge's eth0 and
    # a default route: counted and reported, not hidden.
    kubectl logs "job/$name" 2>/dev/null | grep -Eq '^links=lo +routes=0$' || net_bad=$((net_bad+1))
  done
  kubectl delete -f "$W/plan-$class/k8s/" --wait=false >/dev/null 2>&1 || true
  total=$(awk "BEGIN{printf \"%d\", $t1 - $t0}")
  SUMMARY+=("$class: planned $N, completed $collected, verified $verified, per-run ${per:-?}s (local ${LOCAL}s), apply-to-done ${total}s, pods with a network beyond lo: $net_bad")
  [ "$verified" = "$N" ] || FAIL=1
done

step "9/9 summary"
echo "e2e-k8s summary: $(IFS=';'; echo "${SUMMARY[*]}")"
exit $FAIL
