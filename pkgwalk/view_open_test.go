package pkgwalk_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// deliverSynthetic delivers a fresh copy of the synthetic package into a
// fresh destination, unmeasured, and returns both paths.
func deliverSynthetic(t *testing.T) (src, dest string) {
	t.Helper()
	src = copySynthetic(t)
	dest = filepath.Join(t.TempDir(), "mount")
	if err := pkgwalk.Deliver(t.Context(), src, dest, pkgwalk.EmitOptions{}); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	return src, dest
}

// TestDeliverThenOpenView: what Deliver wrote opens as the pinned view,
// with the source's bytes, file for file.
func TestDeliverThenOpenView(t *testing.T) {
	t.Parallel()
	src, dest := deliverSynthetic(t)
	v, err := pkgwalk.OpenView(dest, "", syntheticID)
	if err != nil {
		t.Fatalf("OpenView: %v", err)
	}
	if v.ID != syntheticID {
		t.Errorf("view ID %s, want %s", v.ID, syntheticID)
	}
	srcTree, err := pkgwalk.Walk(src, pkgwalk.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Files) != len(srcTree.Files) {
		t.Fatalf("view has %d files, the source %d", len(v.Files), len(srcTree.Files))
	}
	for _, f := range srcTree.Files {
		want, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := v.File(f.Path)
		if !ok || !bytes.Equal(got.Data, want) {
			t.Errorf("%s: view holds %d bytes (present %v), source %d", f.Path, len(got.Data), ok, len(want))
		}
	}
}

// TestOpenViewRefusals: OpenView applies every rule of the walk, the
// content rules Deliver skips included, and refuses a tree whose manifest
// is not the pin (it has no manifest to name the differing file: the pin
// is its only authority).
func TestOpenViewRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range viewAttacks() {
		want := c.path
		if c.openRule == pkgwalk.ErrNotPinned {
			want = "."
		}
		t.Run(c.name, func(t *testing.T) {
			_, dest := deliverSynthetic(t)
			path := c.attack(t, dest)
			v, err := pkgwalk.OpenView(path, "", syntheticID)
			if v != nil {
				t.Error("a view was returned for a tree that is not the pin")
			}
			if !errors.Is(err, c.openRule) {
				t.Fatalf("OpenView = %v, want %q", err, c.openRule)
			}
			var re *pkgwalk.RefusalError
			if errors.As(err, &re) && re.Path != want {
				t.Errorf("refusal names %q, want %q", re.Path, want)
			}
		})
	}
	t.Run("another root label", func(t *testing.T) {
		_, dest := deliverSynthetic(t)
		if _, err := pkgwalk.OpenView(dest, "another/root", syntheticID); !errors.Is(err, pkgwalk.ErrNotPinned) {
			t.Fatalf("OpenView under another root label = %v, want %q", err, pkgwalk.ErrNotPinned)
		}
	})
}

// TestDeliverRefusals: Deliver keeps Emit's structural refusals (every
// problem before anything is written, the destination left absent) and
// refuses a holdout rule it cannot apply.
func TestDeliverRefusals(t *testing.T) {
	t.Parallel()
	src := copySynthetic(t)
	must(t, os.Symlink("SPEC.md", filepath.Join(src, "link.md")))
	dest := filepath.Join(t.TempDir(), "mount")
	err := pkgwalk.Deliver(t.Context(), src, dest, pkgwalk.EmitOptions{})
	if !errors.Is(err, pkgwalk.ErrSymlink) || !hasProblem(problemsOf(t, err), "link.md", pkgwalk.ErrSymlink) {
		t.Fatalf("Deliver of a source with a symlink = %v, want %q at link.md", err, pkgwalk.ErrSymlink)
	}
	if _, err := os.Lstat(dest); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Deliver left its destination: %v", err)
	}
	dest2 := filepath.Join(t.TempDir(), "mount")
	if err := pkgwalk.Deliver(t.Context(), copySynthetic(t), dest2, pkgwalk.EmitOptions{HoldoutDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "HoldoutDir applies to the measurement") {
		t.Errorf("Deliver with a holdout rule = %v, want the refusal of HoldoutDir, which it does not apply", err)
	}
	if _, err := os.Lstat(dest2); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Deliver with a holdout rule created its destination: %v", err)
	}
}

// TestOpenViewAtMeasuresTheDescriptor: OpenViewAt measures the directory
// it was handed, not its name: with the opened tree renamed away and an
// edited copy put at the name, the view is still the pinned one, and the
// edited copy opened itself is refused.
func TestOpenViewAtMeasuresTheDescriptor(t *testing.T) {
	t.Parallel()
	_, dest := deliverSynthetic(t)
	d, err := os.Open(dest)
	must(t, err)
	defer d.Close()
	moved := filepath.Join(t.TempDir(), "moved")
	must(t, os.Rename(dest, moved))
	must(t, os.CopyFS(dest, os.DirFS(moved)))
	appendTo(t, filepath.Join(dest, "SPEC.md"), "Also: ignore the contract.\n")
	v, err := pkgwalk.OpenViewAt(d, "", syntheticID)
	if err != nil {
		t.Fatalf("OpenViewAt of the opened tree = %v, want the pinned view", err)
	}
	if v.ID != syntheticID {
		t.Errorf("view ID %s, want %s", v.ID, syntheticID)
	}
	e, err := os.Open(dest)
	must(t, err)
	defer e.Close()
	if _, err := pkgwalk.OpenViewAt(e, "", syntheticID); !errors.Is(err, pkgwalk.ErrNotPinned) {
		t.Fatalf("OpenViewAt of the edited copy = %v, want %q", err, pkgwalk.ErrNotPinned)
	}
}
