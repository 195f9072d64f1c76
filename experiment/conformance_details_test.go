package experiment

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// frozenRecord is a world with a run at CANDIDATE_FROZEN (two subjects) and
// the record's bytes.
func frozenRecord(t *testing.T) (*World, []byte) {
	t.Helper()
	w := newWorld(t)
	mustPin(t, w)
	mustFreeze(t, w)
	b, err := os.ReadFile(w.RecordPath())
	if err != nil {
		t.Fatal(err)
	}
	return w, b
}

// A record whose adapters array is reordered is the same run (run_id sorts
// the adapters by label): its receipts still witness it, as the reference
// accepts them.
func TestReorderedAdaptersVerify(t *testing.T) {
	t.Parallel()
	w, b := frozenRecord(t)
	r, err := ParseRecord(b, "blind-run.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Adapters) != 2 {
		t.Fatalf("%d adapters", len(r.Adapters))
	}
	slices.Reverse(r.Adapters)
	nb, err := r.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	// The edit is a reordering and nothing else: the reference-order
	// first label now comes second, and run_id (written, not recomputed,
	// by Bytes) is the one the receipts name.
	if strings.Index(string(nb), `"candidate"`) > strings.Index(string(nb), `"javascript"`) {
		t.Fatal("the adapters were not reordered")
	}
	if err := os.WriteFile(w.RecordPath(), nb, 0o644); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, w, VerifyOptions{})
	if rep.RunID != r.RunID {
		t.Errorf("verified %s, the record names %s", rep.RunID, r.RunID)
	}
	// The reordered run moves on: the reveal checks the chain too.
	mustReveal(t, w)
}

// environment {null, null, null} has one reading (no environment) and the
// same run_id as null; an environment with some members null is refused by
// rule.
func TestEnvironmentNulls(t *testing.T) {
	t.Parallel()
	w, b := frozenRecord(t)
	const refEnv = `"role": "reference",`
	if !strings.Contains(string(b), `"environment": null`) || !strings.Contains(string(b), refEnv) {
		t.Fatalf("the reference's environment is not null in\n%s", b)
	}
	// The reference adapter is written first; its environment is the
	// first "environment": null.
	allNull := strings.Replace(string(b), `"environment": null`, `"environment": {"toolchain": null, "model": null, "tool_version": null}`, 1)
	if err := os.WriteFile(w.RecordPath(), []byte(allNull), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := w.ReadRecord()
	if err != nil {
		t.Fatalf("all-null environment refused: %v", err)
	}
	if a, _ := r.Adapter("javascript"); a.Environment != nil {
		t.Errorf("all-null environment read as %+v, want none", a.Environment)
	}
	mustVerify(t, w, VerifyOptions{}) // run_id recomputes, the chain holds

	partial := strings.Replace(string(b), `"environment": null`, `"environment": {"toolchain": "node", "model": null, "tool_version": "1"}`, 1)
	if err := os.WriteFile(w.RecordPath(), []byte(partial), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ReadRecord(); !errors.Is(err, errRunShape) || !strings.Contains(err.Error(), "null") {
		t.Errorf("partly null environment: %v, want %q", err, errRunShape)
	}
}
