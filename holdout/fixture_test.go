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

// worldFixture returns the synthetic world's schemas and its four fixture
// files' bytes (challenges, observations, expected, negatives).
func worldFixture(t testing.TB) (*Schemas, [4][]byte) {
	t.Helper()
	dir := worldExperiment(t)
	s, err := LoadSchemas(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files [4][]byte
	for i, n := range []string{FixtureChallenges, FixtureObservations, FixtureExpected, FixtureNegatives} {
		if files[i], err = os.ReadFile(filepath.Join(dir, "fixtures", n)); err != nil {
			t.Fatal(err)
		}
	}
	return s, files
}

// Every malformed fixture file is a named refusal naming the file, never a
// panic; the case (a fixture without by_challenge) first.
func TestMalformedFixtureRefused(t *testing.T) {
	t.Parallel()
	s, good := worldFixture(t)
	if r, err := selfTestBytes(s, "fx", good); err != nil || !r.OK() {
		t.Fatalf("the world's own fixture: %v %v", err, r)
	}
	const (
		ch = iota
		ob
		ex
		ng
	)
	cases := []struct {
		name string
		file int
		body string
		rule error
		says string
	}{
		{"expected without by_challenge", ex, `{"operators_exercised":["EQ"]}`, errFixture, `"/by_challenge": is missing`},
		{"by_challenge null", ex, `{"by_challenge":null}`, errFixture, "not an object"},
		{"by_challenge an array", ex, `{"by_challenge":[1]}`, errFixture, "not an object"},
		{"by_challenge empty", ex, `{"by_challenge":{}}`, errFixture, "names no challenge"},
		{"a count not an object", ex, `{"by_challenge":{"S1":8}}`, errFixture, `"/by_challenge/S1"`},
		{"a count missing", ex, `{"by_challenge":{"S1":{"pass":8,"fail":0}}}`, errFixture, `"/by_challenge/S1/unresolved": is missing`},
		{"a count negative", ex, `{"by_challenge":{"S1":{"pass":-1,"fail":0,"unresolved":0}}}`, errFixture, "non-negative integer"},
		{"a count fractional", ex, `{"by_challenge":{"S1":{"pass":1.5,"fail":0,"unresolved":0}}}`, errFixture, "non-negative integer"},
		{"interop_mutation not an object", ex, `{"by_challenge":{"S1":{"pass":8,"fail":0,"unresolved":0}},"interop_mutation":"S1.candidate"}`, errFixture, `"/interop_mutation": is a string, not an object`},
		{"interop_mutation without a value", ex, `{"by_challenge":{"S1":{"pass":8,"fail":0,"unresolved":0}},"interop_mutation":{"path":"S1.candidate"}}`, errFixture, `"/interop_mutation/value": is missing`},
		{"interop_mutation path a number", ex, `{"by_challenge":{"S1":{"pass":8,"fail":0,"unresolved":0}},"interop_mutation":{"path":1,"value":1}}`, errFixture, "not a string"},
		{"interop_mutation names nothing", ex, `{"by_challenge":{"S1":{"pass":8,"fail":0,"unresolved":0}},"interop_mutation":{"path":"S1.nope","value":1}}`, errInteropMutation, `segment 1 ("nope")`},
		{"operators not an array", ex, `{"by_challenge":{"S1":{"pass":8,"fail":0,"unresolved":0}},"operators_exercised":"EQ"}`, errFixture, "not an array"},
		{"an unknown member", ex, `{"by_challenge":{"S1":{"pass":8,"fail":0,"unresolved":0}},"by_challenges":{}}`, errFixture, `"/by_challenges"`},
		{"expected an array", ex, `[]`, errFixture, "not an object"},
		{"expected not JSON", ex, `{"by_challenge":`, errFixture, ""},
		{"negatives without cases", ng, `{"note":"x"}`, errFixture, `"/cases": is missing`},
		{"cases empty", ng, `{"cases":[]}`, errFixture, "is empty"},
		{"cases an object", ng, `{"cases":{}}`, errFixture, "not an array"},
		{"a case a string", ng, `{"cases":["N1"]}`, errFixture, `"/cases/0"`},
		{"a case without mutations", ng, `{"cases":[{"id":"N1","rule":"r"}]}`, errFixture, `"/cases/0/mutations": is missing`},
		{"a mutation without a path", ng, `{"cases":[{"id":"N1","rule":"r","mutations":[{"value":1}]}]}`, errFixture, `"/cases/0/mutations/0/path": is missing`},
		{"a mutation path a number", ng, `{"cases":[{"id":"N1","rule":"r","mutations":[{"path":1}]}]}`, errFixture, "not a string"},
		{"delete not a boolean", ng, `{"cases":[{"id":"N1","rule":"r","mutations":[{"path":"x","delete":"yes"}]}]}`, errFixture, "not a boolean"},
		{"challenges not an array", ng, `{"cases":[{"id":"N1","rule":"r","mutations":[],"challenges":{}}]}`, errFixture, "not an array"},
		{"duplicate member", ng, `{"cases":[],"cases":[]}`, evidence.ClassDuplicateName, ""},
		{"observations not JSON", ob, `{`, errFixture, ""},
		{"challenges not an array", ch, `{}`, errChallengeRead, ""},
		{"a challenge a number", ch, `[1]`, errChallengeRead, ""},
	}
	names := [4]string{FixtureChallenges, FixtureObservations, FixtureExpected, FixtureNegatives}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := good
			files[c.file] = []byte(c.body)
			r, err := selfTestBytes(s, "fx", files)
			if !errors.Is(err, c.rule) {
				t.Fatalf("%v (report %v), want %v", err, r, c.rule)
			}
			if !strings.Contains(err.Error(), filepath.Join("fx", names[c.file])) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%v does not name %s and %q", err, names[c.file], c.says)
			}
		})
	}
}

