package cgprime

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func needPriming(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("writing cgroup.procs needs root")
	}
	f := openOwnProcs()
	if f == nil {
		t.Skip("no writable cgroup.procs of this process's own cgroup here")
	}
	f.Close()
}

func running() int {
	mu.Lock()
	defer mu.Unlock()
	return users
}

// Priming moves nothing: the process's cgroups are the same before and
// after, and the writer is gone once every caller stopped.
func TestPrimingIsANoOp(t *testing.T) {
	needPriming(t)
	before, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		run  func()
	}{
		{"one caller", func() {
			stop := Start()
			time.Sleep(20 * time.Millisecond)
			stop()
		}},
		{"two callers", func() {
			a, b := Start(), Start()
			time.Sleep(10 * time.Millisecond)
			a()
			if running() != 1 {
				t.Errorf("after the first stop: %d callers, want 1", running())
			}
			b()
			b() // a second stop is harmless
		}},
		{"early, then a start", func() {
			Early(time.Minute)
			stop := Start()
			time.Sleep(10 * time.Millisecond)
			stop() // also releases Early's reference
		}},
		{"early alone, released by its limit", func() {
			Early(20 * time.Millisecond)
			deadline := time.Now().Add(5 * time.Second)
			for running() != 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run()
			if n := running(); n != 0 {
				t.Errorf("%d callers left, want 0", n)
			}
			after, err := os.ReadFile("/proc/self/cgroup")
			if err != nil {
				t.Fatal(err)
			}
			if string(after) != string(before) {
				t.Errorf("cgroups changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// The file opened is the cgroup.procs that lists this process.
func TestOpenOwnProcsListsThisProcess(t *testing.T) {
	needPriming(t)
	f := openOwnProcs()
	defer f.Close()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if pid := strconv.Itoa(os.Getpid()); !slices.Contains(strings.Fields(string(b)), pid) {
		t.Errorf("%s does not list pid %s", f.Name(), pid)
	}
}
