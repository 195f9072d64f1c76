package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A staged directory appears whole under its name with the mode asked for,
// never over an existing one, and only beside where it was staged.
func TestCreateDir(t *testing.T) {
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
		{"not beside", filepath.Join(root, "elsewhere", "x"), "three", ErrBadName, "one"},
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
