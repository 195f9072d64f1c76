package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
	"golang.org/x/sys/unix"
)

// mountAt returns the topmost mount on point in this process's table.
func mountAt(t *testing.T, point string) (seal.MountInfo, bool) {
	t.Helper()
	table, err := seal.ReadMountInfo(0)
	if err != nil {
		t.Fatal(err)
	}
	ms := seal.MountsAt(table, point)
	if len(ms) == 0 {
		return seal.MountInfo{}, false
	}
	return ms[len(ms)-1], true
}

// sharedPair mounts a tmpfs, marks it shared and binds it elsewhere: the
// bind is its peer, to which every mount made beneath the first
// propagates unless something stops it. Both are detached at cleanup
// (with every mount beneath them, the state root's bind included).
func sharedPair(t *testing.T) (dir, peer string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	base := t.TempDir()
	searchable(t, base)
	dir, peer = filepath.Join(base, "shared"), filepath.Join(base, "peer")
	for _, d := range []string{dir, peer} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("test-shared", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dir, peer, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(peer, unix.MNT_DETACH) })
	if m, _ := mountAt(t, peer); m.PeerGroup() == "" {
		t.Fatalf("the peer is in no peer group: %s", m.Line)
	}
	return dir, peer
}

// mountsBeneath returns this process's mount points strictly beneath dir.
func mountsBeneath(t *testing.T, dir string) []string {
	t.Helper()
	table, err := seal.ReadMountInfo(0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range table {
		if strings.HasPrefix(m.MountPoint, dir+"/") {
			out = append(out, m.MountPoint)
		}
	}
	return out
}

// A run's tmpfs is root-only, nosuid, nodev, noexec and private even when
// its state root lies on a shared mount: it never appears in a peer (the
// state root is made a private bind of itself, once, however many runs
// start at the same time), and its end leaves nothing mounted.
func TestBundleTmpfs(t *testing.T) {
	t.Parallel()
	shared, peer := sharedPair(t)
	state := filepath.Join(shared, "state")
	const runs = 4
	var wg sync.WaitGroup
	bundles := make([]string, runs)
	ends := make([]func(), runs)
	errs := make([]error, runs)
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bundles[i], ends[i], errs[i] = startRun(state, fmt.Sprintf("cr00000000000%d", i))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		defer ends[i]() // a second call is a no-op (the runs end below)
	}
	if got := mountsBeneath(t, peer); len(got) != 1 || got[0] != filepath.Join(peer, "state") {
		t.Errorf("the peer sees %v, want only the state root's own bind", got)
	}
	table, err := seal.ReadMountInfo(0)
	if err != nil {
		t.Fatal(err)
	}
	if roots := seal.MountsAt(table, state); len(roots) != 1 || roots[0].PeerGroup() != "" {
		t.Errorf("state root mounts %v, want one private bind", roots)
	}
	bundle := bundles[0]
	m, ok := mountAt(t, bundle)
	if !ok {
		t.Fatalf("no mount on %s", bundle)
	}
	if m.FSType != "tmpfs" || m.Source != bundleSource {
		t.Errorf("mount %s %s, want tmpfs %s", m.FSType, m.Source, bundleSource)
	}
	for _, o := range []string{"nosuid", "nodev", "noexec"} {
		if !slices.Contains(m.Options, o) {
			t.Errorf("per-mount options %v lack %s", m.Options, o)
		}
	}
	for _, o := range m.Optional {
		if strings.HasPrefix(o, "shared:") || strings.HasPrefix(o, "master:") {
			t.Errorf("propagation %q, want private", o)
		}
	}
	// Root's, and the container's init (group CandidateUID) may only
	// pass through it.
	var st unix.Stat_t
	if err := unix.Stat(bundle, &st); err != nil {
		t.Fatal(err)
	} else if st.Mode&0o7777 != 0o710 || st.Uid != 0 || st.Gid != 2147352576 {
		t.Errorf("mode %#o owner %d:%d, want 0710 0:2147352576", st.Mode&0o7777, st.Uid, st.Gid)
	}
	for i := range ends {
		ends[i]()
	}
	if got := mountsBeneath(t, state); len(got) != 0 {
		t.Errorf("still mounted after the runs ended: %v", got)
	}
	if ents, _ := os.ReadDir(state); len(ents) != 0 {
		t.Errorf("the state root still holds %v", ents)
	}
	// The last run to end released the state root's bind: nothing of the
	// sandbox stays mounted. A later run binds it again, and releases it.
	table, _ = seal.ReadMountInfo(0)
	if roots := seal.MountsAt(table, state); len(roots) != 0 {
		t.Errorf("state root mounts %v after every run ended, want none", roots)
	}
	_, end, err := startRun(state, "cr0000000000ff")
	if err != nil {
		t.Fatal(err)
	}
	table, _ = seal.ReadMountInfo(0)
	if roots := seal.MountsAt(table, state); len(roots) != 1 || roots[0].PeerGroup() != "" {
		t.Errorf("state root mounts %v during a later run, want one private bind", roots)
	}
	end()
	table, _ = seal.ReadMountInfo(0)
	if roots := seal.MountsAt(table, state); len(roots) != 0 {
		t.Errorf("state root mounts %v after the later run, want none", roots)
	}
	// A second end closes nothing.
	testshared.ClosesNothingElse(t, end)
}

