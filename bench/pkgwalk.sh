#!/bin/sh
# bench/pkgwalk.sh — the package walk and emit side by side with coreutils,
# on tmpfs: `cleanroom package id` against `find -type f | xargs sha256sum`,
# `cleanroom package emit` against `cp -a`, and the hashing limit
# `openssl speed -evp sha256` (16 KiB blocks, one core). Sizes:
#   N=10000 SIZE_MB=1024 bench/pkgwalk.sh      (defaults: the issue's target)
# The Go benchmarks (go test -bench . ./pkgwalk) report the same ratios.
set -eu
N=${N:-10000}
SIZE_MB=${SIZE_MB:-1024}
cd "$(dirname "$0")/.."
base=$(mktemp -d /dev/shm/pkgwalk-bench.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$base"' EXIT INT TERM
go build -o "$base/cleanroom" ./cmd/cleanroom

mkdir -p "$base/pkg/data"
head -c "$((SIZE_MB * 1024 * 1024))" /dev/urandom >"$base/big"
split -a 5 -d -n "$N" "$base/big" "$base/pkg/data/f"
rm "$base/big"

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

t0=$(now); id=$("$base/cleanroom" package id "$base/pkg"); t1=$(now)
find "$base/pkg" -type f -print0 | xargs -0 sha256sum >/dev/null; t2=$(now)
"$base/cleanroom" package emit --no-sync --from "$base/pkg" --into "$base/emitted" --expect "$id" >/dev/null; t3=$(now)
cp -a "$base/pkg" "$base/copied"; t4=$(now)

walk=$(secs "$t0" "$t1"); sums=$(secs "$t1" "$t2"); emit=$(secs "$t2" "$t3"); cp=$(secs "$t3" "$t4")
cores=$(nproc)
ossl=$(openssl speed -evp sha256 -bytes 16384 -seconds 1 2>/dev/null | awk '/^sha256/ { sub(/k$/, "", $2); print $2 * 1000 }' || true)

awk -v n="$N" -v mb="$SIZE_MB" -v walk="$walk" -v sums="$sums" -v emit="$emit" -v cp="$cp" -v ossl="${ossl:-0}" -v cores="$cores" 'BEGIN {
	bytes = mb * 1024 * 1024
	printf "package: %d files, %d MiB on %s\n", n, mb, "tmpfs"
	printf "cleanroom package id     %8.3f s  %6.2f GB/s\n", walk, bytes / walk / 1e9
	printf "find | xargs sha256sum   %8.3f s  %6.2f GB/s   (cleanroom %.2fx faster)\n", sums, bytes / sums / 1e9, sums / walk
	if (ossl > 0) printf "openssl sha256, 1 core              %6.2f GB/s   (cleanroom: %.0f%% of it per core, %d cores)\n", ossl / 1e9, 100 * bytes / walk / (ossl * cores), cores
	printf "cleanroom package emit   %8.3f s   (structural walk + copy + walk of the copy)\n", emit
	printf "cp -a                    %8.3f s   (emit takes %.2fx its time)\n", cp, emit / cp
}'
