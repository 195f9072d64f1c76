package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCreateNeverReplaces(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := Create(dir, "a.json", []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Create(dir, "a.json", []byte("two"), 0o644)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second Create: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.json")); string(b) != "one" {
		t.Fatalf("content %q after a refused Create", b)
	}
	assertNoTemps(t, dir)
}

func TestReplaceSwapsWholeFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := ReplaceFile(filepath.Join(dir, "r"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ReplaceFile(filepath.Join(dir, "r"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "r"))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "r")); string(b) != "new" || fi.Mode().Perm() != 0o644 {
		t.Fatalf("content %q mode %v", b, fi.Mode().Perm())
	}
	assertNoTemps(t, dir)
}

// A symlinked directory is not followed: the write cannot be redirected.
func TestSymlinkedDirRefused(t *testing.T) {
	t.Parallel()
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	// O_DIRECTORY|O_NOFOLLOW on a symlink: the kernel answers ENOTDIR.
	if err := Create(link, "x", []byte("x"), 0o644); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("Create through a symlinked directory: %v, want ENOTDIR", err)
	}
	if ents, _ := os.ReadDir(real); len(ents) != 0 {
		t.Fatalf("the symlink's target got %d entries", len(ents))
	}
}

func TestNameWithSeparatorRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"", ".", "..", "a/b", "../x"} {
		if err := Create(dir, name, []byte("x"), 0o644); !errors.Is(err, errBadName) {
			t.Errorf("Create(%q): %v, want errBadName", name, err)
		}
	}
}

func TestMkdirAll(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d := filepath.Join(root, "a", "b", "c")
	if err := MkdirAll(d); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		t.Fatalf("%s: %v", d, err)
	}
	f := filepath.Join(root, "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(f); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("MkdirAll over a file: %v, want ENOTDIR", err)
	}
	// A symlink to a directory is not a directory of this tree.
	link := filepath.Join(root, "link")
	if err := os.Symlink(d, link); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(link); !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("MkdirAll over a symlink: %v, want ENOTDIR", err)
	}
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), TempPrefix) {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// CreateIn writes into the directory held, even when its path has since
// been re-pointed elsewhere.
func TestCreateInWritesTheHeldDirectory(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	held := filepath.Join(base, "out")
	if err := os.Mkdir(held, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// The name now leads elsewhere.
	if err := os.Rename(held, filepath.Join(base, "moved")); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := os.Symlink(other, held); err != nil {
		t.Fatal(err)
	}
	if err := CreateIn(d, "m.json", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(base, "moved", "m.json")); err != nil || string(b) != "x" {
		t.Errorf("held directory: %q, %v", b, err)
	}
	if ents, _ := os.ReadDir(other); len(ents) != 0 {
		t.Errorf("the re-pointed path got %d entries", len(ents))
	}
	if err := CreateIn(d, "m.json", []byte("y"), 0o644); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second CreateIn: %v, want fs.ErrExist", err)
	}
	if err := CreateIn(d, "../x", []byte("y"), 0o644); !errors.Is(err, errBadName) {
		t.Errorf("CreateIn(../x): %v, want errBadName", err)
	}
	assertNoTemps(t, filepath.Join(base, "moved"))
}

// ReplaceIn swaps a file of the held directory whole and leaves no
// temporary file behind.
func TestReplaceInSwapsInTheHeldDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, content := range []string{"first", "second"} {
		if err := ReplaceIn(d, "src.go", []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "src.go")); err != nil || string(b) != content {
			t.Fatalf("after ReplaceIn(%q): %q, %v", content, b, err)
		}
	}
	if err := ReplaceIn(d, "a/b", []byte("x"), 0o644); !errors.Is(err, errBadName) {
		t.Errorf("ReplaceIn with a separator: %v, want errBadName", err)
	}
	assertNoTemps(t, dir)
}

// The mode asked for is the mode written, whatever the process umask: a
// restrictive umask must not make evidence unreadable to its verifier.
func TestModeIgnoresUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range []struct {
		name  string
		write func(name string) error
	}{
		{"Create", func(n string) error { return Create(dir, n, []byte("x"), 0o644) }},
		{"Replace", func(n string) error { return Replace(dir, n, []byte("x"), 0o644) }},
		{"CreateIn", func(n string) error { return CreateIn(d, n, []byte("x"), 0o644) }},
		{"ReplaceIn", func(n string) error { return ReplaceIn(d, n, []byte("x"), 0o644) }},
	} {
		if err := c.write(c.name); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		fi, err := os.Stat(filepath.Join(dir, c.name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s under umask 077: mode %v, want 0644", c.name, fi.Mode().Perm())
		}
	}
}

// Any name the file system accepts can be written, the longest included:
// the temporary name beside it must not be the one that is too long.
func TestLongestNameWritable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i, write := range []func(name string) error{
		func(n string) error { return Create(dir, n, []byte("x"), 0o644) },
		func(n string) error { return Replace(dir, n, []byte("x"), 0o644) },
		func(n string) error { return CreateIn(d, n, []byte("x"), 0o644) },
		func(n string) error { return ReplaceIn(d, n, []byte("x"), 0o644) },
	} {
		name := strings.Repeat(string(rune('a'+i)), 255) // NAME_MAX
		if err := write(name); err != nil {
			t.Errorf("writing a %d-byte name: %v", len(name), err)
			continue
		}
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != "x" {
			t.Errorf("%.10s…: %q %v", name, b, err)
		}
	}
	assertNoTemps(t, dir)
	stage, err := StageDir(filepath.Join(dir, strings.Repeat("s", 255)))
	if err != nil {
		t.Fatalf("StageDir for a 255-byte name: %v", err)
	}
	if err := CreateDir(stage, filepath.Join(dir, strings.Repeat("s", 255)), 0o755); err != nil {
		t.Errorf("CreateDir: %v", err)
	}
}
