package holdout

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// Fixture file names inside experiment/fixtures/.
const (
	FixtureChallenges   = "synthetic-challenges.json"
	FixtureObservations = "synthetic-observations.json"
	FixtureExpected     = "synthetic-expected.json"
	FixtureNegatives    = "synthetic-negatives.json"
)

// The interop mutation a fixture gets when its synthetic-expected.json
// declares none (no interop_mutation member): the reference protocol's,
// which its fixture (and the synthetic world's) relies on unchanged.
const defaultMutationPath = "S1.candidate.D.artifact_root"

var defaultMutationValue = "root-" + strings.Repeat("b", 64)

// errInteropMutation: the self-test's interop mutation (synthetic-expected.json's
// interop_mutation, or the default S1.candidate.D.artifact_root when that
// member is absent) does not change exactly one existing member of the
// honest synthetic observations. A mutation of a member that is not there
// would create it, or land below an array the comparison reports whole, so
// the "exactly one finding, at that path" check would test something other
// than what the fixture says. Every errInteropMutation is also errFixture.
var errInteropMutation = fault.New(fault.Refused, "self-test interop mutation names no member it can change")

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
	// MutationPath is the member of the synthetic observations the interop
	// check changed (synthetic-expected.json's interop_mutation.path, or
	// S1.candidate.D.artifact_root when the fixture declares none).
	MutationPath string
	// MutationFindings are the findings after that member is changed (must
	// be exactly one, at MutationPath).
	MutationFindings []Finding
	// Problems lists every way the scorer disagreed with the fixture; the
	// self-test passes only when it is empty.
	Problems []string
}

// OK reports whether the self-test passed.
func (r *FixtureReport) OK() bool { return len(r.Problems) == 0 }

// ErrSelfTest: the scorer disagreed with the package's synthetic fixture,
// so nothing it scores can be trusted.
var ErrSelfTest = fault.New(fault.Refused, "scorer self-test failed")

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

// errFixture: a self-test fixture file is not the shape the self-test
// reads (a missing or mistyped member, an unknown one, a count that is not
// a non-negative integer). A fixture that cannot be read as one thing tests
// nothing, so it is refused before any scoring, naming the file and the
// member.
var errFixture = fault.New(fault.Refused, "self-test fixture malformed")

// fixture is the self-test's four files, read and shape-checked.
type fixture struct {
	challenges []*Challenge
	// obs is the honest observation document's bytes, doc its reading;
	// the negatives and the interop checks mutate fresh readings of obs.
	obs       []byte
	doc       any
	expected  map[string]Counts
	operators []string
	cases     []fixtureCase
	// mutation is the interop check's change: path (relative to
	// observations, a finding's path) and the value written there.
	mutation fixtureMutation
}

type fixtureCase struct {
	id, rule      string
	mutations     []fixtureMutation
	challenges    []any // nil: the fixture's challenges
	hasChallenges bool
	expectRelease string
}

type fixtureMutation struct {
	path   string
	value  any
	delete bool
}

// fixtureShape reads the members of one fixture object: closed (only the
// names listed), each checked by its reader. bad collects problems.
type fixtureShape struct {
	file string
	errs []string
}

func (f *fixtureShape) bad(pointer, format string, a ...any) {
	f.errs = append(f.errs, fmt.Sprintf("%q: ", pointer)+fmt.Sprintf(format, a...))
}

