package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

func sandboxRows(c *config) []Row {
	rounds := max(c.rounds, 15)
	if c.quick {
		rounds = c.rounds
	}
	// Issue 19 (the user namespace and the filter included): the median
	// is the target; the ratio to bwrap is reported against its goal.
	const target = "median ≤ 25 ms; ratio to bwrap reported (goal ≤ 3×)"
	work := "`sandbox exec -- /bin/true` (netns + mechanism check, rootfs, cgroups, user namespace + seccomp filter, container, teardown)"
	crArgs := []string{"sandbox", "exec", "--", "/bin/true"}
	cr := timed(func() (*exec.Cmd, func(), error) { return exec.Command(c.bin, crArgs...), nil, nil })
	bwArgs := append(bwrapArgs(), "/bin/true")
	bw := timed(func() (*exec.Cmd, func(), error) { return exec.Command("bwrap", bwArgs...), nil, nil })
	un := timed(func() (*exec.Cmd, func(), error) { return exec.Command("unshare", "-n", "/bin/true"), nil, nil })
	if _, err := cr(); err != nil { // the probe: no namespaces or cgroups here, no row
		return []Row{{Issue: 19, Work: work, Clean: "—", Peer: "—", Ratio: "—", Target: target, Verdict: notMeasured + ": " + err.Error()}}
	}
	_, bwErr := exec.LookPath("bwrap")
	fns := []func() (time.Duration, error){cr, un}
	if bwErr == nil {
		fns = append(fns, bw)
	}
	ds, err := alternate(rounds, fns...)
	if err != nil {
		return []Row{{Issue: 19, Work: work, Clean: "—", Peer: "—", Ratio: "—", Target: target, Verdict: notMeasured + ": " + err.Error()}}
	}
	tc, tu := median(ds[0]), median(ds[1])
	var rows []Row
	if bwErr == nil {
		tb := median(ds[2])
		note := fmt.Sprintf("%d alternating rounds; bwrap --unshare-all --ro-bind /usr … (no cgroups, no network check)", rounds)
		if hf := hyperfineCrossCheck(c, rounds, append([]string{c.bin}, crArgs...), append([]string{"bwrap"}, bwArgs...)); hf != "" {
			note += "; " + hf
		}
		rows = append(rows, Row{Issue: 19, Work: work + " vs `bwrap --unshare-all … /bin/true`", Clean: ms(tc), Peer: ms(tb),
			Ratio: fmt.Sprintf("%.1f×", float64(tc)/float64(tb)), Target: target,
			Verdict: verdict(tc <= 25*time.Millisecond), Note: note})
	} else {
		rows = append(rows, Row{Issue: 19, Work: work, Clean: ms(tc), Peer: "—", Ratio: "—", Target: target, Verdict: notMeasured + ": bwrap not installed"})
	}
	rows = append(rows, Row{Issue: 19, Work: "`sandbox exec -- /bin/true` vs `unshare -n /bin/true`", Clean: ms(tc), Peer: ms(tu),
		Ratio: fmt.Sprintf("%.1f×", float64(tc)/float64(tu)), Target: "— (reported)", Verdict: reported})
	return rows
}

// hyperfineCrossCheck times the same two commands with hyperfine (not
// alternating: one after the other) as an independent check of the
// driver's own clock; it returns "" when hyperfine is absent.
func hyperfineCrossCheck(c *config, runs int, a, b []string) string {
	if _, err := exec.LookPath("hyperfine"); err != nil {
		return ""
	}
	out := filepath.Join(c.tmp, "hyperfine.json")
	q := func(args []string) string {
		for i, s := range args {
			args[i] = "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
		return strings.Join(args, " ")
	}
	cmd := exec.Command("hyperfine", "-N", "--style", "none", "--warmup", "2", "--runs", fmt.Sprint(runs), "--export-json", out, q(append([]string{}, a...)), q(append([]string{}, b...)))
	if err := cmd.Run(); err != nil {
		return fmt.Sprintf("hyperfine cross-check failed: %v", err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		return ""
	}
	var r struct {
		Results []struct {
			Median float64 `json:"median"`
		} `json:"results"`
	}
	if json.Unmarshal(raw, &r) != nil || len(r.Results) != 2 {
		return ""
	}
	return fmt.Sprintf("hyperfine cross-check (sequential, %d runs): %s vs %s", runs, ms(time.Duration(r.Results[0].Median*1e9)), ms(time.Duration(r.Results[1].Median*1e9)))
}
