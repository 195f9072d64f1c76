package experiment

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// CheckHoldout compares a holdout set with the commitment of the package's
// release when there is one, and only then; a release it cannot examine is
// an error, never a set passed as uncommitted.
func TestCheckHoldout(t *testing.T) {
	t.Parallel()
	w := testshared.World(t, "world")
	refPkg := filepath.Join(w, "docs", "spec", "proof-wire")
	refHoldout := filepath.Join(w, "governance", "holdout")
	// The reference release's commitment (TRVM-FORMATS §3.5), as
	// `holdout commitment` prints it for this world.
	const refCommitment = "86d437fcbd9efee21c5cf27e25564d478592731ae8d2a9e2b9f472a592630071"

	// copyWorld lays out pkg/experiment's schemas and a copy of the
	// holdout where the reference layout has them; release says what
	// stands at pkg/SPEC-RELEASE.json.
	copyWorld := func(t *testing.T, release func(t *testing.T, p string)) (pkg, hd string) {
		root := t.TempDir()
		pkg = filepath.Join(root, "docs", "spec", "proof-wire")
		if err := os.MkdirAll(filepath.Join(pkg, "experiment"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{holdout.RecipeSchemaFile, "holdout-observation-v1.schema.json"} {
			b, err := os.ReadFile(filepath.Join(refPkg, "experiment", f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(pkg, "experiment", f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		release(t, filepath.Join(pkg, ReleaseFile))
		hd = filepath.Join(root, "governance", "holdout")
		if err := os.CopyFS(hd, os.DirFS(refHoldout)); err != nil {
			t.Fatal(err)
		}
		return pkg, hd
	}
	refRelease := func(t *testing.T, p string) {
		b, err := os.ReadFile(filepath.Join(refPkg, ReleaseFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	flipByte := func(t *testing.T, hd string) {
		p := filepath.Join(hd, "H8-policy-weakening.json")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[10] ^= 0x20
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name      string
		release   func(t *testing.T, p string)
		tamper    func(t *testing.T, hd string)
		committed bool   // a release was compared
		refused   string // the rule's text, "" for a pass
		class     fault.Class
	}{
		{name: "the release's set", release: refRelease, committed: true},
		{name: "no release: validated, not compared", release: func(*testing.T, string) {}},
		{name: "a byte changed after the commitment", release: refRelease, tamper: flipByte,
			refused: "holdout does not match the release's holdout_commitment", class: fault.Refused},
		{name: "release a dangling link", release: func(t *testing.T, p string) {
			if err := os.Symlink("nowhere.json", p); err != nil {
				t.Fatal(err)
			}
		}, refused: "reading release record", class: fault.Unusable},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pkg, hd := copyWorld(t, c.release)
			if c.tamper != nil {
				c.tamper(t, hd)
			}
			s, err := holdout.LoadPackageSchemas(pkg)
			if err != nil {
				t.Fatal(err)
			}
			h, rel, err := CheckHoldout(pkg, hd, s)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) || fault.ClassOf(err) != c.class || h != nil || rel != nil {
					t.Fatalf("CheckHoldout = %v, %v, %v (class %v), want %s naming %q", h, rel, err, fault.ClassOf(err), c.class, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(h.Entries) != 10 {
				t.Errorf("%d entries, want the reference's 10", len(h.Entries))
			}
			if c.committed != (rel != nil) || rel != nil && rel.HoldoutCommitment != refCommitment {
				t.Errorf("release compared %+v, want compared=%v with %s", rel, c.committed, refCommitment)
			}
		})
	}
}
