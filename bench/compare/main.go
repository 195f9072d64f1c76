package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
)

// Row is one line of the table.
type Row struct {
	Issue   int
	Work    string
	Clean   string // cleanroom's median
	Peer    string // the peer's median, measured in the same run
	Ratio   string
	Target  string // the target as its issue states it
	Verdict string // met, MISSED, reported, not measured
	Note    string
}

const (
	met         = "met"
	missed      = "**MISSED**"
	reported    = "reported (no target)"
	notMeasured = "not measured"
)

func verdict(ok bool) string {
	if ok {
		return met
	}
	return missed
}

type config struct {
	bin     string // the cleanroom binary
	tmp     string // scratch on tmpfs when there is one
	peers   string // bench/peers (node_modules of the pinned npm peer)
	quick   bool
	large   bool
	rounds  int
	goBench string
	stat    string
	notes   string
	out     string
	only    string
	// Set by bench/compare.sh: when make bench started and the load then
	// (before the Go benchmarks), so the report covers the whole run.
	runStart int64
	runLoad  string
	progress func(format string, a ...any)
	// rss is what roomRows measured of the servers' peak RSS, for the
	// report's table beside the rows.
	rss []rssPoint
}

func main() {
	var c config
	flag.StringVar(&c.bin, "bin", "bin/cleanroom", "the cleanroom binary to measure")
	flag.StringVar(&c.peers, "peers", "bench/peers", "directory holding node_modules of the pinned npm peer")
	flag.BoolVar(&c.quick, "quick", false, "tiny sizes, few rounds (smoke test)")
	flag.BoolVar(&c.large, "large", os.Getenv("CLEANROOM_BENCH_LARGE") != "", "say in the report that CLEANROOM_BENCH_LARGE=1 was set (the Go benchmarks' 1 GiB variants ran)")
	flag.IntVar(&c.rounds, "rounds", 0, "rounds per pair (default 5; 2 with -quick)")
	flag.StringVar(&c.goBench, "gobench", "", "go test -bench output (-count 5) to take Go-only rows from")
	flag.StringVar(&c.stat, "benchstat", "", "benchstat output to append to the report")
	flag.StringVar(&c.notes, "notes", "bench/notes.md", "hand-written notes appended to the report")
	flag.StringVar(&c.out, "out", "BENCHMARKS.md", "the report to write")
	flag.Int64Var(&c.runStart, "run-start", 0, "unix time at which make bench started (bench/compare.sh sets it)")
	flag.StringVar(&c.runLoad, "run-load", "", "load average when make bench started")
	flag.StringVar(&c.only, "only", "", "comma-separated sections to run (room,package,evidence,sandbox,amber,go)")
	flag.Parse()
	if err := run(&c); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(c *config) error {
	if c.rounds == 0 {
		c.rounds = 5
		if c.quick {
			c.rounds = 2
		}
	}
	bin, err := filepath.Abs(c.bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("the cleanroom binary: %w (make build)", err)
	}
	c.bin = bin
	c.peers, _ = filepath.Abs(c.peers)
	if c.progress == nil {
		c.progress = func(format string, a ...any) { fmt.Fprintf(os.Stderr, "compare: "+format+"\n", a...) }
	}
	base := "/dev/shm"
	if st, err := os.Stat(base); err != nil || !st.IsDir() {
		base = ""
	}
	c.tmp, err = os.MkdirTemp(base, "cleanroom-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(c.tmp)

	rep := report{machine: machineLine(), loadBefore: loadavg(), start: time.Now(), quick: c.quick, large: c.large, rounds: c.rounds, runLoad: c.runLoad}
	if c.runStart > 0 {
		rep.runStart = time.Unix(c.runStart, 0)
	}
	sections := []struct {
		name string
		fn   func(*config) []Row
	}{
		{"room", roomRows},
		{"package", packageRows},
		{"evidence", evidenceRows},
		{"sandbox", sandboxRows},
		{"amber", amberRows},
		{"go", goBenchRows},
	}
	for _, s := range sections {
		if c.only != "" && !strings.Contains(","+c.only+",", ","+s.name+",") {
			continue
		}
		c.progress("%s …", s.name)
		t0 := time.Now()
		rows := s.fn(c)
		c.progress("%s: %d rows in %v", s.name, len(rows), time.Since(t0).Round(time.Millisecond))
		rep.rows = append(rep.rows, rows...)
	}
	rep.rss = c.rss
	rep.loadAfter = loadavg()
	rep.elapsed = time.Since(rep.start)
	if c.stat != "" {
		if b, err := os.ReadFile(c.stat); err == nil {
			rep.benchstat = string(b)
		}
	}
	if b, err := os.ReadFile(c.notes); err == nil {
		rep.notes = string(b)
	}
	// A failed run never leaves half a report.
	return durable.ReplaceFile(c.out, []byte(rep.markdown()), 0o644)
}

func machineLine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := "unknown kernel"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"), "%d", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
		}
	}
	return fmt.Sprintf("%s, %d cores%s, Linux %s, %s %s/%s", cpu, runtime.NumCPU(), mem, kernel, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return strings.TrimSpace(string(b))
	}
	return strings.Join(f[:3], " ")
}