// A fixture directory whose expected file has no by_challenge is refused by
// SelfTest (holdout fixture, and LoadInstrument for run measure and run
// complete) as errFixture, before anything is scored.
func TestSelfTestDirectoryWithoutByChallenge(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "experiment")
	if err := os.CopyFS(dir, os.DirFS(worldExperiment(t))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fixtures", FixtureExpected), []byte(`{"note":"no counts"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := SelfTest(dir); !errors.Is(err, errFixture) || !strings.Contains(err.Error(), FixtureExpected) {
		t.Errorf("%v, want %v naming %s", err, errFixture, FixtureExpected)
	}
	pkg := filepath.Dir(dir)
	if _, err := LoadInstrument(pkg, filepath.Join(testshared.RepoRoot(t), "testdata", "world", "governance", "holdout"), nil); !errors.Is(err, errFixture) {
		t.Errorf("LoadInstrument: %v, want %v", err, errFixture)
	}
}

// FuzzFixtureReader: whatever bytes the four fixture files hold, the
// self-test returns a report or a named error — never a panic. Seeded with
// the synthetic world's fixture and, when ../shared is present, the
// reference world's. Run it with
//
//	go test ./holdout/ -run '^$' -fuzz FuzzFixtureReader -fuzztime 30s -fuzzminimizetime 1s
//
// (the default minimisation of four kilobyte-sized inputs stalls the run).
func FuzzFixtureReader(f *testing.F) {
	s, good := worldFixture(f)
	f.Add(good[0], good[1], good[2], good[3])
	// A declared interop mutation, one that holds and ones that name
	// nothing, go below an array or a scalar, or change nothing.
	for _, m := range []string{
		`{"path":"S2.candidate.D.structure.edges","value":99}`,
		`{"path":"S1.candidate.D.nope","value":1}`,
		`{"path":"S1.refusal_set.0","value":"x"}`,
		`{"path":"S1.candidate.D.verdict.x","value":1}`,
		`{"path":"S1.candidate.D.verdict","value":"VERIFIED"}`,
		`{"path":"","value":null}`,
	} {
		f.Add(good[0], good[1], []byte(`{`+worldCounts+`,"interop_mutation":`+m+`}`), good[3])
	}
	// The reference world's fixture, when ../shared is there (a seed, not
	// a requirement: the target runs without it).
	{
		dir := filepath.Join(filepath.Dir(testshared.RepoRoot(f)), "shared", "trvm", "world", "docs", "spec", "proof-wire", "experiment", "fixtures")
		var files [4][]byte
		ok := true
		for i, n := range []string{FixtureChallenges, FixtureObservations, FixtureExpected, FixtureNegatives} {
			b, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				ok = false
				break
			}
			files[i] = b
		}
		if ok {
			f.Add(files[0], files[1], files[2], files[3])
		}
	}
	f.Fuzz(func(t *testing.T, cb, ob, eb, nb []byte) {
		r, err := selfTestBytes(s, "fx", [4][]byte{cb, ob, eb, nb})
		if err != nil {
			if !errors.Is(err, errFixture) && !errors.Is(err, errChallengeRead) {
				t.Fatalf("an unnamed error: %v", err)
			}
			return
		}
		if r == nil {
			t.Fatal("no report and no error")
		}
	})
}

