#!/usr/bin/env bash
# Builds the Kubernetes control plane, kubelet and kubectl for make e2e-k8s
# from k8s.io/kubernetes through the Go module proxy (no release binaries,
# no git clone): a scratch module requires k8s.io/kubernetes at $K8S_VERSION
# and replaces every k8s.io staging module its go.mod names with the
# published v0.<minor>.<patch> of the same release. The binaries are cached
# in $CACHE/bin (default /var/cache/cleanroom-e2e-k8s/<version>): a second
# run builds nothing. About 7 minutes of 2 idle cores the first time, and
# ~1.5 GiB of module cache plus ~600 MiB of binaries.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-v1.37.2}
CACHE=${CLEANROOM_E2E_CACHE:-/var/cache/cleanroom-e2e-k8s}/$K8S_VERSION
BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
export GOFLAGS=-mod=mod

have=1
for b in "${BINS[@]}"; do [ -x "$CACHE/bin/$b" ] || have=0; done
if [ $have = 1 ]; then
  echo "e2e-k8s: binaries cached in $CACHE/bin"
  exit 0
fi

mkdir -p "$CACHE/src" "$CACHE/bin"
cd "$CACHE/src"
# The staging modules k8s.io/kubernetes replaces with ./staging/src/...:
# read from its own go.mod (fetched through the proxy), so the list is the
# release's, not a guess.
gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\s*"GoMod": "\(.*\)",$/\1/p')
staging=$(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$gomod" | sort -u)
if [ -z "$staging" ]; then
  echo "e2e-k8s: no staging replaces found in $gomod" >&2
  exit 1
fi
staging_version=v0.${K8S_VERSION#v1.}
goversion=$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$gomod")
{
  echo "module cleanroom.invalid/e2e-k8s"
  echo
  echo "go $goversion"
  echo
  echo "require k8s.io/kubernetes $K8S_VERSION"
  echo
  for m in $staging; do echo "replace $m => $m $staging_version"; done
} > go.mod
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubectl/pkg/cmd"
)
GO
echo "e2e-k8s: resolving k8s.io/kubernetes $K8S_VERSION with $(echo "$staging" | wc -w) staging modules at $staging_version"
go mod tidy -e >/dev/null 2>&1 || true
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
  # A binary already built (by an earlier run that was cut short, or
  # built beside this one) is kept.
  [ -x "$CACHE/bin/$b" ] && continue
  pkg=k8s.io/kubernetes/cmd/$b
  echo "e2e-k8s: building $b"
  # The binaries are built into a temporary name and renamed: a build cut
  # short leaves no half-written binary that a later run would take as cached.
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$CACHE/bin/.$b.tmp" "$pkg"
  mv "$CACHE/bin/.$b.tmp" "$CACHE/bin/$b"
done
echo "e2e-k8s: built ${BINS[*]} into $CACHE/bin"
