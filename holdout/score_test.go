package holdout

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

func obj(t testing.TB, s string) *evidence.Object {
	t.Helper()
	o, err := evidence.ReadObject([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return o
}

// Every operator's satisfied, falsified and unresolved arm.
func TestEvaluateOperators(t *testing.T) {
	t.Parallel()
	const obs = `{
	 "baseline": {"D": {"r": "root-1", "n": "same", "s": {"b": 2, "a": 1}}},
	 "candidate": {"D": {"r": "root-2", "n": "same", "s": {"a": 1, "b": 2}, "v": "VERIFIED", "k": 4, "big": 10, "str": "9"}},
	 "refusal_set": ["b-code", "a-code"],
	 "resolve": {"outcome": "ok"},
	 "list": [{"x": 1}]
	}`
	const noRefusals = `{"baseline": {}, "candidate": {}}`
	const refusalString = `{"refusal_set": "a-code"}`
	cases := []struct {
		name, pred, obs, want string
	}{
		{"HOLDS pass", `{"op":"HOLDS","path":"D.n"}`, obs, "PASS"},
		{"HOLDS pass member order ignored", `{"op":"HOLDS","path":"D.s"}`, obs, "PASS"},
		{"HOLDS fail", `{"op":"HOLDS","path":"D.r"}`, obs, "FAIL"},
		{"HOLDS unresolved one side", `{"op":"HOLDS","path":"D.v"}`, obs, "UNRESOLVED"},
		{"HOLDS no fallback to the root", `{"op":"HOLDS","path":"resolve.outcome"}`, obs, "UNRESOLVED"},
		{"MOVES pass", `{"op":"MOVES","path":"D.r"}`, obs, "PASS"},
		{"MOVES fail", `{"op":"MOVES","path":"D.n"}`, obs, "FAIL"},
		{"MOVES unresolved", `{"op":"MOVES","path":"D.missing"}`, obs, "UNRESOLVED"},
		{"EQ pass value", `{"op":"EQ","path":"candidate.D.k","value":4}`, obs, "PASS"},
		{"EQ pass 4.0 is 4", `{"op":"EQ","path":"candidate.D.k","value":4.0}`, obs, "PASS"},
		{"EQ fail number vs string", `{"op":"EQ","path":"candidate.D.k","value":"4"}`, obs, "FAIL"},
		{"EQ pass right path", `{"op":"EQ","path":"candidate.D.n","right":"baseline.D.n"}`, obs, "PASS"},
		{"EQ value wins over right", `{"op":"EQ","path":"candidate.D.k","value":4,"right":"candidate.D.big"}`, obs, "PASS"},
		{"EQ pass array index", `{"op":"EQ","path":"list.0.x","value":1}`, obs, "PASS"},
		{"EQ unresolved index out of range", `{"op":"EQ","path":"list.1.x","value":1}`, obs, "UNRESOLVED"},
		{"EQ unresolved non-canonical index", `{"op":"EQ","path":"list.00.x","value":1}`, obs, "UNRESOLVED"},
		{"EQ unresolved no root fallback", `{"op":"EQ","path":"D.k","value":4}`, obs, "UNRESOLVED"},
		{"EQ unresolved no right side", `{"op":"EQ","path":"candidate.D.k"}`, obs, "UNRESOLVED"},
		{"EQ unresolved through a scalar", `{"op":"EQ","path":"candidate.D.k.x","value":4}`, obs, "UNRESOLVED"},
		{"NEQ pass", `{"op":"NEQ","path":"candidate.D.r","right":"baseline.D.r"}`, obs, "PASS"},
		{"NEQ fail", `{"op":"NEQ","path":"candidate.D.n","right":"baseline.D.n"}`, obs, "FAIL"},
		{"NEQ unresolved", `{"op":"NEQ","path":"candidate.D.r","right":"baseline.D.zz"}`, obs, "UNRESOLVED"},
		{"VERDICT_EQ pass", `{"op":"VERDICT_EQ","path":"D.v","value":"VERIFIED"}`, obs, "PASS"},
		{"VERDICT_EQ fail", `{"op":"VERDICT_EQ","path":"D.v","value":"REFUSED"}`, obs, "FAIL"},
		{"VERDICT_EQ fail object never strictly equal", `{"op":"VERDICT_EQ","path":"D.s","value":{"a":1,"b":2}}`, obs, "FAIL"},
		{"VERDICT_EQ fail without value", `{"op":"VERDICT_EQ","path":"D.v"}`, obs, "FAIL"},
		{"VERDICT_EQ unresolved", `{"op":"VERDICT_EQ","path":"C1.v","value":"VERIFIED"}`, obs, "UNRESOLVED"},
		{"OUTCOME_EQ pass", `{"op":"OUTCOME_EQ","path":"resolve.outcome","value":"ok"}`, obs, "PASS"},
		{"OUTCOME_EQ fail", `{"op":"OUTCOME_EQ","path":"resolve.outcome","value":"non-canonical-wire"}`, obs, "FAIL"},
		{"OUTCOME_EQ unresolved", `{"op":"OUTCOME_EQ","path":"resolve.nothing","value":"ok"}`, obs, "UNRESOLVED"},
		{"REFUSAL_SET_EQ pass as sets", `{"op":"REFUSAL_SET_EQ","value":["a-code","b-code"]}`, obs, "PASS"},
		{"REFUSAL_SET_EQ fail subset is not equal", `{"op":"REFUSAL_SET_EQ","value":["a-code"]}`, obs, "FAIL"},
		{"REFUSAL_SET_EQ fail superset is not equal", `{"op":"REFUSAL_SET_EQ","value":["a-code","b-code","c-code"]}`, obs, "FAIL"},
		{"REFUSAL_SET_EQ unresolved absent", `{"op":"REFUSAL_SET_EQ","value":[]}`, noRefusals, "UNRESOLVED"},
		{"REFUSAL_SET_EQ unresolved not an array", `{"op":"REFUSAL_SET_EQ","value":["a-code"]}`, refusalString, "UNRESOLVED"},
		// An absent or null value is the empty set (the reference's reading).
		{"REFUSAL_SET_EQ absent value is the empty set, pass", `{"op":"REFUSAL_SET_EQ"}`, `{"refusal_set":[]}`, "PASS"},
		{"REFUSAL_SET_EQ null value is the empty set, pass", `{"op":"REFUSAL_SET_EQ","value":null}`, `{"refusal_set":[]}`, "PASS"},
		{"REFUSAL_SET_EQ absent value is the empty set, fail", `{"op":"REFUSAL_SET_EQ"}`, obs, "FAIL"},
		{"REFUSAL_SET_EQ null value is the empty set, fail", `{"op":"REFUSAL_SET_EQ","value":null}`, obs, "FAIL"},
		{"REFUSAL_SET_EQ absent value, absent set unresolved", `{"op":"REFUSAL_SET_EQ"}`, noRefusals, "UNRESOLVED"},
		{"REFUSAL_SET_EQ string value unresolved", `{"op":"REFUSAL_SET_EQ","value":"a-code"}`, `{"refusal_set":["a-code"]}`, "UNRESOLVED"},
		{"REFUSAL_SET_EQ object value unresolved", `{"op":"REFUSAL_SET_EQ","value":{}}`, `{"refusal_set":[]}`, "UNRESOLVED"},
		{"LT pass", `{"op":"LT","left":"candidate.D.k","right":"candidate.D.big"}`, obs, "PASS"},
		{"LT fail", `{"op":"LT","left":"candidate.D.big","right":"candidate.D.k"}`, obs, "FAIL"},
		{"LT fail equal", `{"op":"LT","left":"candidate.D.k","right":"candidate.D.k"}`, obs, "FAIL"},
		{"LT unresolved string", `{"op":"LT","left":"candidate.D.str","right":"candidate.D.big"}`, obs, "UNRESOLVED"},
		{"LT unresolved absent", `{"op":"LT","left":"candidate.D.none","right":"candidate.D.big"}`, obs, "UNRESOLVED"},
		{"unknown operator unresolved", `{"op":"TELEPORT","path":"D.n"}`, obs, "UNRESOLVED"},
		{"empty path unresolved", `{"op":"EQ","path":"","value":1}`, obs, "UNRESOLVED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Evaluate("X1", obj(t, c.pred), obj(t, c.obs))
			if r.Outcome() != c.want {
				t.Errorf("%s over %s = %s (%s), want %s", c.pred, c.name, r.Outcome(), r.Detail, c.want)
			}
		})
	}
}

func TestResultPath(t *testing.T) {
	t.Parallel()
	for pred, want := range map[string]string{
		`{"op":"EQ","path":"a.b","value":1}`:    "a.b",
		`{"op":"LT","left":"x","right":"y"}`:    "x < y",
		`{"op":"REFUSAL_SET_EQ","value":["a"]}`: "refusal_set",
	} {
		if got := Evaluate("X", obj(t, pred), obj(t, `{}`)).Path; got != want {
			t.Errorf("%s: path %q, want %q", pred, got, want)
		}
	}
}

// worldExperiment is the synthetic world's experiment directory (ours,
// always present).
func worldExperiment(t testing.TB) string {
	return filepath.Join(testshared.RepoRoot(t), "testdata", "world", "docs", "spec", "proof-wire", "experiment")
}

func loadFixture(t testing.TB) (*Schemas, []*Challenge, []byte) {
	t.Helper()
	dir := worldExperiment(t)
	s, err := LoadSchemas(dir)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := os.ReadFile(filepath.Join(dir, "fixtures", FixtureChallenges))
	if err != nil {
		t.Fatal(err)
	}
	chs, err := ParseChallenges(cb, FixtureChallenges)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := os.ReadFile(filepath.Join(dir, "fixtures", FixtureObservations))
	if err != nil {
		t.Fatal(err)
	}
	return s, chs, ob
}

// Every refusal rule, each on its own mutation of the honest document.
func TestScoreRefusals(t *testing.T) {
	t.Parallel()
	s, _, ob := loadFixture(t)
	root9 := "root-" + strings.Repeat("9", 64)
	cases := []struct {
		name string
		mut  func(d any, chs []*Challenge) []*Challenge
		opt  Options
		rule error
	}{
		{"envelope member", func(d any, c []*Challenge) []*Challenge { mustMutate(d, "extra", 1, false); return c }, Options{}, errObservationSchema},
		{"unsorted refusal set", func(d any, c []*Challenge) []*Challenge {
			mustMutate(d, "observations.S2.refusal_set", []any{"b", "a"}, false)
			return c
		}, Options{}, errObservationSchema},
		{"implementation label", func(d any, c []*Challenge) []*Challenge { return c }, Options{ExpectImplementation: "javascript"}, errImplementation},
		{"release", func(d any, c []*Challenge) []*Challenge { return c }, Options{ExpectRelease: "srel-" + strings.Repeat("1", 64)}, errRelease},
		{"fixture root", func(d any, c []*Challenge) []*Challenge {
			mustMutate(d, "observations.S1.fixture_root", root9, false)
			return c
		}, Options{}, errFixtureRoot},
		{"unknown recipe operator", func(d any, c []*Challenge) []*Challenge {
			mustMutate(c[0].Value, "recipe.0.op", "TELEPORT", false)
			return c
		}, Options{}, errChallengeSchema},
		{"unknown predicate operator", func(d any, c []*Challenge) []*Challenge {
			mustMutate(c[0].Value, "predicates.0.op", "INCLUDES", false)
			return c
		}, Options{}, errChallengeSchema},
		{"duplicate challenge id", func(d any, c []*Challenge) []*Challenge { return append(c, c[0]) }, Options{}, errDuplicateChallenge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc, err := evidence.Read(ob)
			if err != nil {
				t.Fatal(err)
			}
			_, chs, _ := loadFixture(t) // fresh, mutable copies
			chs = c.mut(doc, chs)
			rep, err := Score(s, chs, doc, c.opt)
			var re *RefusedError
			if !errors.As(err, &re) || !errors.Is(err, c.rule) {
				t.Fatalf("got report %v err %v, want a refusal for %v", rep, err, c.rule)
			}
			if rep != nil {
				t.Error("a refused document was scored")
			}
		})
	}
}