// renamedWorld copies the synthetic world's experiment/ into a temporary
// directory with the member artifact_root renamed output_digest in every
// file (schemas, challenges, observations, negatives): a world of its own
// whose fixture has no artifact_root anywhere. expected replaces
// synthetic-expected.json when not empty.
func renamedWorld(t *testing.T, expected string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "experiment")
	if err := os.CopyFS(dir, os.DirFS(worldExperiment(t))); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(p, []byte(strings.ReplaceAll(string(b), "artifact_root", "output_digest")), 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	if expected != "" {
		if err := os.WriteFile(filepath.Join(dir, "fixtures", FixtureExpected), []byte(expected), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The synthetic world's counts (testdata/world's synthetic-expected.json),
// with an interop_mutation member spliced in by the cases below.
const worldCounts = `"by_challenge":{"S1":{"pass":8,"fail":0,"unresolved":0},"S2":{"pass":0,"fail":8,"unresolved":0},"S3":{"pass":0,"fail":0,"unresolved":3}}`

// A world whose fixture has no artifact_root passes its self-test once its
// synthetic-expected.json declares the member the interop check changes;
// without the declaration the default (the reference protocol's
// S1.candidate.D.artifact_root) names nothing there and is refused by the
// named rule, as is every declaration that would not change exactly one
// existing member.
func TestSelfTestDeclaredInteropMutation(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(filepath.Join(worldExperiment(t), "fixtures", FixtureExpected)); err != nil {
		t.Fatal(err)
	}
	root := `"root-` + strings.Repeat("b", 64) + `"`
	decl := func(m string) string { return `{` + worldCounts + `,"interop_mutation":` + m + `}` }

	r, err := SelfTest(renamedWorld(t, decl(`{"path":"S1.candidate.D.output_digest","value":`+root+`}`)))
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("self-test problems: %v", r.Problems)
	}
	if r.MutationPath != "S1.candidate.D.output_digest" || len(r.MutationFindings) != 1 || r.MutationFindings[0].Path != "S1.candidate.D.output_digest" {
		t.Errorf("mutation %q findings %v, want exactly one at S1.candidate.D.output_digest", r.MutationPath, r.MutationFindings)
	}
	// Another member, of another type, is as good: the check is the
	// fixture's, not the reference protocol's.
	if r, err := SelfTest(renamedWorld(t, decl(`{"path":"S2.candidate.D.structure.edges","value":99}`))); err != nil || !r.OK() {
		t.Fatalf("edges mutation: %v %v", err, r)
	} else if len(r.MutationFindings) != 1 || r.MutationFindings[0].Path != "S2.candidate.D.structure.edges" {
		t.Errorf("edges mutation findings %v", r.MutationFindings)
	}

	cases := []struct {
		name, expected, says string
	}{
		{"undeclared: the default is not there", `{` + worldCounts + `}`, "(absent: the default S1.candidate.D.artifact_root)"},
		{"a path that does not exist", decl(`{"path":"S1.candidate.D.artifact_root","value":` + root + `}`), `segment 3 ("artifact_root") is not a member`},
		{"a challenge that does not exist", decl(`{"path":"S9.candidate","value":1}`), `segment 0 ("S9") is not a member`},
		{"a path below a scalar", decl(`{"path":"S1.candidate.D.verdict.x","value":1}`), "is below a string"},
		{"a path into an array", decl(`{"path":"S1.refusal_set.0","value":"x"}`), "is below an array"},
		{"an object value", decl(`{"path":"S1.candidate.D.structure","value":{"edges":1}}`), "is an object"},
		{"a value that changes nothing", decl(`{"path":"S1.candidate.D.verdict","value":"VERIFIED"}`), "nothing changes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := SelfTest(renamedWorld(t, c.expected))
			if !errors.Is(err, errInteropMutation) || !errors.Is(err, errFixture) {
				t.Fatalf("%v (report %v), want %v and %v", err, r, errInteropMutation, errFixture)
			}
			if !strings.Contains(err.Error(), FixtureExpected) || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%v does not name %s and %q", err, FixtureExpected, c.says)
			}
		})
	}
}
