package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// mountAt returns the topmost mount on point in this process's table.
func mountAt(t *testing.T, point string) (MountInfo, bool) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ms, err := ParseMountInfo(f)
	if err != nil {
		t.Fatal(err)
	}
	var last MountInfo
	found := false
	for _, m := range ms {
		if m.MountPoint == point {
			last, found = m, true
		}
	}
	return last, found
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
		want error // a sentinel, or nil for "any error from Start"
	}{
		{"the package emit refuses", Config{
			Args:        []string{"/bin/true"},
			PackageEmit: func(string) error { return errors.New("refused by the test") },
		}, ErrPackage},
		{"the command does not exist", Config{Args: []string{"/nonexistent/cmd"}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.StateDir = filepath.Join(t.TempDir(), "state")
			_, err := Exec(context.Background(), c.cfg, Stdio{})
			if err == nil {
				t.Fatal("Exec succeeded")
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("Exec: %v, want %v", err, c.want)
			}
			if c.want == nil && !strings.Contains(err.Error(), "starting container") {
				t.Fatalf("Exec: %v, want the container start refused", err)
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