func (f *fixtureShape) err() error {
	if len(f.errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", f.file, strings.Join(f.errs, "; "), errFixture)
}

// object checks v is an object with only the allowed members and every
// required one.
func (f *fixtureShape) object(pointer string, v any, required, optional []string) (*evidence.Object, bool) {
	o, ok := v.(*evidence.Object)
	if !ok {
		f.bad(pointer, "is %s, not an object", evidence.TypeName(v))
		return nil, false
	}
	for _, n := range o.Names() {
		if !slices.Contains(required, n) && !slices.Contains(optional, n) {
			f.bad(pointer+"/"+n, "is not a member the self-test reads")
		}
	}
	for _, n := range required {
		if !o.Has(n) {
			f.bad(pointer+"/"+n, "is missing")
		}
	}
	return o, true
}

func (f *fixtureShape) str(pointer string, v any) string {
	s, ok := v.(string)
	if !ok {
		f.bad(pointer, "is %s, not a string", evidence.TypeName(v))
	}
	return s
}

func (f *fixtureShape) array(pointer string, v any) []any {
	a, ok := v.([]any)
	if !ok {
		f.bad(pointer, "is %s, not an array", evidence.TypeName(v))
	}
	return a
}

// readFixture reads the four fixture files' bytes (dir names them in
// errors) and checks every shape the self-test relies on. Every malformed
// file is errFixture (or errChallengeRead for the challenges, and the
// strict reader's class for bytes it refuses), never a panic.
// synthetic-expected.json's optional interop_mutation {path, value} is the
// interop check's change (absent: S1.candidate.D.artifact_root ←
// "root-bbb…", the reference protocol's); it must change exactly one
// existing member of the honest observations, or it is errInteropMutation.
func readFixture(dir string, cb, ob, eb, nb []byte) (*fixture, error) {
	name := func(n string) string { return filepath.Join(dir, n) }
	fx := &fixture{obs: ob, expected: map[string]Counts{}}
	var err error
	if fx.challenges, err = ParseChallenges(cb, name(FixtureChallenges)); err != nil {
		return nil, err
	}
	if fx.doc, err = evidence.Read(ob); err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name(FixtureObservations), errFixture, err)
	}

	ev, err := evidence.Read(eb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name(FixtureExpected), errFixture, err)
	}
	f := &fixtureShape{file: name(FixtureExpected)}
	fx.mutation = fixtureMutation{path: defaultMutationPath, value: defaultMutationValue}
	declared := false
	if eo, ok := f.object("", ev, []string{"by_challenge"}, []string{"note", "operators_exercised", "interop_mutation"}); ok {
		if x, ok := eo.Get("by_challenge"); ok {
			// Every member of by_challenge is a challenge id.
			byC, isObj := x.(*evidence.Object)
			switch {
			case !isObj:
				f.bad("/by_challenge", "is %s, not an object", evidence.TypeName(x))
				byC = &evidence.Object{}
			case byC.Len() == 0:
				f.bad("/by_challenge", "names no challenge: a self-test that expects nothing checks nothing")
			}
			for _, m := range byC.Members {
				ptr := "/by_challenge/" + m.Name
				co, ok := f.object(ptr, m.Value, []string{"pass", "fail", "unresolved"}, nil)
				if !ok {
					continue
				}
				var n [3]int
				for i, k := range []string{"pass", "fail", "unresolved"} {
					x, _ := co.Get(k)
					c, ok := count(x)
					if co.Has(k) && !ok {
						f.bad(ptr+"/"+k, "is %s, not a non-negative integer", clip(stable(x)))
					}
					n[i] = c
				}
				fx.expected[m.Name] = Counts{n[0], n[1], n[2]}
			}
		}
		if ops, ok := eo.Get("operators_exercised"); ok {
			for i, o := range f.array("/operators_exercised", ops) {
				fx.operators = append(fx.operators, f.str(fmt.Sprintf("/operators_exercised/%d", i), o))
			}
		}
		if x, ok := eo.Get("interop_mutation"); ok {
			if mo, ok := f.object("/interop_mutation", x, []string{"path", "value"}, nil); ok {
				declared = true
				if p, ok := mo.Get("path"); ok {
					fx.mutation.path = f.str("/interop_mutation/path", p)
				}
				fx.mutation.value, _ = mo.Get("value")
			}
		}
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	if err := checkMutation(fx.doc, fx.mutation); err != nil {
		where := "/interop_mutation"
		if !declared {
			where += " (absent: the default " + defaultMutationPath + ")"
		}
		return nil, fmt.Errorf("%s: %q: %w: %w: %w", name(FixtureExpected), where, err, errInteropMutation, errFixture)
	}

	nv, err := evidence.Read(nb)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name(FixtureNegatives), errFixture, err)
	}
	f = &fixtureShape{file: name(FixtureNegatives)}
	if no, ok := f.object("", nv, []string{"cases"}, []string{"note"}); ok && no.Has("cases") {
		cases := f.array("/cases", resolve(no, "cases"))
		if _, isArr := resolve(no, "cases").([]any); isArr && len(cases) == 0 {
			f.bad("/cases", "is empty: a self-test with no negative cannot tell a scorer from one that accepts everything")
		}
		for i, cv := range cases {
			ptr := fmt.Sprintf("/cases/%d", i)
			co, ok := f.object(ptr, cv, []string{"id", "rule", "mutations"}, []string{"challenges", "expect_release"})
			if !ok {
				continue
			}
			c := fixtureCase{}
			if x, ok := co.Get("id"); ok {
				c.id = f.str(ptr+"/id", x)
			}
			if x, ok := co.Get("rule"); ok {
				c.rule = f.str(ptr+"/rule", x)
			}
			if x, ok := co.Get("expect_release"); ok {
				c.expectRelease = f.str(ptr+"/expect_release", x)
			}
			if x, ok := co.Get("challenges"); ok {
				c.challenges, c.hasChallenges = f.array(ptr+"/challenges", x), true
			}
			if x, ok := co.Get("mutations"); ok {
				for j, mv := range f.array(ptr+"/mutations", x) {
					mptr := fmt.Sprintf("%s/mutations/%d", ptr, j)
					mo, ok := f.object(mptr, mv, []string{"path"}, []string{"value", "delete"})
					if !ok {
						continue
					}
					m := fixtureMutation{}
					if x, ok := mo.Get("path"); ok {
						m.path = f.str(mptr+"/path", x)
					}
					m.value, _ = mo.Get("value")
					if x, ok := mo.Get("delete"); ok {
						b, isBool := x.(bool)
						if !isBool {
							f.bad(mptr+"/delete", "is %s, not a boolean", evidence.TypeName(x))
						}
						m.delete = b
					}
					c.mutations = append(c.mutations, m)
				}
			}
			fx.cases = append(fx.cases, c)
		}
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	return fx, nil
}

