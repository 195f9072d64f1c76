// Command compare is the side-by-side half of `make bench`: it times
// cleanroom against the tool a user would pick instead, on the same work,
// alternating the two in one run, and writes BENCHMARKS.md — every figure a
// median of several runs and every comparison a ratio against the peer
// measured in the same run, because the machines are shared and noisy.
//
// It expects the peers to be installed already (bench/compare.sh installs
// them: bubblewrap and hyperfine from Debian, the pinned npm
// @modelcontextprotocol/server-filesystem under bench/peers); a missing
// peer or a missing privilege turns its row into "not measured" with the
// reason, never into a number.
//
//	go run ./bench/compare -bin bin/cleanroom -gobench bench/out/go-bench.txt -out BENCHMARKS.md
//
// The package rows use the size (10,000 files / 1 GiB on tmpfs);
// -quick measures tiny sizes with few rounds (the smoke test uses it).
// CLEANROOM_BENCH_LARGE=1 also runs the Go benchmarks' 1 GiB variants.
package main
