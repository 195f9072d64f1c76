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
		{"expected without by_challenge", ex, `{"operators_exercised":["EQ"]}`, ErrFixture, `"/by_challenge": is missing`},
		{"by_challenge null", ex, `{"by_challenge":null}`, ErrFixture, "not an object"},
		{"by_challenge an array", ex, `{"by_challenge":[1]}`, ErrFixture, "not an object"},
		{"by_challenge empty", ex, `{"by_challenge":{}}`, ErrFixture, "names no challenge"},
		{"a count not an object", ex, `{"by_challenge":{"S1":8}}`, ErrFixture, `"/by_challenge/S1"`},
		{"a count missing", ex, `{"by_challenge":{"S1":{"pass":8,"fail":0}}}`, ErrFixture, `"/by_challenge/S1/unresolved": is missing`},
		{"a count negative", ex, `{"by_challenge":{"S1":{"pass":-1,"fail":0,"unresolved":0}}}`, ErrFixture, "non-negative integer"},
		{"a count fractional", ex, `{"by_challenge":{"S1":{"pass":1.5,"fail":0,"unresolved":0}}}`, ErrFixture, "non-negative integer"},
		{"operators not an array", ex, `{"by_challenge":{"S1":{"pass":8,"fail":0,"unresolved":0}},"operators_exercised":"EQ"}`, ErrFixture, "not an array"},
		{"an unknown member", ex, `{"by_challenge":{"S1":{"pass":8,"fail":0,"unresolved":0}},"by_challenges":{}}`, ErrFixture, `"/by_challenges"`},
		{"expected an array", ex, `[]`, ErrFixture, "not an object"},
		{"expected not JSON", ex, `{"by_challenge":`, ErrFixture, ""},
		{"negatives without cases", ng, `{"note":"x"}`, ErrFixture, `"/cases": is missing`},
		{"cases empty", ng, `{"cases":[]}`, ErrFixture, "is empty"},
		{"cases an object", ng, `{"cases":{}}`, ErrFixture, "not an array"},
		{"a case a string", ng, `{"cases":["N1"]}`, ErrFixture, `"/cases/0"`},
		{"a case without mutations", ng, `{"cases":[{"id":"N1","rule":"r"}]}`, ErrFixture, `"/cases/0/mutations": is missing`},
		{"a mutation without a path", ng, `{"cases":[{"id":"N1","rule":"r","mutations":[{"value":1}]}]}`, ErrFixture, `"/cases/0/mutations/0/path": is missing`},
		{"a mutation path a number", ng, `{"cases":[{"id":"N1","rule":"r","mutations":[{"path":1}]}]}`, ErrFixture, "not a string"},
		{"delete not a boolean", ng, `{"cases":[{"id":"N1","rule":"r","mutations":[{"path":"x","delete":"yes"}]}]}`, ErrFixture, "not a boolean"},
		{"challenges not an array", ng, `{"cases":[{"id":"N1","rule":"r","mutations":[],"challenges":{}}]}`, ErrFixture, "not an array"},
		{"duplicate member", ng, `{"cases":[],"cases":[]}`, evidence.ClassDuplicateName, ""},
		{"observations not JSON", ob, `{`, ErrFixture, ""},
		{"challenges not an array", ch, `{}`, ErrChallengeRead, ""},
		{"a challenge a number", ch, `[1]`, ErrChallengeRead, ""},
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
// complete) as ErrFixture, before anything is scored.
func TestSelfTestDirectoryWithoutByChallenge(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "experiment")
	if err := os.CopyFS(dir, os.DirFS(worldExperiment(t))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fixtures", FixtureExpected), []byte(`{"note":"no counts"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := SelfTest(dir); !errors.Is(err, ErrFixture) || !strings.Contains(err.Error(), FixtureExpected) {
		t.Errorf("%v, want %v naming %s", err, ErrFixture, FixtureExpected)
	}
	pkg := filepath.Dir(dir)
	if _, err := LoadInstrument(pkg, filepath.Join(testshared.RepoRoot(t), "testdata", "world", "governance", "holdout"), nil); !errors.Is(err, ErrFixture) {
		t.Errorf("LoadInstrument: %v, want %v", err, ErrFixture)
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
			if !errors.Is(err, ErrFixture) && !errors.Is(err, ErrChallengeRead) {
				t.Fatalf("an unnamed error: %v", err)
			}
			return
		}
		if r == nil {
			t.Fatal("no report and no error")
		}
	})
}
