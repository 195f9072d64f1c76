package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// alternate runs each of fns once per round, for rounds rounds, rotating
// which goes first each round (so neither side always runs on a warmer or a
// colder machine), and returns every side's durations. A failing run stops
// the measurement: a number from a run that did not do the work is no
// number.
func alternate(rounds int, fns ...func() (time.Duration, error)) ([][]time.Duration, error) {
	out := make([][]time.Duration, len(fns))
	for r := range rounds {
		for k := range fns {
			i := (r + k) % len(fns)
			d, err := fns[i]()
			if err != nil {
				return nil, err
			}
			out[i] = append(out[i], d)
		}
	}
	return out, nil
}

// timed wraps a command factory: each call builds a fresh command (setup,
// not timed), runs it and returns its wall time.
func timed(mk func() (*exec.Cmd, func(), error)) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		cmd, cleanup, err := mk()
		if err != nil {
			return 0, err
		}
		if cleanup != nil {
			defer cleanup()
		}
		var stderr strings.Builder
		if cmd.Stderr == nil {
			cmd.Stderr = &stderr
		}
		t0 := time.Now()
		err = cmd.Run()
		d := time.Since(t0)
		if err != nil {
			return 0, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, lastLines(stderr.String(), 5))
		}
		return d, nil
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// median is the middle value of v (the mean of the two middle ones for
// an even count; integer division for durations), 0 for none.
func median[T time.Duration | float64](v []T) T {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// quantile is the nearest-rank quantile of d (q in [0, 1]).
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// treeHWM is the summed peak resident set (VmHWM) of pid and all its
// descendants, in bytes: the server's whole footprint, whatever it forks.
func treeHWM(pid int) int64 {
	var total int64
	for _, p := range append([]int{pid}, descendants(pid)...) {
		total += hwm(p)
	}
	return total
}

// servingHWM is the peak resident set of the process that answers MCP:
// the deepest descendant of pid (the room's serve stage, exec'd inside
// the seal), or pid itself when it starts none (the peer).
func servingHWM(pid int) int64 {
	d := descendants(pid)
	if len(d) == 0 {
		return hwm(pid)
	}
	return hwm(d[len(d)-1])
}

// hwm is VmHWM of one process, in bytes (0 when it is gone).
func hwm(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 2 && fs[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(fs[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func descendants(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			c, err := strconv.Atoi(f)
			if err == nil {
				out = append(out, c)
				out = append(out, descendants(c)...)
			}
		}
	}
	return out
}

// ms formats a duration in milliseconds with sensible precision.
func ms(d time.Duration) string {
	f := float64(d) / 1e6
	switch {
	case f >= 1000:
		return fmt.Sprintf("%.2f s", f/1000)
	case f >= 100:
		return fmt.Sprintf("%.0f ms", f)
	case f >= 10:
		return fmt.Sprintf("%.1f ms", f)
	case f >= 1:
		return fmt.Sprintf("%.2f ms", f)
	default:
		return fmt.Sprintf("%.3f ms", f)
	}
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
