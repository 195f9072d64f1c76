package harness

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// TestWorkspaceNameClashes: sequences of writes whose last one must be
// refused by the named rule, leaving the workspace as the earlier writes
// made it. Two directories equal after case-folding are one directory on
// a case-insensitive filesystem (and the package walk refuses them).
func TestWorkspaceNameClashes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		before []string
		path   string
		rule   pkgwalk.Rule
	}{
		{"case twin file", []string{"Main.go"}, "main.go", errWriteCase},
		{"case twin directory", []string{"A/x.go"}, "a/y.go", errWriteCase},
		{"case twin directory, deeper", []string{"src/Pkg/x.go"}, "src/pkg/y.go", errWriteCase},
		{"directory under a file", []string{"a"}, "a/b", errWriteConflict},
		{"directory under a case twin of a file", []string{"a"}, "A/b", errWriteConflict},
		{"file on a directory", []string{"a/b"}, "a", errWriteConflict},
		{"file on a case twin of a directory", []string{"a/b"}, "A", errWriteConflict},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ws")
			w, err := CreateWorkspace(dir, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := w.Close(); err != nil {
					t.Error(err)
				}
			}()
			for _, p := range c.before {
				if err := w.Write(p, []byte("x")); err != nil {
					t.Fatalf("write %q: %v", p, err)
				}
			}
			err = w.Write(c.path, []byte("y"))
			var re *pkgwalk.RefusalError
			if !errors.As(err, &re) || re.Rule != c.rule {
				t.Fatalf("write %q: %v, want %q", c.path, err, c.rule)
			}
			if b, err := os.ReadFile(filepath.Join(dir, c.path)); err == nil && string(b) == "y" {
				t.Errorf("%q written although refused", c.path)
			}
		})
	}
}
