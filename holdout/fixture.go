package holdout

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// Fixture file names inside experiment/fixtures/.
const (
	FixtureChallenges   = "synthetic-challenges.json"
	FixtureObservations = "synthetic-observations.json"
	FixtureExpected     = "synthetic-expected.json"
	FixtureNegatives    = "synthetic-negatives.json"
)

// mutatedRoot is the value the interop self-test writes into
// S1.candidate.D.artifact_root.
var mutatedRoot = "root-" + strings.Repeat("b", 64)

// mutatedPath is where that mutation must be reported.
const mutatedPath = "S1.candidate.D.artifact_root"

// NegativeResult is one negative case of the fixture.
type NegativeResult struct {
	ID      string
	Rule    string // the case's own description of the rule
	Refused bool
	Err     error // the refusal (a *RefusedError) when Refused
}

// FixtureReport is the outcome of the synthetic self-test.
type FixtureReport struct {
	// Report is the honest document's score.
	Report *Report
	// Expected is synthetic-expected.json's by_challenge.
	Expected map[string]Counts
	// Operators is the sorted set of operators evaluated.
	Operators []string
	Negatives []NegativeResult
	// TwinFindings are the findings between the honest document and a copy
	// that differs only in its implementation label (must be none).
	TwinFindings []Finding
	// MutationFindings are the findings after S1.candidate.D.artifact_root
	// is changed (must be exactly one, at that path).
	MutationFindings []Finding
	// Problems lists every way the scorer disagreed with the fixture; the
	// self-test passes only when it is empty.
	Problems []string
}

// OK reports whether the self-test passed.
func (r *FixtureReport) OK() bool { return len(r.Problems) == 0 }

// ErrSelfTest: the scorer disagreed with the package's synthetic fixture,
// so nothing it scores can be trusted.
var ErrSelfTest = errors.New("scorer self-test failed")

// SelfTest runs the scorer over the synthetic fixture of a package:
// experimentDir is the package's experiment/ directory (schemas beside
// fixtures/). It returns an error only when the fixture cannot be read;
// disagreements are listed in the report's Problems.
func SelfTest(experimentDir string) (*FixtureReport, error) {
	s, err := LoadSchemas(experimentDir)
	if err != nil {
		return nil, err
	}
	return SelfTestWith(s, filepath.Join(experimentDir, "fixtures"))
}

