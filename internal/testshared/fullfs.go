package testshared

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// FullFS mounts a small tmpfs for the test (detached at its end), fills it
// and returns its path: a write of file data there fails with ENOSPC
// (creating a name or a directory still works: tmpfs spends no block on
// them). It skips the test where it cannot mount (not root).
func FullFS(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("cannot mount a tmpfs to fill (needs root): %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	f, err := os.Create(filepath.Join(dir, FillName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			return dir
		}
	}
}

// FillName is the file FullFS fills; removing it makes room again.
const FillName = "fill"
