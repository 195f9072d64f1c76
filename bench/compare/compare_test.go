package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/bench/mcpclient"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

func TestMedianAndQuantile(t *testing.T) {
	t.Parallel()
	d := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x)
		}
		return out
	}
	cases := []struct {
		name     string
		in       []time.Duration
		med, p99 time.Duration
	}{
		{"odd", d(5, 1, 3), 3, 5},
		{"even", d(4, 1, 3, 2), 2, 4}, // (2+3)/2 rounds down in integer nanoseconds
		{"one", d(7), 7, 7},
		{"empty", nil, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := median(c.in); got != c.med {
				t.Errorf("median = %v, want %v", got, c.med)
			}
			if got := quantile(c.in, 0.99); got != c.p99 {
				t.Errorf("p99 = %v, want %v", got, c.p99)
			}
		})
	}
	// Rates (req/s, MB/s) take the same median, without integer rounding.
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{4, 1, 3, 2}, 2.5}, {[]float64{9, 1, 5}, 5}, {nil, 0}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestAlternate: each side runs once per round, the first side rotates,
// and a failure stops the measurement.
func TestAlternate(t *testing.T) {
	t.Parallel()
	var order []string
	side := func(name string) func() (time.Duration, error) {
		return func() (time.Duration, error) { order = append(order, name); return time.Millisecond, nil }
	}
	ds, err := alternate(3, side("a"), side("b"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(order, ""), "abbaab"; got != want {
		t.Errorf("order %q, want %q", got, want)
	}
	if len(ds[0]) != 3 || len(ds[1]) != 3 {
		t.Errorf("rounds %d/%d, want 3/3", len(ds[0]), len(ds[1]))
	}
	boom := func() (time.Duration, error) { return 0, os.ErrNotExist }
	if _, err := alternate(2, side("a"), boom); err != os.ErrNotExist {
		t.Errorf("a failing side: %v, want os.ErrNotExist", err)
	}
}

// TestGoBenchRows reads a go test -bench output written for this test and
// checks every verdict the Go-only rows derive from it.
func TestGoBenchRows(t *testing.T) {
	t.Parallel()
	rows := goBenchRows(&config{goBench: filepath.Join("testdata", "go-bench.txt")})
	find := func(prefix string) Row {
		for _, r := range rows {
			if strings.HasPrefix(r.Work, prefix) {
				return r
			}
		}
		t.Fatalf("no row %q in %+v", prefix, rows)
		return Row{}
	}
	cases := []struct {
		work, clean, ratio, verdict string
	}{
		// median of 100/120/110 ms is 110 ms: the base of the scaling.
		{"holdout scoring + interop, two implementations, 1000 challenges", "110 ms", "1.00× linear", reported},
		// 1.2 s > 1 s: the absolute target is missed although growth is linear.
		{"holdout scoring + interop, two implementations, 10000 challenges", "1.20 s", "1.09× linear", missed},
		{"holdout scoring + interop, two implementations, 100000 challenges", "11.00 s", "1.00× linear", met},
		{"AMBER index: load and verify 100,000 entries", "1.90 s", "—", met},
		{"RFC 8785 canonicalisation (`evidence.Canonical`), 1MiB", "60 MB/s", "—", reported},
	}
	for _, c := range cases {
		t.Run(c.work, func(t *testing.T) {
			r := find(c.work)
			if r.Clean != c.clean || r.Ratio != c.ratio || r.Verdict != c.verdict {
				t.Errorf("got %q / %q / %q, want %q / %q / %q", r.Clean, r.Ratio, r.Verdict, c.clean, c.ratio, c.verdict)
			}
		})
	}
	// A benchmark that failed or was skipped is "not measured", never a number.
	if r := find("run lifecycle: pin → freeze → reveal"); !strings.HasPrefix(r.Verdict, notMeasured) {
		t.Errorf("absent benchmark: verdict %q, want %q", r.Verdict, notMeasured)
	}
}

func TestScriptsParse(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"../compare.sh"} {
		if out, err := exec.Command("sh", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v %s", s, err, out)
		}
	}
}

// buildCleanroom is bin/cleanroom's twin, built once for every test
// package that runs it (testshared.Cleanroom).
func buildCleanroom(t *testing.T) string {
	t.Helper()
	bin, _ := testshared.Cleanroom(t)
	return bin
}

// TestQuickDriver runs the driver end to end at smoke sizes over the
// sections that need no root (package walk, evidence, AMBER) and checks
// the report it writes: the figures are not judged, only that each row was
// measured (a number, not "not measured") and the table is whole.
func TestQuickDriver(t *testing.T) {
	for _, tool := range []string{"git", "ssh-keygen", "openssl", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
	bin := buildCleanroom(t)
	root := testshared.RepoRoot(t)
	t.Chdir(root) // the driver reads testdata/world relative to the repository
	out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	c := &config{bin: bin, quick: true, only: "package,evidence,amber,go", out: out, peers: filepath.Join(root, "bench", "peers"),
		goBench: filepath.Join(root, "bench", "compare", "testdata", "go-bench.txt"), progress: t.Logf}
	if err := run(c); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"| # | Work | cleanroom (median) |",
		"- Machine: ",
		"package manifest (`package id`), 200 files",
		"package emit (structural walk, kernel copy, walk and hash of the delivered copy)",
		"strict evidence read (`evidence.Read`), 1 MiB",
		"AMBER `amber case build`",
		"quick smoke sizes",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "| 3 ") || strings.HasPrefix(l, "| 9 | AMBER `amber case build`") || strings.HasPrefix(l, "| 2 | strict") {
			if strings.Contains(l, notMeasured) {
				t.Errorf("row not measured: %s", l)
			}
		}
	}
}

// TestClientAgainstRoom drives `cleanroom room serve` on the synthetic
// world's package with the bench's MCP client: the handshake, list_files
// and a read_file whose text is the file's bytes.
func TestClientAgainstRoom(t *testing.T) {
	t.Parallel()
	if os.Getuid() != 0 {
		t.Skip("room serve seals with mount and network namespaces: needs root here")
	}
	bin := buildCleanroom(t)
	root := testshared.RepoRoot(t)
	pkg := filepath.Join(root, worldPackage)
	c := &config{bin: bin, tmp: t.TempDir()}
	id, err := packageID(c, pkg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := startRoom(ctx, c, pkg, id)
	if err != nil {
		t.Skipf("room serve could not start here (no seal?): %v", err)
	}
	defer func() {
		if err := cl.Close(10 * time.Second); err != nil {
			t.Errorf("room serve at the end of its input: %v", err)
		}
	}()
	list, err := cl.CallTool(ctx, "list_files", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(list, "TOY-TALLY-v1.md") {
		t.Errorf("list_files does not name TOY-TALLY-v1.md: %.300s", list)
	}
	want, err := os.ReadFile(filepath.Join(pkg, "TOY-TALLY-v1.md"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cl.CallTool(ctx, "read_file", map[string]any{"path": "TOY-TALLY-v1.md"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, string(want)) {
		t.Errorf("read_file returned %d bytes that do not hold the file's %d", len(got), len(want))
	}
	// A path outside the package is the tool's refusal, not a transport error.
	if _, err := cl.CallTool(ctx, "read_file", map[string]any{"path": "../../etc/passwd"}); !errors.Is(err, mcpclient.ErrTool) {
		t.Errorf("read_file ../../etc/passwd: %v, want an isError result", err)
	}
}
