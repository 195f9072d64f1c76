package cgprime

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

var (
	mu       sync.Mutex
	users    int
	quit     chan struct{}
	finished chan struct{}
	early    func()       // the reference Early holds, released by the first stop
	writes   atomic.Int64 // writes made, for the tests
	// earlyTimer releases early after Early's limit; the first stop
	// stops it, so no timer outlives the container start.
	earlyTimer *time.Timer
	// maxPriming bounds one writer's life whoever still holds a reference:
	// while it writes, every fork and exit on the host takes the cgroup
	// rwsem's slow path, and a preparation that takes longer (a slow probe,
	// a large package) has lost little by paying the grace period once.
	maxPriming = 2 * time.Second
)

// Start primes (or joins the priming already running) until stop is
// called; the writes end when no caller is left. stop also releases a
// reference Early took, so a container start ends an early priming.
func Start() (stop func()) {
	mu.Lock()
	defer mu.Unlock()
	release := acquireLocked()
	return sync.OnceFunc(func() {
		mu.Lock()
		e, limit := early, earlyTimer
		early, earlyTimer = nil, nil
		mu.Unlock()
		if limit != nil {
			limit.Stop()
		}
		if e != nil {
			e()
		}
		release()
	})
}

// Early starts priming for a process that is about to start a container
// and has other work to do first (package initialisers, argument
// parsing). It is released by the first Start's stop, or after limit.
func Early(limit time.Duration) {
	mu.Lock()
	defer mu.Unlock()
	if early != nil {
		return
	}
	early = sync.OnceFunc(acquireLocked())
	// If no container start follows (a refused command line), the
	// writes still end.
	earlyTimer = time.AfterFunc(limit, early)
}

// acquireLocked takes one reference, starting the writer if none runs.
// mu is held.
func acquireLocked() (release func()) {
	if users == 0 {
		quit, finished = make(chan struct{}), make(chan struct{})
		go write(quit, finished)
	}
	users++
	return func() {
		mu.Lock()
		users--
		if users > 0 {
			mu.Unlock()
			return
		}
		q, done := quit, finished
		mu.Unlock()
		close(q)
		<-done
	}
}

// The host's switches that turn every RCU grace period into an expedited
// one, and every expedited one back into a normal one (rcu_normal wins);
// variables so that tests can stand in files of their own.
var (
	rcuExpedited = "/sys/kernel/rcu_expedited"
	rcuNormal    = "/sys/kernel/rcu_normal"
)

// waitIsShort reports whether the grace period priming hides is an
// expedited one on this host (rcu_expedited is 1 and rcu_normal is not):
// the first write to cgroup.procs then waits a fraction of a millisecond
// (0.26 ms median on a 2-core host), while priming costs a write, a read
// and a timer wake-up every millisecond — a quarter of `sandbox exec`'s
// CPU time there (bench/notes.md, Session 6). The switches are read once
// per process, not on every start: they are the host's settings, and a
// process that starts many containers would read the same two files each
// time (a change made while it runs is seen by the next process).
var waitIsShort = readOnce()

// readOnce returns a waitIsShort that reads the switches at its first
// call (tests make a new one after standing in files of their own).
func readOnce() func() bool {
	return sync.OnceValue(func() bool {
		on := func(path string) bool {
			b, err := os.ReadFile(path)
			return err == nil && strings.TrimSpace(string(b)) == "1"
		}
		return on(rcuExpedited) && !on(rcuNormal)
	})
}

// write writes the PID once a millisecond until quit is closed; it
// returns at once when priming is not possible here, or not worth it
// (waitIsShort).
func write(quit <-chan struct{}, finished chan<- struct{}) {
	defer close(finished)
	if waitIsShort() {
		return
	}
	self, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return
	}
	defer self.Close()
	f, own := openOwnProcs()
	if f == nil {
		return
	}
	defer f.Close()
	pid := []byte(strconv.Itoa(os.Getpid()))
	if !listed(f.Name(), pid) {
		return
	}
	cur := make([]byte, len(own)+1) // one byte more: a longer table differs too
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	expired := time.NewTimer(maxPriming)
	defer expired.Stop()
	for {
		// Moved to another cgroup since it was resolved (by anyone): the
		// next write would move the process back, so priming ends here.
		if n, err := self.ReadAt(cur, 0); (err != nil && err != io.EOF) || !bytes.Equal(cur[:n], own) {
			return
		}
		// Each write is one migration request of its own.
		if _, err := f.Write(pid); err != nil {
			return
		}
		writes.Add(1)
		select {
		case <-quit:
			return
		case <-expired.C:
			// Callers still holding a reference stop cleanly: their
			// release closes quit and finds finished closed.
			return
		case <-tick.C:
		}
	}
}

// listed reports whether pid is in the cgroup.procs file at path: the
// write is a no-op only if the process is already there.
func listed(path string, pid []byte) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if bytes.Equal(line, pid) {
			return true
		}
	}
	return false
}

// openOwnProcs opens for writing the cgroup.procs file of this process's
// own cgroup: in whichever of the pids and freezer v1 hierarchies
// mountinfo lists first (every hierarchy takes the same global lock), or
// the unified one; nil if it cannot be resolved. own is the /proc/self/cgroup it was
// resolved from.
func openOwnProcs() (f *os.File, own []byte) {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, nil
	}
	mounts, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, nil
	}
	defer mounts.Close()
	var st unix.Statfs_t
	unified := unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
	want := map[string]bool{"pids": true, "freezer": true}
	paths := map[string]string{} // controller ("" for v2) → path in /proc/self/cgroup
	for line := range strings.SplitSeq(string(own), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" && unified {
			paths[""] = parts[2]
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if want[c] && !unified {
				paths[c] = parts[2]
			}
		}
	}
	s := bufio.NewScanner(mounts)
	for s.Scan() {
		// id parent major:minor root mountpoint options [optional…] - fstype source superoptions
		pre, post, ok := strings.Cut(s.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		root, point := f[3], f[4]
		var cg string
		switch {
		case g[0] == "cgroup2" && unified:
			cg, ok = paths[""]
		case g[0] == "cgroup" && !unified:
			for o := range strings.SplitSeq(g[2], ",") {
				if cg, ok = paths[o]; ok {
					break
				}
			}
		default:
			continue
		}
		if !ok {
			continue
		}
		rel, err := filepath.Rel(root, cg)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue // the mount shows another part of the hierarchy
		}
		// O_NOFOLLOW: a symlink in place of cgroup.procs is not the
		// kernel's file and is not written through.
		if f, err := os.OpenFile(filepath.Join(point, rel, "cgroup.procs"), os.O_WRONLY|unix.O_NOFOLLOW, 0); err == nil {
			return f, own
		}
	}
	return nil, nil
}
