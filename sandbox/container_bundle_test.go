package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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

// The bundle's tmpfs is root-only, nosuid, nodev, noexec and private even
// under a shared parent (a mount under it must not reach another
// namespace), and its unmount leaves nothing mounted.
func TestBundleTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	// A shared parent, so that "private" is something the mount must do
	// itself rather than inherit.
	parent := t.TempDir()
	if err := unix.Mount(parent, parent, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(parent, unix.MNT_DETACH) })
	if err := unix.Mount("", parent, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(parent, "run")
	if err := os.Mkdir(bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	unmount, err := mountBundle(bundle)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := mountAt(t, bundle)
	if !ok {
		unmount()
		t.Fatalf("no mount on %s", bundle)
	}
	fi, err := os.Stat(bundle)
	if err != nil {
		unmount()
		t.Fatal(err)
	}
	unmount()
	if m.FSType != "tmpfs" {
		t.Errorf("fstype %q, want tmpfs", m.FSType)
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
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("mode %v, want 0700", perm)
	}
	if _, ok := mountAt(t, bundle); ok {
		t.Errorf("%s is still mounted after unmount", bundle)
	}
}

// A run refused after its bundle was mounted leaves no mount and no
// directory behind.
func TestExecRefusedLeavesNothing(t *testing.T) {
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
			c.cfg.StateDir = filepath.Join(t.TempDir(), "state")
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
			state := filepath.Join(t.TempDir(), "state")
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
