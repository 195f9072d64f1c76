package holdout

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom/experiment"
)

// A world that declares its finding classes classifies with them, and only
// them: the reference protocol's language-named classes are not its own.
func TestWorldDeclaredClasses(t *testing.T) {
	dir := t.TempDir()
	decl := filepath.Join(dir, "docs", "spec", "proof-wire", "experiment", "world.json")
	if err := os.MkdirAll(filepath.Dir(decl), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(decl, []byte(`{"format": "CLEANROOM-WORLD-v1", "adapter_interpreters": ["python3"],
 "instrument": ["experiment/fixtures"], "reference_adapter": "governance/ref.json",
 "finding_classes": ["SPEC_GAP", "PY_REFERENCE_DEFECT"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := experiment.OpenWorld(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := WorldRegister(w)
	if err != nil {
		t.Fatal(err)
	}
	pairs := pairsWithFindings(t)
	recs, err := reg.Open("brun-x", srel0, pairs)
	if err != nil || len(recs) != 2 {
		t.Fatalf("%v %v", recs, err)
	}
	if _, err := reg.Classify(recs[0].ID, "JS_CHECKER_DEFECT", "a reference-protocol class"); !errors.Is(err, ErrClass) {
		t.Errorf("a class the world does not declare: %v, want ErrClass", err)
	}
	if _, err := reg.Classify(recs[0].ID, "PY_REFERENCE_DEFECT", "the Python reference is wrong"); err != nil {
		t.Fatal(err)
	}
	// The register reads back under the world's classes, and not under the
	// reference protocol's (where PY_REFERENCE_DEFECT is no class).
	if fs, err := reg.Findings(); err != nil || fs[0].Class != "PY_REFERENCE_DEFECT" {
		t.Errorf("%+v %v", fs, err)
	}
	if _, err := OpenRegister(w.StateDir()).Findings(); !errors.Is(err, ErrLog) {
		t.Errorf("read under the reference classes: %v, want ErrLog", err)
	}
	q := Question{FrozenSpecRevision: 1, Question: "q", WhyInsufficient: "w", Ruling: "r", Classification: "PY_REFERENCE_DEFECT"}
	if _, err := AskQuestion(w.StateDir(), q); !errors.Is(err, ErrClass) {
		t.Errorf("question under the reference classes: %v, want ErrClass", err)
	}
	if q.Classes, err = WorldClasses(w); err != nil {
		t.Fatal(err)
	}
	if _, err := AskQuestion(w.StateDir(), q); err != nil {
		t.Errorf("question under the world's classes: %v", err)
	}
}
