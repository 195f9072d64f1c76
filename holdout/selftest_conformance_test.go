package holdout

import (
	"errors"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

func trvmExperiment(t *testing.T) string {
	return testshared.Path(t, "trvm", "world", "docs", "spec", "proof-wire", "experiment")
}

// The reference package's synthetic fixture: S1 8 pass, S2 8 fail, S3 3
// unresolved, N1–N16 refused each for its own rule, and the two interop
// checks.
func TestConformanceFixtureSelfTest(t *testing.T) {
	t.Parallel()
	r, err := SelfTest(trvmExperiment(t))
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("self-test problems: %v", r.Problems)
	}
	want := map[string]Counts{"S1": {8, 0, 0}, "S2": {0, 8, 0}, "S3": {0, 0, 3}}
	got := r.Report.ByChallenge()
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s = %+v, want %+v", id, got[id], w)
		}
	}
	if r.Report.Total != 19 || r.Report.Pass != 8 || r.Report.Fail != 8 || r.Report.Unresolved != 3 || len(r.Report.Missing) != 0 {
		t.Errorf("totals %d = %d/%d/%d missing %v, want 19 = 8/8/3, none missing", r.Report.Total, r.Report.Pass, r.Report.Fail, r.Report.Unresolved, r.Report.Missing)
	}
	if len(r.Operators) != 8 {
		t.Errorf("operators evaluated %v, want all eight", r.Operators)
	}
	rules := map[string]error{
		"N1": errObservationSchema, "N2": errObservationSchema, "N3": errObservationSchema,
		"N4": errObservationSchema, "N5": errObservationSchema, "N6": errObservationSchema,
		"N7": errObservationSchema, "N8": errFixtureRoot, "N9": errObservationSchema,
		"N10": errRelease, "N11": errObservationSchema, "N12": errObservationSchema,
		"N13": errObservationSchema, "N14": errChallengeSchema, "N15": errChallengeSchema,
		"N16": errChallengeSchema,
	}
	if len(r.Negatives) != 16 {
		t.Fatalf("%d negatives, want 16", len(r.Negatives))
	}
	for _, n := range r.Negatives {
		if !n.Refused {
			t.Errorf("%s not refused", n.ID)
			continue
		}
		if !errors.Is(n.Err, rules[n.ID]) {
			t.Errorf("%s refused as %v, want rule %v", n.ID, n.Err, rules[n.ID])
		}
	}
	if len(r.TwinFindings) != 0 {
		t.Errorf("twin findings %v", r.TwinFindings)
	}
	if len(r.MutationFindings) != 1 || r.MutationFindings[0].Path != "S1.candidate.D.artifact_root" {
		t.Errorf("mutation findings %v", r.MutationFindings)
	}
}
