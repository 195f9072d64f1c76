package experiment

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// tableReplay stands in for the frozen scorer (replayRun): it reads each
// archived document through the strict reader and returns the totals a
// table says the scorer derives for it. These tests are about what
// Complete and Verify do with the scorer's answer; the scorer itself is
// the holdout package's, and adapter's and worldinit's tests complete and
// verify real runs with it.
func tableReplay(derived map[string]Predicates, findings int) replayFunc {
	return func(_ context.Context, in replayInput) (*replayOutcome, error) {
		out := &replayOutcome{Subjects: map[string]replayedSubject{}, Findings: findings}
		for impl, b := range in.Observations {
			if _, err := evidence.Read(b); err != nil {
				out.Subjects[impl] = replayedSubject{Refused: err.Error()}
				continue
			}
			out.Subjects[impl] = replayedSubject{Predicates: derived[impl]}
		}
		return out, nil
	}
}

var full = Predicates{Total: 20, Satisfied: 20}

func honestMeasurement() Measurement {
	return Measurement{Pairs: 1, Subjects: []SubjectMeasurement{
		{Implementation: "javascript", Observation: []byte(`{"implementation": "javascript", "observations": {}}` + "\n"), Predicates: full},
		{Implementation: "candidate", Observation: []byte(`{"implementation": "candidate", "observations": {}}` + "\n"), Predicates: full},
	}}
}

// measuredNow binds m to the run the world's record is at, as a
// measurement taken of that record is.
func measuredNow(t *testing.T, w *World, m Measurement) Measurement {
	t.Helper()
	r, err := w.ReadRecord()
	if err != nil {
		t.Fatal(err)
	}
	m.RunID = r.RunID
	return m
}

var honestReplay = tableReplay(map[string]Predicates{"javascript": full, "candidate": full}, 0)

func completed(t *testing.T) (*World, *Transition) {
	t.Helper()
	w := newWorld(t)
	mustPin(t, w)
	mustFreeze(t, w)
	mustReveal(t, w)
	tr, res, err := Complete(bg, w, measuredNow(t, w, honestMeasurement()), CompleteOptions{replay: honestReplay})
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	if res.RunID != tr.RunID || len(res.Subjects) != 2 || res.Interop.Pairs != 1 {
		t.Fatalf("RESULT %+v", res)
	}
	return w, tr
}

func TestCompleteHonest(t *testing.T) {
	t.Parallel()
	w, tr := completed(t)
	rep := mustVerify(t, w, VerifyOptions{replay: honestReplay})
	if rep.Status != StatusComplete || len(rep.Chain) != 4 {
		t.Errorf("status %s, %d links", rep.Status, len(rep.Chain))
	}
	b, err := os.ReadFile(filepath.Join(w.ReceiptsDir(), ResultFile(tr.RunID)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := ParseResult(b, "RESULT")
	if err != nil {
		t.Fatal(err)
	}
	if res.PreviousRunID != tr.PreviousRunID || res.Subjects[0].Implementation != "javascript" {
		t.Errorf("RESULT %+v", res)
	}
	// Verify's own replay is the frozen scorer (replayRun), not the table:
	// it refuses the observations the table made up, so the RESULT does
	// not verify.
	rep, _ = Verify(bg, w, VerifyOptions{})
	if err := rep.Err(); !errors.Is(err, errResult) || !strings.Contains(err.Error(), "refused: observation document") {
		t.Errorf("verify with the frozen scorer: %v, want %q naming the refused observation", err, errResult)
	}
	// A terminal run cannot move.
	if _, err := Abort(bg, w, "late", TransitionOptions{}); !errors.Is(err, errIllegalTransition) {
		t.Errorf("abort after COMPLETE: %v", err)
	}
}

func TestCompleteRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		m      func() Measurement
		replay replayFunc
		rule   error
	}{
		{"I outstanding finding", func() Measurement { m := honestMeasurement(); m.Findings = 1; return m }, honestReplay, errResult},
		{"replay derives other totals", honestMeasurement,
			tableReplay(map[string]Predicates{"javascript": full, "candidate": {Total: 20, Satisfied: 19, Unsatisfied: 1}}, 0), errResult},
		{"replay finds a disagreement", honestMeasurement, tableReplay(map[string]Predicates{"javascript": full, "candidate": full}, 2), errResult},
		{"a frozen subject not measured", func() Measurement { m := honestMeasurement(); m.Subjects = m.Subjects[:1]; return m }, honestReplay, errResult},
		{"a subject never frozen", func() Measurement {
			m := honestMeasurement()
			m.Subjects = append(m.Subjects, SubjectMeasurement{Implementation: "stranger", Observation: []byte("{}")})
			return m
		}, honestReplay, errResult},
		{"AA4 observation with two readings", func() Measurement {
			m := honestMeasurement()
			m.Subjects[1].Observation = []byte(`{"implementation": "evil", "implementation": "candidate"}`)
			return m
		}, honestReplay, evidence.ClassDuplicateName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			mustPin(t, w)
			mustFreeze(t, w)
			mustReveal(t, w)
			before := stateSnapshot(t, w)
			_, _, err := Complete(bg, w, measuredNow(t, w, tc.m()), CompleteOptions{replay: tc.replay})
			if !errors.Is(err, tc.rule) {
				t.Fatalf("err = %v, want %q", err, tc.rule)
			}
			sameStateSnapshot(t, before, stateSnapshot(t, w))
			mustVerify(t, w, VerifyOptions{})
		})
	}
}

