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

// A staged directory appears whole under its name with the mode asked for,
// never over an existing one, and only beside where it was staged.
func TestCreateDir(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	stageWith := func(t *testing.T, dir, content string) string {
		t.Helper()
		stage, err := StageDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(filepath.Base(stage), TempPrefix) || filepath.Dir(stage) != filepath.Dir(dir) {
			t.Fatalf("stage %s for %s", stage, dir)
		}
		if err := Create(stage, "f", []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return stage
	}
	dir := filepath.Join(root, "plan")
	for _, c := range []struct {
		name    string
		dir     string
		content string
		wantErr error
		want    string
	}{
		{"create", dir, "one", nil, "one"},
		{"exists", dir, "two", fs.ErrExist, "one"},
		{"not beside", filepath.Join(root, "elsewhere", "x"), "three", errBadName, "one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			stage := stageWith(t, dir, c.content)
			err := CreateDir(stage, c.dir, 0o755)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("CreateDir: %v, want %v", err, c.wantErr)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != c.want {
				t.Errorf("%s/f holds %q, want %q", dir, b, c.want)
			}
			if err == nil {
				if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
					t.Errorf("mode %v, want 0755", fi.Mode().Perm())
				}
			} else if _, serr := os.Stat(stage); serr != nil {
				t.Errorf("a refused CreateDir lost the stage: %v", serr)
			}
		})
	}
}

// ReplaceEmptyDir takes the place of an absent or empty directory, and
// changes nothing when the directory has an entry or is a file.
func TestReplaceEmptyDir(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		setup   func(dir string) error
		wantErr error
		wantF   bool // the staged file is at dir/f afterwards
	}{
		{"absent", func(string) error { return nil }, nil, true},
		{"empty", func(dir string) error { return os.Mkdir(dir, 0o700) }, nil, true},
		{"not empty", func(dir string) error {
			if err := os.Mkdir(dir, 0o700); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "keep"), nil, 0o644)
		}, ErrDirNotEmpty, false},
		{"a file", func(dir string) error { return os.WriteFile(dir, nil, 0o644) }, syscall.ENOTDIR, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "world")
			if err := c.setup(dir); err != nil {
				t.Fatal(err)
			}
			stage, err := StageDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := Create(stage, "f", []byte("staged"), 0o644); err != nil {
				t.Fatal(err)
			}
			err = ReplaceEmptyDir(stage, dir, 0o755)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("ReplaceEmptyDir: %v, want %v", err, c.wantErr)
			}
			b, rerr := os.ReadFile(filepath.Join(dir, "f"))
			if got := rerr == nil && string(b) == "staged"; got != c.wantF {
				t.Errorf("dir/f staged=%v, want %v (%v)", got, c.wantF, rerr)
			}
			if c.wantErr != nil {
				if _, err := os.Stat(filepath.Join(dir, "keep")); c.name == "not empty" && err != nil {
					t.Errorf("the existing entry is gone: %v", err)
				}
			} else if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
				t.Errorf("mode %v, want 0755", fi.Mode().Perm())
			}
		})
	}
}
