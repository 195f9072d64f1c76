package cgprime

import (
	"os"
	"path/filepath"
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
	f, _ := openOwnProcs()
	if f == nil {
		t.Skip("no writable cgroup.procs of this process's own cgroup here")
	}
	f.Close()
	// The writer is tested whatever this host's RCU settings say.
	setRCUSwitch(t, &rcuExpedited, "0\n")
}

// setRCUSwitch stands in a file holding content ("" : no file, a kernel
// without the switch) for one of the host's RCU switches (*path) for the
// rest of the test.
func setRCUSwitch(t *testing.T, path *string, content string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "switch")
	if content != "" {
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	saved := *path
	*path = file
	waitIsShort = readOnce()
	t.Cleanup(func() {
		*path = saved
		waitIsShort = readOnce()
	})
}

// The switches are read once: a change after the first answer is not
// read again (every start would otherwise read two sysfs files).
func TestSwitchesReadOnce(t *testing.T) {
	setRCUSwitch(t, &rcuExpedited, "1\n")
	setRCUSwitch(t, &rcuNormal, "0\n")
	if !waitIsShort() {
		t.Fatal("expedited grace periods: want a short wait")
	}
	if err := os.WriteFile(rcuExpedited, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !waitIsShort() {
		t.Error("the switch was read again after the first answer")
	}
}

// With expedited grace periods the attach barely waits, so priming makes
// no write at all; with the switch off, its file absent (a kernel without
// it), or rcu_normal overriding it, it writes.
func TestPrimingOnlyWhenTheWaitIsLong(t *testing.T) {
	needPriming(t)
	cases := []struct {
		name              string
		expedited, normal string // "" : no file
		wantWrite         bool
	}{
		{"expedited", "1\n", "0\n", false},
		{"expedited, no rcu_normal switch", "1\n", "", false},
		{"not expedited", "0\n", "0\n", true},
		{"no such switch", "", "", true},
		{"expedited but rcu_normal wins", "1\n", "1\n", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			setRCUSwitch(t, &rcuExpedited, c.expedited)
			setRCUSwitch(t, &rcuNormal, c.normal)
			before := writes.Load()
			stop := Start()
			mu.Lock()
			finishedWriting := finished
			mu.Unlock()
			if c.wantWrite {
				waitWrites(t, before+1)
				stop()
				return
			}
			// The writer returns by itself, having written nothing.
			select {
			case <-finishedWriting:
			case <-time.After(5 * time.Second):
				t.Fatal("the writer still runs with expedited grace periods")
			}
			stop()
			if n := writes.Load() - before; n != 0 {
				t.Errorf("%d writes made with expedited grace periods, want 0", n)
			}
		})
	}
}

// waitWrites waits until n writes were made in all (the test fails if
// none comes in 10 s: priming does nothing).
func waitWrites(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for writes.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes made, want %d", writes.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
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
			waitWrites(t, writes.Load()+2)
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
			mu.Lock()
			limit := earlyTimer
			mu.Unlock()
			if limit == nil {
				t.Fatal("Early armed no limit")
			}
			stop := Start()
			time.Sleep(10 * time.Millisecond)
			stop() // also releases Early's reference
			// and its limit: no timer outlives the container start.
			if limit.Stop() {
				t.Error("Early's limit is still armed after the start's stop")
			}
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
	f, _ := openOwnProcs()
	defer f.Close()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if pid := strconv.Itoa(os.Getpid()); !slices.Contains(strings.Fields(string(b)), pid) {
		t.Errorf("%s does not list pid %s", f.Name(), pid)
	}
}

// ownProcsDir is the directory of the cgroup.procs file priming writes to.
func ownProcsDir(t *testing.T) string {
	t.Helper()
	f, _ := openOwnProcs()
	if f == nil {
		t.Skip("no writable cgroup.procs of this process's own cgroup here")
	}
	defer f.Close()
	return filepath.Dir(f.Name())
}

// A process moved to another cgroup while priming runs stays there:
// priming stops instead of moving it back into the cgroup it resolved.
func TestPrimingStopsWhenMovedAway(t *testing.T) {
	needPriming(t)
	from := ownProcsDir(t)
	to, err := os.MkdirTemp(from, "cgprime-test-")
	if err != nil {
		t.Skipf("cannot create a child cgroup here: %v", err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	moveTo := func(dir string) error {
		return os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0)
	}
	t.Cleanup(func() {
		if err := moveTo(from); err != nil {
			t.Errorf("moving back to %s: %v", from, err)
		}
		if err := os.Remove(to); err != nil {
			t.Errorf("removing %s: %v", to, err)
		}
	})
	inTo := func() bool {
		b, err := os.ReadFile(filepath.Join(to, "cgroup.procs"))
		return err == nil && slices.Contains(strings.Fields(string(b)), string(pid))
	}
	stop := Start()
	defer stop()
	// The writer is writing (its first write waits for the grace period)
	// before the process moves away.
	waitWrites(t, writes.Load()+2)
	// A move that lands between the writer's check and its write is
	// undone once (the check cannot be atomic with the write); the next
	// check sees the move and the writer ends. Without the check, every
	// move is undone.
	moved := false
	for attempt := 0; attempt < 3 && !moved; attempt++ {
		if err := moveTo(to); err != nil {
			t.Skipf("cannot move this process into a child cgroup here: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
		moved = inTo()
	}
	if !moved {
		t.Fatalf("priming moved the process back from %s into %s", to, from)
	}
}

// A writer stops by itself after maxPriming, even while a caller still
// holds its reference, and that caller's stop still returns.
func TestPrimingEndsAfterItsLimit(t *testing.T) {
	needPriming(t)
	saved := maxPriming
	maxPriming = 30 * time.Millisecond
	defer func() { maxPriming = saved }()
	stop := Start()
	mu.Lock()
	finishedWriting := finished
	mu.Unlock()
	waitWrites(t, writes.Load()+2)
	// The writer returns with the reference still held (quit is closed
	// only by stop).
	select {
	case <-finishedWriting:
	case <-time.After(5 * time.Second):
		t.Fatal("the writer still runs long after its limit")
	}
	n := writes.Load()
	done := make(chan struct{})
	go func() { stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stop did not return after the writer expired")
	}
	if m := writes.Load(); m != n {
		t.Errorf("%d writes after the writer ended, want none", m-n)
	}
	if running() != 0 {
		t.Errorf("%d callers still counted after stop", running())
	}
}
