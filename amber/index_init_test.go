package amber

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"golang.org/x/sys/unix"
)

// InitIndex writes the whole index or nothing: on a full file system it
// leaves neither a part of an index nor the new key (which would refuse the
// retry), and once there is room the same call succeeds. An existing empty
// directory is taken; one with anything in it is refused.
func TestInitIndexAllOrNothing(t *testing.T) {
	t.Parallel()
	fsDir := testshared.FullFS(t)
	fill := filepath.Join(fsDir, testshared.FillName)

	dir := filepath.Join(fsDir, "index")
	key := filepath.Join(t.TempDir(), "index.key") // on another file system: it is written
	if _, err := InitIndex(dir, "cases.example.org/index", key); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("InitIndex on a full file system: %v, want ENOSPC", err)
	}
	if ents, _ := os.ReadDir(fsDir); len(ents) != 1 || ents[0].Name() != "fill" {
		t.Errorf("left on the full file system: %v", ents)
	}
	if _, err := os.Lstat(key); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the new key was left behind: %v", err)
	}

	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil { // an empty directory is taken
		t.Fatal(err)
	}
	if _, err := InitIndex(dir, "cases.example.org/index", key); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if _, err := LoadIndex(dir, ""); err != nil {
		t.Errorf("the index written: %v", err)
	}
	other := filepath.Join(t.TempDir(), "other.key")
	if _, err := InitIndex(dir, "cases.example.org/index", other); !errors.Is(err, errIndexExists) {
		t.Errorf("InitIndex over an index: %v, want errIndexExists", err)
	}
	if _, err := os.Lstat(other); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused init wrote its key: %v", err)
	}
}

// An existing empty directory is taken as the caller named it, never
// removed to make way for a staged one: the current directory given as "."
// holds the index afterwards (rmdir of "." failed with EINVAL, reported as
// an existing index), and a symbolic link to an empty directory stays a
// link (it was replaced by a directory of its own; durable refuses to write
// through it, so it is refused as before, with nothing left behind).
func TestInitIndexTakesTheNamedEmptyDirectory(t *testing.T) {
	t.Run("the current directory as .", func(t *testing.T) {
		base := t.TempDir()
		d := filepath.Join(base, "ix")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Chdir(d)
		if _, err := InitIndex(".", "cases.example.org/index", filepath.Join(base, "index.key")); err != nil {
			t.Fatalf(`InitIndex("."): %v`, err)
		}
		if _, err := LoadIndex(d, ""); err != nil {
			t.Errorf("no index in the current directory: %v", err)
		}
	})
	t.Run("a symbolic link to an empty directory", func(t *testing.T) {
		base := t.TempDir()
		d, l, key := filepath.Join(base, "real"), filepath.Join(base, "link"), filepath.Join(base, "index.key")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(d, l); err != nil {
			t.Fatal(err)
		}
		_, err := InitIndex(l, "cases.example.org/index", key)
		if fi, lerr := os.Lstat(l); lerr != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("the symbolic link was replaced (InitIndex: %v)", err)
		}
		if err != nil {
			if _, kerr := os.Lstat(key); !errors.Is(kerr, os.ErrNotExist) {
				t.Errorf("a failed init left its key: %v", kerr)
			}
			if ents, _ := os.ReadDir(d); len(ents) != 0 {
				t.Errorf("a failed init left %v in the directory", ents)
			}
		}
	})
}