// SelfTestWith is SelfTest with already loaded schemas and a fixtures
// directory.
func SelfTestWith(s *Schemas, fixturesDir string) (*FixtureReport, error) {
	read := func(name string) ([]byte, error) {
		// The project's bounded reader: a FIFO or an oversized fixture is
		// refused, not read.
		b, err := evidence.ReadFileBytes(filepath.Join(fixturesDir, name))
		if err != nil {
			return nil, fmt.Errorf("fixture: %w", err)
		}
		return b, nil
	}
	cb, err := read(FixtureChallenges)
	if err != nil {
		return nil, err
	}
	challenges, err := ParseChallenges(cb, filepath.Join(fixturesDir, FixtureChallenges))
	if err != nil {
		return nil, err
	}
	ob, err := read(FixtureObservations)
	if err != nil {
		return nil, err
	}
	readDoc := func() (any, error) {
		v, err := evidence.Read(ob)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(fixturesDir, FixtureObservations), err)
		}
		return v, nil
	}
	doc, err := readDoc()
	if err != nil {
		return nil, err
	}
	eb, err := read(FixtureExpected)
	if err != nil {
		return nil, err
	}
	expected, err := evidence.ReadObject(eb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(fixturesDir, FixtureExpected), err)
	}
	nb, err := read(FixtureNegatives)
	if err != nil {
		return nil, err
	}
	negatives, err := evidence.ReadObject(nb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(fixturesDir, FixtureNegatives), err)
	}

	r := &FixtureReport{Expected: map[string]Counts{}}
	problem := func(format string, a ...any) { r.Problems = append(r.Problems, fmt.Sprintf(format, a...)) }

	// The honest document: every expected count, every operator.
	rep, err := Score(s, challenges, doc, Options{})
	if err != nil {
		problem("the honest synthetic document was refused: %v", err)
	} else {
		r.Report = rep
		if len(rep.Missing) > 0 {
			problem("challenges missing from the honest document: %v", rep.Missing)
		}
		byC, _ := resolve(expected, "by_challenge").(*evidence.Object)
		if byC.Len() == 0 {
			problem("%s has no by_challenge", FixtureExpected)
		}
		for _, m := range byC.Members {
			p, _ := count(resolve(m.Value, "pass"))
			f, _ := count(resolve(m.Value, "fail"))
			u, _ := count(resolve(m.Value, "unresolved"))
			r.Expected[m.Name] = Counts{p, f, u}
		}
		got := rep.ByChallenge()
		for _, id := range slices.Sorted(maps.Keys(r.Expected)) {
			if got[id] != r.Expected[id] {
				problem("%s: scored %d/%d/%d (pass/fail/unresolved), expected %d/%d/%d", id, got[id].Pass, got[id].Fail, got[id].Unresolved, r.Expected[id].Pass, r.Expected[id].Fail, r.Expected[id].Unresolved)
			}
		}
		for id := range got {
			if _, ok := r.Expected[id]; !ok {
				problem("%s was scored but the expected results do not name it", id)
			}
		}
		ops := map[string]bool{}
		for _, res := range rep.Results {
			ops[res.Op] = true
		}
		r.Operators = slices.Sorted(maps.Keys(ops))
		want, _ := resolve(expected, "operators_exercised").([]any)
		for _, w := range want {
			if ws, _ := w.(string); !ops[ws] {
				problem("operator %v was not evaluated", w)
			}
		}
	}

	// Every negative must be refused.
	cases, _ := resolve(negatives, "cases").([]any)
	if len(cases) == 0 {
		problem("%s has no cases", FixtureNegatives)
	}
	for i, cv := range cases {
		c, _ := cv.(*evidence.Object)
		id, _ := resolve(c, "id").(string)
		rule, _ := resolve(c, "rule").(string)
		if id == "" {
			id = fmt.Sprintf("case %d", i)
		}
		nr := NegativeResult{ID: id, Rule: rule}
		d, err := readDoc()
		if err != nil {
			return nil, err
		}
		muts, _ := resolve(c, "mutations").([]any)
		for _, mv := range muts {
			m, _ := mv.(*evidence.Object)
			path, _ := resolve(m, "path").(string)
			del, _ := resolve(m, "delete").(bool)
			val, _ := m.Get("value")
			if err := Mutate(d, path, val, del); err != nil {
				problem("%s: mutation %q cannot be applied: %v", id, path, err)
			}
		}
		chs := challenges
		if cl, ok := resolve(c, "challenges").([]any); ok {
			chs = chs[:0:0]
			for _, e := range cl {
				ch, err := newChallenge(e, "")
				if err != nil {
					problem("%s: %v", id, err)
					continue
				}
				chs = append(chs, ch)
			}
		}
		opt := Options{}
		opt.ExpectRelease, _ = resolve(c, "expect_release").(string)
		_, err = Score(s, chs, d, opt)
		var re *RefusedError
		if errors.As(err, &re) {
			nr.Refused, nr.Err = true, err
		} else {
			problem("%s (%s) was not refused", id, rule)
		}
		r.Negatives = append(r.Negatives, nr)
	}

	// Interop: a label alone is not a disagreement; one changed member is.
	twin, err := readDoc()
	if err != nil {
		return nil, err
	}
	// An unapplied relabel would compare the document with itself and pass.
	if err := Mutate(twin, "implementation", "synthetic-fixture-twin", false); err != nil {
		problem("interop relabel cannot be applied: %v", err)
	}
	r.TwinFindings = Compare(doc, twin)
	if len(r.TwinFindings) != 0 {
		problem("documents differing only in implementation gave %d interop findings, want 0", len(r.TwinFindings))
	}
	mut, err := readDoc()
	if err != nil {
		return nil, err
	}
	if err := Mutate(mut, "observations."+mutatedPath, mutatedRoot, false); err != nil {
		problem("interop mutation cannot be applied: %v", err)
	}
	r.MutationFindings = Compare(doc, mut)
	if len(r.MutationFindings) != 1 || r.MutationFindings[0].Path != mutatedPath {
		problem("mutating %s gave findings %v, want exactly one at that path", mutatedPath, r.MutationFindings)
	}
	return r, nil
}

// Mutate sets (or, with del, deletes) the member at a dot path of a value
// read by evidence.Read, creating missing intermediate objects. Numeric
// segments index arrays.
func Mutate(doc any, path string, value any, del bool) error {
	segs := strings.Split(path, ".")
	cur := doc
	for i, seg := range segs {
		last := i == len(segs)-1
		switch x := cur.(type) {
		case *evidence.Object:
			if last {
				if del {
					x.Delete(seg)
				} else {
					x.Set(seg, value)
				}
				return nil
			}
			next, ok := x.Get(seg)
			if !ok {
				next = &evidence.Object{}
				x.Set(seg, next)
			}
			cur = next
		case []any:
			k, ok := arrayIndex(seg)
			if !ok || k >= len(x) {
				return fmt.Errorf("segment %q does not index an array of %d", seg, len(x))
			}
			if last {
				if del {
					return fmt.Errorf("cannot delete array element %q", seg)
				}
				x[k] = value
				return nil
			}
			cur = x[k]
		default:
			return fmt.Errorf("segment %q is below a %s", seg, evidence.TypeName(cur))
		}
	}
	return nil
}
