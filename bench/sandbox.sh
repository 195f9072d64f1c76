#!/bin/sh
# bench/sandbox.sh — `cleanroom sandbox exec -- /bin/true` (network namespace,
# mechanism check, rootfs, cgroups, container, teardown) side by side with
# `bwrap --unshare-all --ro-bind /usr /usr … /bin/true` (Debian package
# bubblewrap; skipped when absent), N runs each, medians and their ratio.
#   N=50 bench/sandbox.sh          (needs root; target: median ≤ 60 ms, ≤ 3× bwrap)
# The Go benchmarks (go test -bench . ./sandbox) measure the same exec.
set -eu
N=${N:-50}
cd "$(dirname "$0")/.."
base=$(mktemp -d)
trap 'rm -rf "$base"' EXIT INT TERM
go build -o "$base/cleanroom" ./cmd/cleanroom

# median_ms CMD…: runs CMD N times, prints the median wall time in ms.
median_ms() {
	i=0
	while [ "$i" -lt "$N" ]; do
		t0=$(date +%s%N)
		"$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
		t1=$(date +%s%N)
		echo $(((t1 - t0) / 1000))
		i=$((i + 1))
	done | sort -n | awk '{ a[NR] = $1 } END { printf "%.1f", a[int((NR + 1) / 2)] / 1000 }'
}

cr=$(median_ms "$base/cleanroom" sandbox exec -- /bin/true)
echo "cleanroom sandbox exec -- /bin/true: median ${cr} ms (N=$N)"
if command -v bwrap >/dev/null 2>&1; then
	bw=$(median_ms bwrap --unshare-all --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
		--symlink usr/lib64 /lib64 --proc /proc --dev /dev /bin/true)
	echo "bwrap --unshare-all … /bin/true:      median ${bw} ms (N=$N)"
	awk -v a="$cr" -v b="$bw" 'BEGIN { printf "ratio: %.2f× bwrap\n", a / b }'
else
	echo "bwrap not installed (apt-get install bubblewrap): no comparison"
fi
