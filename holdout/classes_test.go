package holdout

import (
	"errors"
	"testing"
)

// A register given a world's declared finding classes classifies with
// them, and only them: the reference protocol's language-named classes are
// not its own. (experiment's TestFindingsRegisterClasses: a world's
// register carries the classes its world.json declares.)
func TestWorldDeclaredClasses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	declared := []string{"SPEC_GAP", "PY_REFERENCE_DEFECT"}
	reg := OpenRegister(dir)
	reg.Classes = declared
	pairs := pairsWithFindings(t)
	recs, err := reg.Open("brun-x", srel0, pairs)
	if err != nil || len(recs) != 2 {
		t.Fatalf("%v %v", recs, err)
	}
	if _, err := reg.Classify(recs[0].ID, "JS_CHECKER_DEFECT", "a reference-protocol class"); !errors.Is(err, errClass) {
		t.Errorf("a class the world does not declare: %v, want errClass", err)
	}
	if _, err := reg.Classify(recs[0].ID, "PY_REFERENCE_DEFECT", "the Python reference is wrong"); err != nil {
		t.Fatal(err)
	}
	// The register reads back under the world's classes, and not under the
	// reference protocol's (where PY_REFERENCE_DEFECT is no class).
	if fs, err := reg.Findings(); err != nil || fs[0].Class != "PY_REFERENCE_DEFECT" {
		t.Errorf("%+v %v", fs, err)
	}
	if _, err := OpenRegister(dir).Findings(); !errors.Is(err, errLog) {
		t.Errorf("read under the reference classes: %v, want errLog", err)
	}
	q := Question{FrozenSpecRevision: 1, Question: "q", WhyInsufficient: "w", Ruling: "r", Classification: "PY_REFERENCE_DEFECT"}
	if _, err := AskQuestion(dir, q); !errors.Is(err, errClass) {
		t.Errorf("question under the reference classes: %v, want errClass", err)
	}
	q.Classes = declared
	if _, err := AskQuestion(dir, q); err != nil {
		t.Errorf("question under the world's classes: %v", err)
	}
}
