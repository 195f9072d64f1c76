package holdout

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// The expected rows of these tests were computed by an independent
// re-statement of TRVM-FORMATS §7 in node (path resolution with `k in cur`,
// the stable encoding, the eight operators, the interop walk), never by
// this package: one row per predicate, "id<TAB>op<TAB>path<TAB>pass" with
// pass true, false or null (UNRESOLVED).

const trvmSrel = "srel-4844df97e124474e30f100cbe9f8422a99213ac9288f8fcc149086a9a434c952"

func resultRows(r *Report) []string {
	rows := make([]string, len(r.Results))
	for i, res := range r.Results {
		pass := "null"
		if res.Pass != nil {
			pass = fmt.Sprint(*res.Pass)
		}
		rows[i] = res.ID + "\t" + res.Op + "\t" + res.Path + "\t" + pass
	}
	return rows
}

func readDoc(t *testing.T, b []byte) any {
	t.Helper()
	v, err := evidence.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// §8.3, predicate by predicate: the result path of each operator (p.path,
// "<left> < <right>", "refusal_set") and its value.
func TestConformanceSyntheticPerPredicate(t *testing.T) {
	t.Parallel()
	exp := trvmExperiment(t)
	s, err := LoadSchemas(exp)
	if err != nil {
		t.Fatal(err)
	}
	chb, err := os.ReadFile(filepath.Join(exp, "fixtures", FixtureChallenges))
	if err != nil {
		t.Fatal(err)
	}
	chs, err := ParseChallenges(chb, FixtureChallenges)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := os.ReadFile(filepath.Join(exp, "fixtures", FixtureObservations))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Score(s, chs, readDoc(t, ob), Options{})
	if err != nil {
		t.Fatal(err)
	}
	const lt = "candidate.D.structure.unique_artifacts < candidate.D.structure.edges"
	want := []string{
		"S1\tHOLDS\tD.nested_claim_sem_id\ttrue",
		"S1\tMOVES\tD.artifact_root\ttrue",
		"S1\tEQ\tcandidate.D.structure.edges\ttrue",
		"S1\tNEQ\tcandidate.D.artifact_root\ttrue",
		"S1\tVERDICT_EQ\tD.verdict\ttrue",
		"S1\tOUTCOME_EQ\tresolve.outcome\ttrue",
		"S1\tREFUSAL_SET_EQ\trefusal_set\ttrue",
		"S1\tLT\t" + lt + "\ttrue",
		"S2\tHOLDS\tD.nested_claim_sem_id\tfalse",
		"S2\tMOVES\tD.artifact_root\tfalse",
		"S2\tEQ\tcandidate.D.structure.edges\tfalse",
		"S2\tNEQ\tcandidate.D.artifact_root\tfalse",
		"S2\tVERDICT_EQ\tD.verdict\tfalse",
		"S2\tOUTCOME_EQ\tresolve.outcome\tfalse",
		"S2\tREFUSAL_SET_EQ\trefusal_set\tfalse",
		"S2\tLT\t" + lt + "\tfalse",
		"S3\tEQ\tcandidate.D.structure.edges\tnull",
		"S3\tLT\t" + lt + "\tnull",
		"S3\tREFUSAL_SET_EQ\trefusal_set\tnull",
	}
	if got := resultRows(rep); !slices.Equal(got, want) {
		t.Errorf("results:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rep.Implementation != "synthetic-fixture" || rep.SpecReleaseID != "srel-"+strings.Repeat("0", 64) || rep.Verdict() != "FAIL" {
		t.Errorf("report %s / %s / %s", rep.Implementation, rep.SpecReleaseID, rep.Verdict())
	}
	// §8.3's interop check, with the quoted values: the first 40 code
	// units of each side's stable encoding.
	twin := readDoc(t, ob)
	if err := Mutate(twin, "observations.S1.candidate.D.artifact_root", "root-"+strings.Repeat("b", 64), false); err != nil {
		t.Fatal(err)
	}
	fs := Compare(readDoc(t, ob), twin)
	wantF := Finding{Path: "S1.candidate.D.artifact_root", A: `"root-cccccccccccccccccccccccccccccccccc`,
		B: `"root-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb`, Classification: "UNCLASSIFIED_FINDING"}
	if len(fs) != 1 || fs[0].JSON().Len() != 4 || fs[0].Path != wantF.Path || fs[0].A != wantF.A || fs[0].B != wantF.B || fs[0].Classification != wantF.Classification {
		t.Errorf("findings %+v, want one %+v", fs, wantF)
	}
}

// Real holdout: the ten committed challenges, the public CAS artifacts.
const (
	rootC1 = "root-377d77c33137bdeb7ccd366b14ec13d6eead55e662524d5f8e2ee92de9895af4"
	rootC2 = "root-7c7b4ca5e888ba076411a1e317a21264b856226986b718da02c0e77ca33baaed"
	rootD  = "root-87e01d35c37ee7f98c5a190a06140687252965f6ce93249f06b46e517fb22562"
	rootA  = "root-b5b33778522764c7af9f30b22f3d7e1e3900064a6d2c0ab99d8b6d5aba39b65b"
)

// honestJSObservation builds, from the public CAS artifacts, an
// observation document of the shape TRVM-FORMATS §10 says
// js_holdout_adapter.mjs emits, with the outcomes §10 lists for the ten
// committed challenges (values that move are synthetic hex). It is built
// with encoding/json and maps, never with this package.
func honestJSObservation(t *testing.T, pkg string) map[string]any {
	t.Helper()
	art := func(root string) map[string]any {
		b, err := os.ReadFile(filepath.Join(pkg, "vectors", "public", "cas", root+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	node := func(root string) map[string]any {
		a := art(root)
		return map[string]any{"artifact_root": root, "nested_claim_sem_id": a["claim"].(map[string]any)["nested_claim_sem_id"], "structure": a["structure"]}
	}
	with := func(n map[string]any, kv ...string) map[string]any {
		out := map[string]any{}
		for k, v := range n {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	hex := func(c string) string { return strings.Repeat(c, 64) }
	op0 := art(rootC1)["references"].(map[string]any)["operands"].([]any)[0].(map[string]any)
	leafClaim := op0["verified_claim_sem_id"]
	baseline := map[string]any{"C1": node(rootC1), "C2": node(rootC2), "D": node(rootD),
		"leaf": map[string]any{"artifact_root": rootA, "verified_claim_sem_id": leafClaim}}
	obs := func(fixture string, refusals []string, cand map[string]any) map[string]any {
		return map[string]any{"baseline": baseline, "fixture_root": fixture, "refusal_set": refusals, "candidate": cand}
	}
	none := []string{}
	o := map[string]any{
		"H1": obs(rootA, none, map[string]any{
			"C1": with(node(rootC1), "artifact_root", "root-"+hex("1")), "C2": with(node(rootC2), "artifact_root", "root-"+hex("2")),
			"D":    with(node(rootD), "artifact_root", "root-"+hex("3"), "verdict", "VERIFIED"),
			"leaf": map[string]any{"artifact_root": "root-" + hex("4"), "verified_claim_sem_id": leafClaim}}),
		"H2": obs(rootD, none, map[string]any{"D": with(node(rootD), "artifact_root", "root-"+hex("5"), "verdict", "VERIFIED")}),
		"H3": obs(rootD, none, map[string]any{"D": with(node(rootD), "artifact_root", "root-"+hex("6"), "nested_claim_sem_id", "nclaim-"+hex("7"), "verdict", "VERIFIED")}),
		"H4": obs(rootC1, none, map[string]any{"C1": with(node(rootC1), "verdict", "VERIFIED")}),
		"H5": obs(rootC2, none, map[string]any{"C2": with(node(rootC2), "verdict", "VERIFIED")}),
		"H6": obs(rootD, []string{"nest-vocabulary-unknown"}, map[string]any{"D": with(node(rootD), "artifact_root", "root-"+hex("8"), "nested_claim_sem_id", "nclaim-"+hex("9"), "verdict", "REFUSED")}),
		"H7": obs(rootC1, none, map[string]any{"C1": with(node(rootC1), "verdict", "VERIFIED")}),
		"H8": obs(rootD, []string{"nest-policy-weakened"}, map[string]any{"D": with(node(rootD), "verdict", "REFUSED")}),
		"H9": obs(rootD, none, map[string]any{"D": with(node(rootD), "artifact_root", "root-"+hex("a"), "verdict", "VERIFIED")}),
		"H10": obs(rootD, []string{"nest-certificate-stale", "nest-citation-cross-wired", "nest-structure-mismatch"},
			map[string]any{"D": with(node(rootD), "artifact_root", "root-"+hex("b"), "nested_claim_sem_id", "nclaim-"+hex("c"), "verdict", "REFUSED")}),
	}
	o["H7"].(map[string]any)["resolve"] = map[string]any{"outcome": "non-canonical-wire"}
	return map[string]any{"type": "TRVM-HOLDOUT-OBSERVATION-v1", "implementation": "javascript", "spec_release_id": trvmSrel, "observations": o}
}

func docValue(t *testing.T, m map[string]any) any {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return readDoc(t, b)
}

// The §10 outcomes of the committed challenges, scored as the reference
// scores them: all 25 predicates satisfied, the result path of each as
// listed; then the rules that make a document fail or be refused.
func TestConformanceRealHoldoutScores(t *testing.T) {
	t.Parallel()
	w := testshared.World(t, "world")
	pkg := filepath.Join(w, "docs", "spec", "proof-wire")
	s, err := LoadPackageSchemas(pkg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := LoadCommitted(pkg, filepath.Join(w, "governance", "holdout"),
		&Committed{Commitment: trvmCommitment, Entries: 10}, s)
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{ExpectRelease: trvmSrel, ExpectImplementation: "javascript"}
	honest := honestJSObservation(t, pkg)
	rep, err := Score(s, h.Challenges, docValue(t, honest), opt)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"H1\tHOLDS\tleaf.verified_claim_sem_id\ttrue",
		"H1\tMOVES\tleaf.artifact_root\ttrue",
		"H1\tHOLDS\tD.nested_claim_sem_id\ttrue",
		"H1\tMOVES\tD.artifact_root\ttrue",
		"H1\tVERDICT_EQ\tD.verdict\ttrue",
		"H2\tHOLDS\tD.nested_claim_sem_id\ttrue",
		"H2\tVERDICT_EQ\tD.verdict\ttrue",
		"H3\tMOVES\tD.nested_claim_sem_id\ttrue",
		"H3\tVERDICT_EQ\tD.verdict\ttrue",
		"H4\tVERDICT_EQ\tC1.verdict\ttrue",
		"H5\tVERDICT_EQ\tC2.verdict\ttrue",
		"H5\tEQ\tcandidate.C2.structure.edges\ttrue",
		"H5\tEQ\tcandidate.C2.structure.unique_artifacts\ttrue",
		"H5\tEQ\tcandidate.C2.structure.max_depth_below\ttrue",
		"H5\tEQ\tcandidate.C2.structure.films_below_by_edge_multiplicity\ttrue",
		"H5\tEQ\tcandidate.C2.structure.films_below_distinct\ttrue",
		"H5\tEQ\tcandidate.C2.structure.cases_below_by_edge_multiplicity\ttrue",
		"H5\tEQ\tcandidate.C2.structure.cases_below_distinct\ttrue",
		"H6\tREFUSAL_SET_EQ\trefusal_set\ttrue",
		"H7\tOUTCOME_EQ\tresolve.outcome\ttrue",
		"H8\tREFUSAL_SET_EQ\trefusal_set\ttrue",
		"H9\tHOLDS\tD.nested_claim_sem_id\ttrue",
		"H9\tMOVES\tD.artifact_root\ttrue",
		"H9\tVERDICT_EQ\tD.verdict\ttrue",
		"H10\tREFUSAL_SET_EQ\trefusal_set\ttrue",
	}
	if got := resultRows(rep); !slices.Equal(got, want) {
		t.Errorf("results:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if rep.Total != 25 || rep.Pass != 25 || len(rep.Missing) != 0 || rep.Verdict() != "PASS" {
		t.Errorf("totals %d = %d/%d/%d missing %v", rep.Total, rep.Pass, rep.Fail, rep.Unresolved, rep.Missing)
	}

	obsOf := func(m map[string]any, id string) map[string]any {
		return m["observations"].(map[string]any)[id].(map[string]any)
	}
	fresh := func() map[string]any { return honestJSObservation(t, pkg) }
	t.Run("H10 with one extra code fails (set equality, never includes)", func(t *testing.T) {
		m := fresh()
		obsOf(m, "H10")["refusal_set"] = []string{"nest-certificate-stale", "nest-citation-cross-wired", "nest-extra", "nest-structure-mismatch"}
		rep, err := Score(s, h.Challenges, docValue(t, m), opt)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Pass != 24 || rep.Fail != 1 || rep.Results[24].Pass == nil || *rep.Results[24].Pass {
			t.Errorf("%d/%d/%d, H10 %+v", rep.Pass, rep.Fail, rep.Unresolved, rep.Results[24])
		}
	})
	t.Run("H7 without a resolve member is unresolved", func(t *testing.T) {
		m := fresh()
		delete(obsOf(m, "H7"), "resolve")
		rep, err := Score(s, h.Challenges, docValue(t, m), opt)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Unresolved != 1 || rep.Results[19].Pass != nil || rep.Verdict() != "FAIL" {
			t.Errorf("%d/%d/%d, H7 %+v", rep.Pass, rep.Fail, rep.Unresolved, rep.Results[19])
		}
	})
	t.Run("H4 not observed is missing, not refused", func(t *testing.T) {
		m := fresh()
		delete(m["observations"].(map[string]any), "H4")
		rep, err := Score(s, h.Challenges, docValue(t, m), opt)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(rep.Missing, []string{"H4"}) || rep.Total != 24 || rep.Verdict() != "FAIL" {
			t.Errorf("missing %v, total %d", rep.Missing, rep.Total)
		}
	})
	for _, tc := range []struct {
		name string
		edit func(m map[string]any)
		opt  Options
		rule error
	}{
		{"H1 resolved by its convenience label's node, not its root", func(m map[string]any) { obsOf(m, "H1")["fixture_root"] = rootD }, opt, errFixtureRoot},
		{"another implementation's label", func(m map[string]any) {}, Options{ExpectRelease: trvmSrel, ExpectImplementation: "go"}, errImplementation},
		{"another release", func(m map[string]any) { m["spec_release_id"] = "srel-" + strings.Repeat("f", 64) }, opt, errRelease},
		{"a member outside the node schema", func(m map[string]any) {
			obsOf(m, "H4")["candidate"].(map[string]any)["C1"].(map[string]any)["blame"] = "none"
		}, opt, errObservationSchema},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := fresh()
			tc.edit(m)
			_, err := Score(s, h.Challenges, docValue(t, m), tc.opt)
			var re *RefusedError
			if !errors.As(err, &re) || !errors.Is(err, tc.rule) {
				t.Errorf("err = %v, want a refusal for %v", err, tc.rule)
			}
		})
	}

	// Interop between the honest document and a candidate's that differs
	// in four ways: a missing challenge, a missing member, a reordered
	// array (arrays are leaves) and one number; the implementation label
	// is not compared.
	other := fresh()
	other["implementation"] = "candidate"
	delete(other["observations"].(map[string]any), "H4")
	delete(obsOf(other, "H7"), "resolve")
	obsOf(other, "H10")["refusal_set"] = []string{"nest-structure-mismatch", "nest-citation-cross-wired", "nest-certificate-stale"}
	obsOf(other, "H5")["candidate"].(map[string]any)["C2"].(map[string]any)["structure"].(map[string]any)["edges"] = 5
	io, err := CompareAll([]Document{{"javascript", docValue(t, honest)}, {"candidate", docValue(t, other)}})
	if err != nil {
		t.Fatal(err)
	}
	wantF := [][3]string{
		{"H10.refusal_set", `["nest-certificate-stale","nest-citation`, `["nest-structure-mismatch","nest-citatio`},
		{"H4", `{"baseline":{"C1":{"artifact_root":"root`, "ABSENT"},
		{"H5.candidate.C2.structure.edges", "4", "5"},
		{"H7.resolve", `{"outcome":"non-canonical-wire"}`, "ABSENT"},
	}
	if !io.Measured || len(io.Pairs) != 1 || io.Findings != len(wantF) || io.Verdict() != "UNCLASSIFIED_FINDING" {
		t.Fatalf("interop %+v", io)
	}
	for i, f := range io.Pairs[0].Findings {
		if i >= len(wantF) || f.Path != wantF[i][0] || f.A != wantF[i][1] || f.B != wantF[i][2] || f.Classification != "UNCLASSIFIED_FINDING" {
			t.Errorf("finding %d = %+v, want %q", i, f, wantF[min(i, len(wantF)-1)])
		}
	}
}
