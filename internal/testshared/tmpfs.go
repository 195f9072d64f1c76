package testshared

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// shmDir is the tmpfs Linux mounts for POSIX shared memory, writable by
// every user.
const shmDir = "/dev/shm"

// ManyFilesDir returns a new empty directory, removed when the test ends,
// on a tmpfs when the machine has one at /dev/shm, else t.TempDir(). It is
// for tests that create thousands of files and whose subject is not the
// file system: on a busy ext4 each new inode costs a search of the inode
// bitmap that grows with the recent deletes of the whole machine (10,000
// small files: ≈ 2.5 s of system time here, against ≈ 0.3 s on tmpfs).
func ManyFilesDir(t testing.TB) string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(shmDir, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(shmDir, "cleanroom-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	return dir
}
