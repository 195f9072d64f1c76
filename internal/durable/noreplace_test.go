package durable

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"golang.org/x/sys/unix"
)

// The no-replace publishing used where renameat2 takes no flags (gVisor):
// a file by link(2), a directory by a checked rename. Neither replaces
// anything that holds bytes; each leaves no temporary behind.
func TestNoReplaceFallbacks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		dir    bool
		occupy func(t *testing.T, path string) // nil: the name is free
		want   error
	}{
		{"file, free name", false, nil, nil},
		{"file over a file", false, writeFile("old"), unix.EEXIST},
		{"file over a symlink", false, symlink("elsewhere"), unix.EEXIST},
		{"file over a directory", false, mkdir(false), unix.EEXIST},
		{"directory, free name", true, nil, nil},
		{"directory over a file", true, writeFile("old"), unix.EEXIST},
		{"directory over a directory with an entry", true, mkdir(true), unix.EEXIST},
		{"directory over an empty directory", true, mkdir(false), unix.EEXIST},
		{"directory over a symlink", true, symlink("elsewhere"), unix.EEXIST},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			from, to := filepath.Join(dir, TempPrefix+"x"), filepath.Join(dir, "x")
			if tc.dir {
				if err := os.Mkdir(from, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(from, "inside"), []byte("new"), 0o644); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(from, []byte("new"), 0o644); err != nil {
				t.Fatal(err)
			}
			var before os.FileInfo
			if tc.occupy != nil {
				tc.occupy(t, to)
				before, _ = os.Lstat(to)
			}
			fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if tc.dir {
				err = renameDirNoReplace(fd, filepath.Base(from), "x")
			} else {
				err = linkNoReplace(fd, filepath.Base(from), "x")
			}
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("publishing over an occupied name = %v, want %v", err, tc.want)
				}
				after, lerr := os.Lstat(to)
				if lerr != nil || !os.SameFile(before, after) {
					t.Errorf("the occupant of the name was replaced (%v)", lerr)
				}
				return
			}
			if err != nil {
				t.Fatalf("publishing at a free name: %v", err)
			}
			got := to
			if tc.dir {
				got = filepath.Join(to, "inside")
			}
			if b, err := os.ReadFile(got); err != nil || string(b) != "new" {
				t.Errorf("published %q, %v; want \"new\"", b, err)
			}
			if _, err := os.Lstat(from); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the temporary name is still there (%v)", err)
			}
		})
	}
}

func writeFile(s string) func(*testing.T, string) {
	return func(t *testing.T, p string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(target string) func(*testing.T, string) {
	return func(t *testing.T, p string) {
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
}

func mkdir(withEntry bool) func(*testing.T, string) {
	return func(t *testing.T, p string) {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if withEntry {
			if err := os.WriteFile(filepath.Join(p, "kept"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestUnderGVisor runs this package's tests again inside gVisor, whose
// runsc 20221219 answers EINVAL to renameat2 RENAME_NOREPLACE: Create and
// CreateDir must keep their promise there through the fallbacks, and a
// symlinked directory must still be refused (runsc follows a link despite
// O_DIRECTORY|O_NOFOLLOW).
func TestUnderGVisor(t *testing.T) {
	t.Parallel()
	for mode, out := range testshared.UnderGVisor(t, "^(TestCreate|TestSymlinkedDirRefused|TestNoReplaceFallbacks|TestReplace|TestModeIgnoresUmask|TestLongestNameWritable)") {
		for _, want := range []string{"--- PASS: TestCreateNeverReplaces", "--- PASS: TestCreateDir", "--- PASS: TestSymlinkedDirRefused", "--- PASS: TestNoReplaceFallbacks", "\nPASS\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("the tests under runsc (%s) did not say %q:\n%s", mode, strings.TrimSpace(want), out)
			}
		}
	}
}