// T, U, V, Z, AA3: evidence of a completed run lost or tampered with after
// the fact; every one fails verification by name.
func TestCompletedEvidenceTampering(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, w *World, tr *Transition)
		rule   error
	}{
		{"T RESULT deleted", func(t *testing.T, w *World, tr *Transition) {
			os.Remove(filepath.Join(w.ReceiptsDir(), ResultFile(tr.RunID)))
		}, errResultMissing},
		{"T RESULT truncated", func(t *testing.T, w *World, tr *Transition) {
			p := filepath.Join(w.ReceiptsDir(), ResultFile(tr.RunID))
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
				t.Fatal(err)
			}
		}, errResult},
		{"T archived observation edited", func(t *testing.T, w *World, tr *Transition) {
			writeWorldFile(t, w, "governance/receipts/"+ObservationFile(tr.RunID, "candidate"), `{"implementation": "candidate", "observations": {"x": 1}}`, 0o644)
		}, errResult},
		{"T archived observation deleted", func(t *testing.T, w *World, tr *Transition) {
			os.Remove(filepath.Join(w.ReceiptsDir(), filepath.FromSlash(ObservationFile(tr.RunID, "javascript"))))
		}, errResult},
		{"T extra archived document", func(t *testing.T, w *World, tr *Transition) {
			writeWorldFile(t, w, "governance/receipts/"+ObservationFile(tr.RunID, "ghost"), "{}", 0o644)
		}, errResult},
		{"U predicate numbers edited in the RESULT", func(t *testing.T, w *World, tr *Transition) {
			p := filepath.Join(w.ReceiptsDir(), ResultFile(tr.RunID))
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"total": 20`, `"total": 25`, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, errResult},
		{"AA3 duplicate member in the RESULT", func(t *testing.T, w *World, tr *Transition) {
			p := filepath.Join(w.ReceiptsDir(), ResultFile(tr.RunID))
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"interop": {`, `"interop": {"findings": 3,`, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, evidence.ClassDuplicateName},
		{"Z role swapped in the RESULT", func(t *testing.T, w *World, tr *Transition) {
			p := filepath.Join(w.ReceiptsDir(), ResultFile(tr.RunID))
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"role": "reference"`, `"role": "candidate"`, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, errResult},
		{"Z bogus subject row before the genuine one", func(t *testing.T, w *World, tr *Transition) {
			p := filepath.Join(w.ReceiptsDir(), ResultFile(tr.RunID))
			b, _ := os.ReadFile(p)
			bogus := `{"implementation": "javascript", "role": "candidate", "package_digest": "0", "binary_digest": null, "observation_sha256": "0", "predicates": {"total": 999, "satisfied": 999, "unsatisfied": 0, "unresolved": 0}},`
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"subjects": [`, `"subjects": [`+bogus, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, errDuplicateLabel},
		{"Z duplicate adapter in the COMPLETE receipt", func(t *testing.T, w *World, tr *Transition) {
			p := filepath.Join(w.ReceiptsDir(), ReceiptFile(tr.RunID, StatusComplete))
			b, _ := os.ReadFile(p)
			bogus := `{"implementation": "candidate", "role": "reference", "package_digest": "0", "binary_digest": null, "environment": null},`
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"adapters": [`, `"adapters": [`+bogus, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, errDuplicateLabel},
		{"the COMPLETE receipt deleted", func(t *testing.T, w *World, tr *Transition) {
			os.Remove(filepath.Join(w.ReceiptsDir(), ReceiptFile(tr.RunID, StatusComplete)))
		}, errReceiptMissing},
		{"holdout edited after completion", func(t *testing.T, w *World, tr *Transition) {
			p := filepath.Join(w.HoldoutDir(), "INDEX.json")
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, append(b, ' '), 0o644); err != nil {
				t.Fatal(err)
			}
		}, errHoldoutCommitment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, tr := completed(t)
			tc.tamper(t, w, tr)
			rep, err := Verify(bg, w, VerifyOptions{replay: honestReplay})
			if err != nil {
				t.Fatal(err)
			}
			if !errors.Is(rep.Err(), tc.rule) {
				t.Fatalf("verify: %v\nwant %q", rep.Err(), tc.rule)
			}
		})
	}
}