func TestScoreMissingAndVerdict(t *testing.T) {
	t.Parallel()
	s, chs, ob := loadFixture(t)
	doc, _ := evidence.Read(ob)
	o := doc.(*evidence.Object)
	obs, _ := o.Get("observations")
	obs.(*evidence.Object).Delete("S3")
	rep, err := Score(s, chs, doc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Missing) != 1 || rep.Missing[0] != "S3" || rep.Total != 16 {
		t.Errorf("missing %v total %d, want [S3] and 16", rep.Missing, rep.Total)
	}
	if rep.Verdict() != "FAIL" {
		t.Errorf("verdict %s with a missing challenge", rep.Verdict())
	}
	// Only S1 (all satisfied): PASS.
	rep, err = Score(s, chs[:1], doc, Options{})
	if err != nil || rep.Verdict() != "PASS" || rep.Pass != 8 {
		t.Errorf("S1 alone: %v %v", rep, err)
	}
}

func TestReportJSONShape(t *testing.T) {
	t.Parallel()
	s, chs, ob := loadFixture(t)
	doc, _ := evidence.Read(ob)
	rep, err := Score(s, chs, doc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := rep.JSON()
	want := []string{"results", "missing", "total", "pass", "fail", "unresolved", "implementation", "spec_release_id"}
	if strings.Join(j.Names(), ",") != strings.Join(want, ",") {
		t.Errorf("members %v, want %v", j.Names(), want)
	}
	rs, _ := j.Get("results")
	first := rs.([]any)[0].(*evidence.Object)
	if strings.Join(first.Names(), ",") != "id,op,path,pass,detail" {
		t.Errorf("result members %v", first.Names())
	}
	// UNRESOLVED is null, never false.
	last := rs.([]any)[len(rs.([]any))-1].(*evidence.Object)
	if p, _ := last.Get("pass"); p != nil {
		t.Errorf("S3's last result pass = %v, want null", p)
	}
}

// Our own world's fixture gives the same counts as the reference's.
func TestWorldFixtureSelfTest(t *testing.T) {
	t.Parallel()
	r, err := SelfTest(worldExperiment(t))
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("problems: %v", r.Problems)
	}
	if r.Report.Pass != 8 || r.Report.Fail != 8 || r.Report.Unresolved != 3 || len(r.Negatives) != 16 {
		t.Errorf("%d/%d/%d, %d negatives", r.Report.Pass, r.Report.Fail, r.Report.Unresolved, len(r.Negatives))
	}
}

// A scorer that stops evaluating (here: expected counts that no longer
// match) fails the self-test instead of passing quietly.
func TestSelfTestDetectsDisagreement(t *testing.T) {
	t.Parallel()
	src := worldExperiment(t)
	dir := filepath.Join(t.TempDir(), "experiment")
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "fixtures", FixtureExpected)
	b, _ := os.ReadFile(p)
	b = []byte(strings.Replace(string(b), `"fail": 8`, `"fail": 7`, 1))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	// And a negative that is no longer a negative.
	np := filepath.Join(dir, "fixtures", FixtureNegatives)
	nb, _ := os.ReadFile(np)
	nb = []byte(strings.Replace(string(nb), `"value": "MAYBE"`, `"value": "REFUSED"`, 1))
	if err := os.WriteFile(np, nb, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := SelfTest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() || len(r.Problems) != 2 {
		t.Fatalf("problems %v, want the S2 count and N11", r.Problems)
	}
	if !strings.Contains(r.Problems[0], "S2") || !strings.Contains(r.Problems[1], "N11") {
		t.Errorf("problems %v", r.Problems)
	}
}
