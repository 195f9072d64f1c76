package pkgwalk_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"golang.org/x/sys/unix"
)

// syntheticID is the bpkg of testdata/synthetic with the default root
// label, computed once outside this code (Python: sha256 of each file, the
// canonical text written by hand, the domain prefix) and pinned here.
const syntheticID = "bpkg-b37a3a1f55a4026bc5a39a7254dd8b87e133d0c5337d9fd996b54dc96924d060"

// syntheticIDLabelled is the same package with root label "synthetic".
const syntheticIDLabelled = "bpkg-39652ea7e01a40d0b708b109b8bf8b76d19292854820798e35771935451389bb"

// syntheticFiles is the package's file count.
const syntheticFiles = 7

// copySynthetic copies testdata/synthetic into a fresh directory and
// returns its path: tests modify copies, never testdata.
func copySynthetic(t testing.TB) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "pkg")
	if err := os.CopyFS(dst, os.DirFS("testdata/synthetic")); err != nil {
		t.Fatalf("copying the synthetic package: %v", err)
	}
	return dst
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// hasProblem reports whether probs holds a problem of rule r at path.
func hasProblem(probs pkgwalk.Problems, path string, r pkgwalk.Rule) bool {
	for _, p := range probs {
		if p.Path == path && p.Rule == r {
			return true
		}
	}
	return false
}

// problemsOf extracts the Problems from an error returned by Emit or
// VerifyView.
func problemsOf(t testing.TB, err error) pkgwalk.Problems {
	t.Helper()
	var probs pkgwalk.Problems
	if !errors.As(err, &probs) {
		t.Fatalf("error is not a Problems list: %v", err)
	}
	return probs
}

// mustMknod creates a character device node, or skips the test when the
// kernel or the environment does not permit it.
func mustMknod(t testing.TB, path string) {
	t.Helper()
	// 1:3 is /dev/null's device number: harmless if anything opened it.
	if err := unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Skipf("mknod not permitted here (%v): the char-device refusal needs root", err)
	}
}

// mustMountTmpfs mounts a tmpfs on dir, unmounting it at cleanup, or skips
// the test when mounting is not permitted.
func mustMountTmpfs(t testing.TB, dir string) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mounting a tmpfs is not permitted here (%v): the mount-point refusal needs root", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
}

// mustSocket binds a unix socket at path.
func mustSocket(t testing.TB, path string) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	// The directory by its descriptor keeps the address under the 108-byte
	// limit without a chdir, which would move every parallel test's cwd.
	dir, name := filepath.Split(path)
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: fmt.Sprintf("/proc/self/fd/%d/%s", dfd, name)}); err != nil {
		t.Fatalf("bind %s: %v", path, err)
	}
}
