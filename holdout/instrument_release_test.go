package holdout

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// The schemas decide what is refused, and they are read by path after the
// run was verified (adapter.MeasureRun, experiment's replay of a COMPLETE
// run). Loaded against a release, each must be the file the release
// records in experiment_files: a schema opened up after verification
// (here: the envelope no longer closed) must not decide what is scored.
func TestLoadInstrumentAuthenticatesTheSchemas(t *testing.T) {
	t.Parallel()
	world := filepath.Join(testshared.RepoRoot(t), "testdata", "world")
	root := t.TempDir()
	pkg := filepath.Join(root, "docs", "spec", "proof-wire")
	holdoutDir := filepath.Join(root, "governance", "holdout")
	if err := os.CopyFS(pkg, os.DirFS(filepath.Join(world, "docs", "spec", "proof-wire"))); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(holdoutDir, os.DirFS(filepath.Join(world, "governance", "holdout"))); err != nil {
		t.Fatal(err)
	}
	rel := committedAsIs(t, pkg, holdoutDir)
	_, files, err := pkgwalk.DigestOfPaths(pkg, []string{"experiment"})
	if err != nil {
		t.Fatal(err)
	}
	rel.Files = map[string]string{}
	for _, f := range files {
		rel.Files[f.Path] = f.SHA256
	}
	if _, err := LoadInstrument(pkg, holdoutDir, rel); err != nil {
		t.Fatalf("the recorded instrument: %v", err)
	}

	for _, name := range []string{ObservationSchemaFile, RecipeSchemaFile} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(pkg, "experiment", name)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Errorf("restoring %s: %v", p, err)
				}
			})
			opened := strings.Replace(string(b), `"additionalProperties": false`, `"additionalProperties": true`, 1)
			if opened == string(b) {
				t.Fatal("the edit changed nothing")
			}
			if err := os.WriteFile(p, []byte(opened), 0o644); err != nil {
				t.Fatal(err)
			}
			in, err := LoadInstrument(pkg, holdoutDir, rel)
			if !errors.Is(err, errInstrument) {
				t.Fatalf("loaded with %s not the recorded one: err = %v, want %v", name, err, errInstrument)
			}
			if in.Scorer != nil {
				t.Error("a scorer was built over a schema the release does not record")
			}
		})
	}
}

// committedAsIs is what a release issued over holdoutDir as it stands
// would commit (TestConformanceHoldout holds DigestOf to the reference's
// commitment; experiment's tests hold the release's own computation).
func committedAsIs(t *testing.T, pkg, holdoutDir string) *Committed {
	t.Helper()
	h, err := LoadDir(holdoutDir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := DigestOf(pkg, holdoutDir, h.read)
	if err != nil {
		t.Fatal(err)
	}
	return &Committed{Commitment: c, Entries: len(h.Entries)}
}
