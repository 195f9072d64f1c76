package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// goBench holds, per benchmark name (without the -GOMAXPROCS suffix),
// every value of every unit over the -count runs.
type goBench map[string]map[string][]float64

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

func parseGoBench(path string) (goBench, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	g := goBench{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		f := strings.Fields(m[2])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			if g[m[1]] == nil {
				g[m[1]] = map[string][]float64{}
			}
			g[m[1]][f[i+1]] = append(g[m[1]][f[i+1]], v)
		}
	}
	return g, sc.Err()
}

// ns is the median ns/op of name, and whether it was measured.
func (g goBench) ns(name string) (time.Duration, int, bool) {
	v := g[name]["ns/op"]
	if len(v) == 0 {
		return 0, 0, false
	}
	return time.Duration(median(v)), len(v), true
}

func goBenchRows(c *config) []Row {
	if c.goBench == "" {
		return nil
	}
	g, err := parseGoBench(c.goBench)
	absent := func(issue int, work, target string, why string) Row {
		return Row{Issue: issue, Work: work, Clean: "—", Peer: "—", Ratio: "—", Target: target, Verdict: notMeasured + ": " + why}
	}
	if err != nil {
		return []Row{absent(0, "Go benchmarks", "—", err.Error())}
	}
	var rows []Row
	// one is a Go-only row: a time reported against a target or none.
	one := func(issue int, name, work, target string, limit time.Duration) {
		d, n, ok := g.ns(name)
		if !ok {
			rows = append(rows, absent(issue, work, target, name+" absent from the Go benchmark output (skipped, failed or timed out: see bench/out/go-bench.txt)"))
			return
		}
		v := reported
		if limit > 0 {
			v = verdict(d <= limit)
		}
		rows = append(rows, Row{Issue: issue, Work: fmt.Sprintf("%s (%s, median of %d)", work, name, n), Clean: ms(d), Peer: "— (no peer)", Ratio: "—", Target: target, Verdict: v})
	}
	// scaling rows: each size against linear growth from the smallest.
	scaling := func(issue int, prefix, param string, sizes []int, what string, limitAt int, limit time.Duration, tolerance float64) {
		d0, _, ok := g.ns(fmt.Sprintf("%s/%s=%d", prefix, param, sizes[0]))
		for _, n := range sizes {
			name := fmt.Sprintf("%s/%s=%d", prefix, param, n)
			work := fmt.Sprintf("%s, %d %s", what, n, param)
			d, cnt, ok2 := g.ns(name)
			if !ok || !ok2 {
				rows = append(rows, absent(issue, work, "linear growth", name+" absent from the Go benchmark output (skipped, failed or timed out: see bench/out/go-bench.txt)"))
				continue
			}
			linear := time.Duration(float64(d0) * float64(n) / float64(sizes[0]))
			target := fmt.Sprintf("linear growth (≤ %.2f× the %d-size time scaled)", tolerance, sizes[0])
			ok := float64(d) <= tolerance*float64(linear)
			if n == limitAt && limit > 0 {
				target = fmt.Sprintf("≤ %s at %d, and %s", ms(limit), n, target)
				ok = ok && d <= limit
			}
			v := verdict(ok)
			if n == sizes[0] {
				v, target = reported, "— (the base of the scaling)"
				if n == limitAt && limit > 0 {
					target = fmt.Sprintf("≤ %s", ms(limit))
					v = verdict(d <= limit)
				}
			}
			rows = append(rows, Row{Issue: issue, Work: fmt.Sprintf("%s (%s, median of %d)", work, name, cnt), Clean: ms(d), Peer: fmt.Sprintf("%s (linear from %d)", ms(linear), sizes[0]),
				Ratio: fmt.Sprintf("%.2f× linear", float64(d)/float64(linear)), Target: target, Verdict: v})
		}
	}
	// Issue 2: canonicalisation throughput.
	for _, s := range []string{"1MiB", "8MiB"} {
		name := "BenchmarkCanonical/" + s
		if v := g[name]["MB/s"]; len(v) > 0 {
			rows = append(rows, Row{Issue: 2, Work: fmt.Sprintf("RFC 8785 canonicalisation (`evidence.Canonical`), %s observation-like document (%s, median of %d)", s, name, len(v)),
				Clean: fmt.Sprintf("%.0f MB/s", median(v)), Peer: "— (no peer)", Ratio: "—", Target: "report MB/s", Verdict: reported})
		} else {
			rows = append(rows, absent(2, "RFC 8785 canonicalisation, "+s, "report MB/s", name+" absent"))
		}
	}
	one(4, "BenchmarkVerifyRelease", "release verify (SPEC-RELEASE record, every digest recomputed), synthetic world", "— (reported)", 0)
	one(6, "BenchmarkPinFreezeReveal", "run lifecycle: pin → freeze → reveal on the synthetic world", "report ms", 0)
	scaling(6, "BenchmarkVerifySuperseded", "receipts", []int{10, 100, 1000}, "`run verify` with superseded receipts in the state root", 0, 0, 1.0)
	scaling(8, "BenchmarkScoreInterop", "challenges", []int{1000, 10000, 100000}, "holdout scoring + interop, two implementations", 10000, time.Second, 1.25)
	one(9, "BenchmarkIndexVerify100k", "AMBER index: load and verify 100,000 entries", "≤ 2 s", 2*time.Second)
	one(9, "BenchmarkIndexAppend100k", "AMBER index: append 100,000 entries under one checkpoint", "report time", 0)
	one(9, "BenchmarkIndexAppendOne100k", "AMBER index: append one entry to 100,000 (load, verify, append, sign)", "— (reported)", 0)
	one(9, "BenchmarkCaseVerify", "AMBER case verify (signature, bundle fetch + fsck, oracle), ~15,000 objects", "— (reported)", 0)
	return rows
}
