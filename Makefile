# cleanroom — see README.md. `make demo` first, then `make test`.
GO      ?= go
BIN     := bin/cleanroom
STAGE   := bin/cleanroom-room
PKGS    := ./...
# Tests that need root or namespaces probe and skip with a reason; CI runs as root.
TESTFLAGS ?= -timeout 30m

.PHONY: all build test demo bench lint lint-tools fmt clean check-forks e2e-k8s

all: build

# The room binary first (no cgo: it links no container runtime), then the
# command line with the room binary's Go build ID linked in: cleanroom runs
# the sealed stages in bin/cleanroom-room only when that ID matches.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto -o $(STAGE) ./cmd/cleanroom-room
	id=$$($(GO) tool buildid $(STAGE)) && test -n "$$id" && \
	  $(GO) build -trimpath -buildvcs=auto \
	  -ldflags "-X github.com/cleanroom-dev/cleanroom/harness.stageBuildID=$$id" \
	  -o $(BIN) ./cmd/cleanroom

# Then sha2x again with its SHA-NI assembly compiled out (purego).
test: lint check-forks
	$(GO) test $(TESTFLAGS) $(PKGS)
	$(GO) test $(TESTFLAGS) -short -count=1 -tags purego ./pkgwalk/internal/sha2x

# The demo's artifacts go to demo-out/ in this directory (replaced on each
# run, ignored by git), never to the temporary directory, where each run
# would leave a new cleanroom-demo-* behind.
demo: build
	rm -rf demo-out && ./$(BIN) demo --out demo-out

# Not part of test/CI (root, ~2 GiB of build cache, ~7 min of 2 idle cores
# the first time): a single-node Kubernetes built here runs N planned blind
# runs under RuntimeClass runc and gvisor, collects and verifies them, prints
# one summary line and tears everything down. See e2e/k8s/run.sh.
e2e-k8s:
	N=$(or $(N),4) ./e2e/k8s/run.sh

# Man pages from the command tree (generated, not committed): man/*.1
.PHONY: man
man: build
	rm -rf man && ./$(BIN) man --dir man

# Not part of test/CI: installs its peers, runs every package's Go benchmarks
# (-count 6, benchstat) and the side-by-side driver, writes BENCHMARKS.md.
# CLEANROOM_BENCH_LARGE=1 also runs the Go benchmarks' 1 GiB variants.
bench: build
	GO=$(GO) bench/compare.sh

# staticcheck and errcheck are pinned (`make lint-tools` installs them; .ci/run does). Absent on a
# developer's machine each is skipped with a notice; LINT_STRICT=1 (set by
# .ci/run) makes its absence a failure. One process for all packages: it
# shares the type checking between them, so it costs less CPU than one run
# per package. errcheck asks for every unchecked error beyond the well-known
# cases of .ci/errcheck-excludes.txt (output to a writer, Close, best-effort
# cleanup); a deliberate drop is `_ =` with a comment saying why.
STATICCHECK_VERSION := v0.8.2
ERRCHECK_VERSION    := v1.30.0

# The pinned linters, installed into GOBIN (.ci/run runs this before make test).
lint-tools:
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	$(GO) install github.com/kisielk/errcheck@$(ERRCHECK_VERSION)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) vet -tags purego ./pkgwalk/...
	@if command -v staticcheck >/dev/null; then \
	  echo "staticcheck $(PKGS)"; staticcheck $(PKGS); \
	elif [ -n "$(LINT_STRICT)" ]; then \
	  echo "lint: staticcheck not found (go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION))"; exit 1; \
	else \
	  echo "lint: staticcheck not installed, skipped (go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION))"; \
	fi
	@if command -v errcheck >/dev/null; then \
	  echo "errcheck $(PKGS)"; errcheck -exclude .ci/errcheck-excludes.txt $(PKGS); \
	elif [ -n "$(LINT_STRICT)" ]; then \
	  echo "lint: errcheck not found (go install github.com/kisielk/errcheck@$(ERRCHECK_VERSION))"; exit 1; \
	else \
	  echo "lint: errcheck not installed, skipped (go install github.com/kisielk/errcheck@$(ERRCHECK_VERSION))"; \
	fi

# third_party/go-sdk is upstream v1.8.0 plus exactly its patches/ (PATCHES.md).
check-forks:
	GO=$(GO) third_party/check-go-sdk.sh

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin demo-out man