// releaseStateRoot detaches only a bind of the state root onto itself,
// and only when no run directory is left: a file system mounted at the
// state root by someone else, or a root still holding a (stale) run,
// keeps its mount.
func TestReleaseStateRootOnlyItsOwnBind(t *testing.T) {
	t.Parallel()
	shared, _ := sharedPair(t)
	state := filepath.Join(shared, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	mountsAtState := func() int {
		table, err := seal.ReadMountInfo(0)
		if err != nil {
			t.Fatal(err)
		}
		return len(seal.MountsAt(table, state))
	}
	// An administrator's own tmpfs at the state root.
	if err := unix.Mount("tmpfs", state, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		t.Fatal(err)
	}
	releaseStateRoot(state)
	if n := mountsAtState(); n != 1 {
		t.Fatalf("a tmpfs mounted at the state root by someone else was detached (%d mounts left)", n)
	}
	if err := unix.Unmount(state, 0); err != nil {
		t.Fatal(err)
	}
	// Our bind, with a run directory left beside it, stays.
	if err := unix.Mount(state, state, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(state, "cr0123456789ab"), 0o700); err != nil {
		t.Fatal(err)
	}
	releaseStateRoot(state)
	if n := mountsAtState(); n != 1 {
		t.Fatalf("the bind was released with a run directory left (%d mounts)", n)
	}
	if err := os.Remove(filepath.Join(state, "cr0123456789ab")); err != nil {
		t.Fatal(err)
	}
	releaseStateRoot(state)
	if n := mountsAtState(); n != 0 {
		t.Fatalf("the state root's own bind was not released (%d mounts)", n)
	}
}

// A whole run with the sealed package view: while the command runs (it
// waits on its stdin), a peer of the shared mount the state root lies on
// sees neither the run's tmpfs nor the view.
func TestExecInvisibleToPeers(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	shared, peer := sharedPair(t)
	state := filepath.Join(shared, "state")
	stdinR, stdinW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		res, err := Exec(context.Background(), Config{
			StateDir:    state,
			Args:        []string{"/bin/sh", "-c", "echo ready; read x; test -f /package/p"},
			PackageEmit: func(dir string) error { return os.WriteFile(filepath.Join(dir, "p"), []byte("p"), 0o644) },
		}, Stdio{Stdin: stdinR, Stdout: outW})
		outW.Close()
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit %d", res.ExitCode)
		}
		done <- err
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("the command never said ready: %v (Exec: %v)", err, <-done)
	}
	if line != "ready\n" {
		t.Fatalf("command said %q", line)
	}
	during := mountsBeneath(t, state)
	seen := mountsBeneath(t, filepath.Join(peer, "state"))
	if _, err := stdinW.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	stdinW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }() // drained until the run ends
	if err := <-done; err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if len(during) != 2 {
		t.Errorf("during the run, %v is mounted under the state root; want the run's tmpfs and its package view", during)
	}
	if len(seen) != 0 {
		t.Errorf("a peer namespace sees the run's mounts: %v", seen)
	}
}

// A run refused after its bundle was mounted leaves no mount and no
// directory behind.
func TestExecRefusedLeavesNothing(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	cases := []struct {
		name string
		cfg  Config
		want error // a sentinel
	}{
		{"the package emit refuses", Config{
			Args:        []string{"/bin/true"},
			PackageEmit: func(string) error { return errors.New("refused by the test") },
		}, ErrPackage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.StateDir = testStateDir(t)
			_, err := Exec(context.Background(), c.cfg, Stdio{})
			if err == nil {
				t.Fatal("Exec succeeded")
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("Exec: %v, want %v", err, c.want)
			}
			b, err := os.ReadFile("/proc/self/mountinfo")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), c.cfg.StateDir) {
				t.Errorf("a mount under %s is left:\n%s", c.cfg.StateDir, b)
			}
			ents, err := os.ReadDir(c.cfg.StateDir)
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 0 {
				t.Errorf("the state root still holds %v", ents)
			}
		})
	}
}

// A command that cannot be run is the command's outcome, as a shell gives
// it: 127 not found, 126 found but not executable; the init's reason goes
// to the command's stderr, and nothing is left behind.
func TestExecCommandNotRunnable(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "notexec"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, cmd string
		code      int
		says      string
	}{
		{"absent path", "/nonexistent/cmd", 127, "no such file or directory"},
		{"absent name on PATH", "no-such-command-here", 127, "executable file not found"},
		{"not executable", "/workspace/notexec", 126, "permission denied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state := testStateDir(t)
			var stderr strings.Builder
			res, err := Exec(context.Background(), Config{Args: []string{c.cmd}, Workspace: ws, StateDir: state}, Stdio{Stderr: &stderr})
			if err != nil {
				t.Fatalf("Exec: %v, want the command's status", err)
			}
			if res.Status != StatusExited || res.ExitCode != c.code {
				t.Errorf("status %s %d, want exited %d", res.Status, res.ExitCode, c.code)
			}
			if !strings.Contains(stderr.String(), c.says) || !strings.Contains(stderr.String(), c.cmd) {
				t.Errorf("stderr %q does not say %q about %s", stderr.String(), c.says, c.cmd)
			}
			b, err := os.ReadFile("/proc/self/mountinfo")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), state) {
				t.Errorf("a mount under %s is left", state)
			}
			if ents, err := os.ReadDir(state); err != nil || len(ents) != 0 {
				t.Errorf("the state root: %v %v", ents, err)
			}
		})
	}
}
