#!/bin/sh
# bench/compare.sh — `make bench`: the Go benchmarks of every package
# (-count 6, benchstat) and the side-by-side driver (go run ./bench/compare),
# which writes BENCHMARKS.md. Installs the peers it is missing first:
#   Debian: bubblewrap, hyperfine (apt-get, as root)
#   npm:    @modelcontextprotocol/server-filesystem, pinned by bench/peers/package-lock.json (npm ci)
#   Go:     benchstat into bench/.bin
# Environment:
#   CLEANROOM_BENCH_LARGE=1   also the Go benchmarks' 1 GiB variants (pkgwalk); the driver's
#                             package rows always use the issue's 10,000 files / 1 GiB
#   COUNT=6 BENCHTIME=200ms   go test -count / -benchtime
#   ROUNDS=5                  alternating rounds per pair in the driver
#   GO_TIMEOUT=8m             go test -timeout (per package)
#   SKIP_GO_BENCH=1           reuse bench/out/go-bench.txt (driver only)
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
COUNT=${COUNT:-6}
BENCHTIME=${BENCHTIME:-200ms}
ROUNDS=${ROUNDS:-5}
# A package whose benchmarks run longer than this is stopped (its remaining
# rows say absent) rather than holding the whole run: a quadratic blow-up
# is a finding, not a reason to wait an hour.
GO_TIMEOUT=${GO_TIMEOUT:-8m}
out=bench/out
mkdir -p "$out"
run_start=$(date +%s)
run_load=$(cut -d' ' -f1-3 /proc/loadavg)

say() { printf 'bench: %s\n' "$*" >&2; }

# --- peers -------------------------------------------------------------
missing=""
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
command -v hyperfine >/dev/null 2>&1 || missing="$missing hyperfine"
if [ -n "$missing" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		say "installing$missing (apt-get)"
		export DEBIAN_FRONTEND=noninteractive
		# shellcheck disable=SC2086
		apt-get install -y -qq $missing >/dev/null 2>&1 ||
			{ apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq $missing >/dev/null; } ||
			say "could not install$missing: those rows will say not measured"
	else
		say "missing$missing and not root with apt-get: those rows will say not measured"
	fi
fi
if command -v npm >/dev/null 2>&1; then
	if [ ! -f bench/peers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js ] ||
		[ bench/peers/package-lock.json -nt bench/peers/node_modules/.package-lock.json ]; then
		say "npm ci in bench/peers (server-filesystem, pinned)"
		(cd bench/peers && npm ci --no-audit --no-fund --loglevel=error) || say "npm ci failed: the MCP peer rows will say not measured"
	fi
else
	say "npm not found: the MCP peer rows will say not measured"
fi
BENCHSTAT=bench/.bin/benchstat
if [ ! -x "$BENCHSTAT" ]; then
	say "installing benchstat into bench/.bin"
	GOBIN="$(pwd)/bench/.bin" "$GO" install golang.org/x/perf/cmd/benchstat@latest || say "benchstat install failed: raw go test output only"
fi
[ -x bin/cleanroom ] || "$GO" build -trimpath -o bin/cleanroom ./cmd/cleanroom

# --- Go benchmarks of every package ------------------------------------
if [ -z "${SKIP_GO_BENCH:-}" ]; then
	say "go test -bench . -count $COUNT -benchtime $BENCHTIME ./... (load $(cut -d' ' -f1-3 /proc/loadavg))"
	# A failing benchmark does not stop the run: its rows say "absent".
	"$GO" test -run '^$' -bench . -benchmem -count "$COUNT" -benchtime "$BENCHTIME" -timeout "$GO_TIMEOUT" ./... >"$out/go-bench.txt" 2>&1 ||
		say "some Go benchmarks failed (see $out/go-bench.txt)"
	grep -E '^(FAIL|--- FAIL|panic)' "$out/go-bench.txt" >&2 || true
fi
if [ -x "$BENCHSTAT" ]; then
	"$BENCHSTAT" "$out/go-bench.txt" >"$out/benchstat.txt" 2>&1 || say "benchstat failed"
fi

# --- side by side --------------------------------------------------------
say "side-by-side driver (load $(cut -d' ' -f1-3 /proc/loadavg))"
"$GO" run ./bench/compare -bin bin/cleanroom -rounds "$ROUNDS" -run-start "$run_start" -run-load "$run_load" -gobench "$out/go-bench.txt" \
	-benchstat "$out/benchstat.txt" -notes bench/notes.md -out BENCHMARKS.md
say "wrote BENCHMARKS.md"
