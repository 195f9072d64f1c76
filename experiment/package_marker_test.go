package experiment

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A world root's cleanroom-package moves the package; absent, the package
// is at docs/spec/proof-wire. A marker that would put the package outside
// the world, in the state root, or behind a symbolic link is refused by
// OpenWorld as errPackageMarker, before any command reads a package.
func TestPackageMarker(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, root string)
		want  string // the package label; "" when refused
	}{
		{"absent", func(*testing.T, string) {}, "docs/spec/proof-wire"},
		{"another directory", func(t *testing.T, root string) {
			mkdir(t, root, "spec/checksum")
			write(t, root, "spec/checksum\n")
		}, "spec/checksum"},
		{"no newline", func(t *testing.T, root string) { mkdir(t, root, "spec"); write(t, root, "spec") }, ""},
		{"two lines", func(t *testing.T, root string) { mkdir(t, root, "spec"); write(t, root, "spec\nother\n") }, ""},
		{"empty", func(t *testing.T, root string) { write(t, root, "\n") }, ""},
		{"escaping", func(t *testing.T, root string) { write(t, root, "../outside\n") }, ""},
		{"absolute", func(t *testing.T, root string) { write(t, root, "/etc\n") }, ""},
		{"the state root", func(t *testing.T, root string) { mkdir(t, root, "governance"); write(t, root, "governance\n") }, ""},
		{"beneath the state root", func(t *testing.T, root string) {
			mkdir(t, root, "governance/holdout")
			write(t, root, "governance/holdout\n")
		}, ""},
		{"a missing directory", func(t *testing.T, root string) { write(t, root, "spec/checksum\n") }, ""},
		{"a symlinked component", func(t *testing.T, root string) {
			mkdir(t, root, "elsewhere/checksum")
			if err := os.Symlink("elsewhere", filepath.Join(root, "spec")); err != nil {
				t.Fatal(err)
			}
			write(t, root, "spec/checksum\n")
		}, ""},
		{"a symlinked marker", func(t *testing.T, root string) {
			mkdir(t, root, "spec")
			outside := filepath.Join(t.TempDir(), "marker")
			if err := os.WriteFile(outside, []byte("spec\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(root, PackageMarkerName)); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"a directory as marker", func(t *testing.T, root string) { mkdir(t, root, PackageMarkerName) }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			c.setup(t, root)
			w, err := OpenWorld(root)
			if c.want == "" {
				if !errors.Is(err, errPackageMarker) {
					t.Fatalf("OpenWorld: %v, want %v", err, errPackageMarker)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.PackageLabel() != c.want || w.PackageDir() != filepath.Join(w.Root, filepath.FromSlash(c.want)) {
				t.Errorf("package %q at %s, want %q", w.PackageLabel(), w.PackageDir(), c.want)
			}
		})
	}
}

func mkdir(t *testing.T, root, rel string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(rel)), 0o755); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, root, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, PackageMarkerName), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// FindWorld, from inside a world whose package is at spec/checksum (so
// there is no docs/spec/proof-wire/ and, before a pin, no run record),
// finds the world by its cleanroom-package.
func TestFindWorldByPackageMarker(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mkdir(t, root, "spec/checksum/experiment")
	write(t, root, "spec/checksum\n")
	w, err := FindWorld(filepath.Join(root, "spec", "checksum", "experiment"))
	if err != nil {
		t.Fatal(err)
	}
	if real, _ := filepath.EvalSymlinks(root); w.Root != real || w.PackageLabel() != "spec/checksum" {
		t.Errorf("found %s with package %q, want %s with spec/checksum", w.Root, w.PackageLabel(), root)
	}
}