// SelfTestWith is SelfTest with already loaded schemas and a fixtures
// directory.
func SelfTestWith(s *Schemas, fixturesDir string) (*FixtureReport, error) {
	var files [4][]byte
	for i, name := range []string{FixtureChallenges, FixtureObservations, FixtureExpected, FixtureNegatives} {
		// The project's bounded reader: a FIFO or an oversized fixture is
		// refused, not read.
		b, err := evidence.ReadFileBytes(filepath.Join(fixturesDir, name))
		if err != nil {
			return nil, fmt.Errorf("fixture: %w", err)
		}
		files[i] = b
	}
	return selfTestBytes(s, fixturesDir, files)
}

// selfTestBytes is the self-test over the four fixture files' bytes
// (challenges, observations, expected, negatives); dir names them.
func selfTestBytes(s *Schemas, dir string, files [4][]byte) (*FixtureReport, error) {
	fx, err := readFixture(dir, files[0], files[1], files[2], files[3])
	if err != nil {
		return nil, err
	}
	challenges, doc := fx.challenges, fx.doc
	readDoc := func() any {
		// The bytes crossed the strict reader in readFixture.
		v, _ := evidence.Read(fx.obs)
		return v
	}

	r := &FixtureReport{Expected: fx.expected}
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
		got := rep.ByChallenge()
		for _, id := range slices.Sorted(maps.Keys(r.Expected)) {
			if got[id] != r.Expected[id] {
				problem("%s: scored %d/%d/%d (pass/fail/unresolved), expected %d/%d/%d", id, got[id].Pass, got[id].Fail, got[id].Unresolved, r.Expected[id].Pass, r.Expected[id].Fail, r.Expected[id].Unresolved)
			}
		}
		for _, id := range slices.Sorted(maps.Keys(got)) {
			if _, ok := r.Expected[id]; !ok {
				problem("%s was scored but the expected results do not name it", id)
			}
		}
		ops := map[string]bool{}
		for _, res := range rep.Results {
			ops[res.Op] = true
		}
		r.Operators = slices.Sorted(maps.Keys(ops))
		for _, w := range fx.operators {
			if !ops[w] {
				problem("operator %v was not evaluated", w)
			}
		}
	}

	// Every negative must be refused.
	for i, c := range fx.cases {
		id := c.id
		if id == "" {
			id = fmt.Sprintf("case %d", i)
		}
		nr := NegativeResult{ID: id, Rule: c.rule}
		d := readDoc()
		for _, m := range c.mutations {
			if err := Mutate(d, m.path, m.value, m.delete); err != nil {
				problem("%s: mutation %q cannot be applied: %v", id, m.path, err)
			}
		}
		chs := challenges
		if c.hasChallenges {
			chs = chs[:0:0]
			for _, e := range c.challenges {
				ch, err := newChallenge(e, "")
				if err != nil {
					problem("%s: %v", id, err)
					continue
				}
				chs = append(chs, ch)
			}
		}
		_, err = Score(s, chs, d, Options{ExpectRelease: c.expectRelease})
		var re *RefusedError
		if errors.As(err, &re) {
			nr.Refused, nr.Err = true, err
		} else {
			problem("%s (%s) was not refused", id, c.rule)
		}
		r.Negatives = append(r.Negatives, nr)
	}

	// Interop: a label alone is not a disagreement; one changed member is.
	twin := readDoc()
	// An unapplied relabel would compare the document with itself and pass.
	if err := Mutate(twin, "implementation", "synthetic-fixture-twin", false); err != nil {
		problem("interop relabel cannot be applied: %v", err)
	}
	r.TwinFindings = Compare(doc, twin)
	if len(r.TwinFindings) != 0 {
		problem("documents differing only in implementation gave %d interop findings, want 0", len(r.TwinFindings))
	}
	mut := readDoc()
	r.MutationPath = fx.mutation.path
	if err := Mutate(mut, "observations."+fx.mutation.path, fx.mutation.value, false); err != nil {
		problem("interop mutation cannot be applied: %v", err)
	}
	r.MutationFindings = Compare(doc, mut)
	if len(r.MutationFindings) != 1 || r.MutationFindings[0].Path != fx.mutation.path {
		problem("mutating %s gave findings %v, want exactly one at that path", fx.mutation.path, r.MutationFindings)
	}
	return r, nil
}

// checkMutation checks that writing m.value at m.path of the honest
// document's observations changes exactly that member, so the comparison
// must report exactly one finding there: every segment names an existing
// member of an object (Mutate would create a missing one, and the
// comparison reports an array's difference at the array, not the
// element), the value is not an object (two objects are compared member by
// member, so the finding would land deeper) and differs from what is there
// (an unchanged document has no finding to report).
func checkMutation(doc any, m fixtureMutation) error {
	cur, ok := resolve(doc, "observations").(*evidence.Object)
	if !ok {
		return errors.New("the synthetic observations have no observations object to change")
	}
	var v any = cur
	for i, seg := range strings.Split(m.path, ".") {
		o, ok := v.(*evidence.Object)
		if !ok {
			return fmt.Errorf("path %q: segment %d (%q) is below %s, not a member of an object", m.path, i, seg, evidence.TypeName(v))
		}
		if v, ok = o.Get(seg); !ok {
			return fmt.Errorf("path %q: segment %d (%q) is not a member of the synthetic observations", m.path, i, seg)
		}
	}
	if _, isObj := m.value.(*evidence.Object); isObj {
		return fmt.Errorf("value at %q is an object: the comparison would report its members, not the path", m.path)
	}
	if equal(v, m.value) {
		return fmt.Errorf("value at %q is the one the synthetic observations already hold: nothing changes", m.path)
	}
	return nil
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
