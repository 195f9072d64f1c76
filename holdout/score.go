package holdout

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// The eight predicate operators. There is no ninth.
const (
	OpEQ           = "EQ"
	OpNEQ          = "NEQ"
	OpHOLDS        = "HOLDS"
	OpMOVES        = "MOVES"
	OpRefusalSetEQ = "REFUSAL_SET_EQ"
	OpVerdictEQ    = "VERDICT_EQ"
	OpOutcomeEQ    = "OUTCOME_EQ"
	OpLT           = "LT"
)

// Operators lists the eight predicate operators in the reference's order.
var Operators = []string{OpEQ, OpNEQ, OpHOLDS, OpMOVES, OpRefusalSetEQ, OpVerdictEQ, OpOutcomeEQ, OpLT}

// Refusal rules of the scorer. A *RefusedError matches (errors.Is) the rule
// of every problem it lists.
var (
	// errChallengeSchema: a challenge violates holdout-recipe-v1.schema.json
	// (an unknown recipe operator, an unknown member, a fixture without a
	// root…).
	errChallengeSchema = fault.New(fault.Refused, "challenge violates the recipe schema")
	// errObservationSchema: the document violates
	// holdout-observation-v1.schema.json (x-sorted included).
	errObservationSchema = fault.New(fault.Refused, "observation document violates the observation schema")
	// errImplementation: the document's implementation label is not the
	// adapter's.
	errImplementation = fault.New(fault.Refused, "observation document names another implementation")
	// errRelease: the document's spec_release_id is not the run's release.
	errRelease = fault.New(fault.Refused, "observation document was written against another release")
	// errFixtureRoot: an observation's fixture_root is not the challenge's
	// declared fixture.root.
	errFixtureRoot = fault.New(fault.Refused, "observation resolved another fixture than the challenge declares")
	// errDuplicateChallenge: two challenges share an id, so an observation
	// would answer both.
	errDuplicateChallenge = fault.New(fault.Refused, "two challenges share an id")
)

// Problem is one reason a document is refused.
type Problem struct {
	Rule error
	Text string
}

// RefusedError is the scorer's refusal: nothing was scored.
type RefusedError struct {
	Problems []Problem
}

// maxListed is how many problems the refusal message lists (the
// reference's first ten).
const maxListed = 10

func (e *RefusedError) Error() string {
	texts := make([]string, 0, min(len(e.Problems), maxListed))
	for i, p := range e.Problems {
		if i == maxListed {
			break
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, " · ")
}

// Is matches the rule of any listed problem.
func (e *RefusedError) Is(target error) bool {
	for _, p := range e.Problems {
		if p.Rule == target {
			return true
		}
	}
	return false
}

// Options are the scorer's expectations of a document; empty means "not
// checked".
type Options struct {
	ExpectRelease        string
	ExpectImplementation string
}

// Result is one evaluated predicate. Pass is nil for UNRESOLVED.
//
// Expected and Observed say the same as Detail, per side, for a person
// reading a failure: Observed is the value the predicate read from the
// observation (the candidate's for HOLDS/MOVES, the left side for
// EQ/NEQ/LT), Expected what it was compared with (the predicate's value,
// the right side, or the baseline for HOLDS/MOVES), each in the scorer's
// stable encoding, clipped like Detail, "ABSENT" when the path resolves to
// nothing. The op says how the two are compared (NEQ: they must differ;
// MOVES: the candidate must differ from the baseline; LT: observed <
// expected). Neither is part of the reference's result shape (JSON).
type Result struct {
	ID     string
	Op     string
	Path   string
	Pass   *bool
	Detail string
	// Index is the predicate's 1-based position in its challenge.
	Index    int
	Expected string
	Observed string
	// Missing: the document has no observation of the challenge, so the
	// predicate was not evaluated (Pass is nil; see Report.Rows).
	Missing bool
}

// Outcome names the result: PASS, FAIL, UNRESOLVED or, for a predicate of
// a challenge the document does not observe, MISSING.
func (r Result) Outcome() string {
	switch {
	case r.Missing:
		return "MISSING"
	case r.Pass == nil:
		return "UNRESOLVED"
	case *r.Pass:
		return "PASS"
	}
	return "FAIL"
}

// Report is the scorer's output for one document (the reference's scoreRun
// shape).
type Report struct {
	Results        []Result
	Missing        []string
	Total          int
	Pass           int
	Fail           int
	Unresolved     int
	Implementation string
	SpecReleaseID  string
}

// Verdict is PASS only when no predicate failed or was unresolved and no
// challenge is missing; otherwise FAIL.
func (r *Report) Verdict() string {
	if r.Fail == 0 && r.Unresolved == 0 && len(r.Missing) == 0 {
		return "PASS"
	}
	return "FAIL"
}

// ExpectedText says what the predicate wanted, in words that hold for its
// operator: the value itself for the equalities, "not V" for NEQ, the
// baseline's value for HOLDS and MOVES, "less than V" for LT.
func (r Result) ExpectedText() string {
	switch r.Op {
	case OpNEQ:
		return "not " + r.Expected
	case OpHOLDS:
		return r.Expected + " (the baseline's)"
	case OpMOVES:
		return "other than " + r.Expected + " (the baseline's)"
	case OpLT:
		return "less than " + r.Expected
	}
	return r.Expected
}

// Describe names the predicate and, unless it passed, what it wanted and
// what the document holds: "H2#2 EQ a.b: expected 650, observed 649";
// an unresolved or missing one says so first.
func (r Result) Describe() string {
	s := fmt.Sprintf("%s#%d %s %s", r.ID, r.Index, r.Op, r.Path)
	switch r.Outcome() {
	case "PASS":
		return s + ": pass"
	case "FAIL":
		return fmt.Sprintf("%s: expected %s, observed %s", s, r.ExpectedText(), r.Observed)
	case "MISSING":
		return fmt.Sprintf("%s: missing (%s; expected %s)", s, r.Detail, r.ExpectedText())
	}
	return fmt.Sprintf("%s: unresolved, expected %s, observed %s", s, r.ExpectedText(), r.Observed)
}

// Rows lists every predicate of every challenge, in the challenges' order:
// the scorer's result where the document observes the challenge, and for
// a challenge in Missing each of its predicates as a MISSING result (op,
// path and, where the predicate carries a literal, the expected value; the
// observed side ABSENT). A person reading a failure sees every predicate,
// not only those evaluated.
func (r *Report) Rows(challenges []*Challenge) []Result {
	byID := map[string][]Result{}
	for _, x := range r.Results {
		byID[x.ID] = append(byID[x.ID], x)
	}
	missing := map[string]bool{}
	for _, m := range r.Missing {
		missing[m] = true
	}
	var out []Result
	for _, c := range challenges {
		if !missing[c.ID] {
			out = append(out, byID[c.ID]...)
			continue
		}
		for k, p := range c.Predicates() {
			x := Evaluate(c.ID, p, nil)
			x.Index, x.Missing, x.Pass, x.Observed = k+1, true, nil, "ABSENT"
			x.Detail = "the document has no observation of " + c.ID
			out = append(out, x)
		}
	}
	return out
}

// Counts is pass/fail/unresolved for one challenge.
type Counts struct{ Pass, Fail, Unresolved int }

// ByChallenge tallies the results per challenge id.
func (r *Report) ByChallenge() map[string]Counts {
	out := map[string]Counts{}
	for _, res := range r.Results {
		c := out[res.ID]
		switch res.Outcome() {
		case "PASS":
			c.Pass++
		case "FAIL":
			c.Fail++
		default:
			c.Unresolved++
		}
		out[res.ID] = c
	}
	return out
}

// JSON renders the report in the reference's member order:
// {results:[{id, op, path, pass, detail}], missing, total, pass, fail,
// unresolved, implementation, spec_release_id}.
func (r *Report) JSON() *evidence.Object {
	results := make([]any, len(r.Results))
	for i, res := range r.Results {
		var pass any
		if res.Pass != nil {
			pass = *res.Pass
		}
		results[i] = evidence.NewObject(
			evidence.Member{Name: "id", Value: res.ID},
			evidence.Member{Name: "op", Value: res.Op},
			evidence.Member{Name: "path", Value: res.Path},
			evidence.Member{Name: "pass", Value: pass},
			evidence.Member{Name: "detail", Value: res.Detail},
		)
	}
	missing := make([]any, len(r.Missing))
	for i, m := range r.Missing {
		missing[i] = m
	}
	return evidence.NewObject(
		evidence.Member{Name: "results", Value: results},
		evidence.Member{Name: "missing", Value: missing},
		evidence.Member{Name: "total", Value: r.Total},
		evidence.Member{Name: "pass", Value: r.Pass},
		evidence.Member{Name: "fail", Value: r.Fail},
		evidence.Member{Name: "unresolved", Value: r.Unresolved},
		evidence.Member{Name: "implementation", Value: r.Implementation},
		evidence.Member{Name: "spec_release_id", Value: r.SpecReleaseID},
	)
}

// ValidateChallenges checks every challenge against the recipe schema and
// refuses duplicate ids. It returns the problems (nil if none).
func ValidateChallenges(s *Schemas, challenges []*Challenge) []Problem {
	var probs []Problem
	seen := make(map[string]bool, len(challenges))
	for i, c := range challenges {
		label := c.ID
		if label == "" {
			label = fmt.Sprintf("#%d", i)
		}
		if c.File != "" {
			label += " (" + c.File + ")"
		}
		if err := s.Recipe.Validate(c.Value); err != nil {
			probs = append(probs, schemaProblems(errChallengeSchema, "challenge "+label, err)...)
		}
		if c.ID != "" {
			if seen[c.ID] {
				probs = append(probs, Problem{errDuplicateChallenge, "challenge " + label + ": id " + c.ID + " appears twice"})
			}
			seen[c.ID] = true
		}
	}
	return probs
}

func schemaProblems(rule error, where string, err error) []Problem {
	var se *evidence.SchemaError
	if !errors.As(err, &se) {
		return []Problem{{rule, where + ": " + err.Error()}}
	}
	out := make([]Problem, 0, len(se.Causes))
	for _, c := range se.Causes {
		out = append(out, Problem{rule, where + ": " + se.Schema + " " + c.String()})
	}
	return out
}

// Scorer is a challenge set already validated against the recipe schema,
// ready to score any number of documents.
type Scorer struct {
	schemas    *Schemas
	challenges []*Challenge
}

// NewScorer validates the challenges once (recipe schema, unique ids); a
// set with any problem is refused with a *RefusedError.
func NewScorer(s *Schemas, challenges []*Challenge) (*Scorer, error) {
	if s == nil || s.Recipe == nil || s.Observation == nil {
		return nil, errors.New("holdout: the scorer needs both schemas of the pinned package")
	}
	if probs := ValidateChallenges(s, challenges); len(probs) > 0 {
		return nil, &RefusedError{Problems: probs}
	}
	return &Scorer{schemas: s, challenges: challenges}, nil
}

// Score validates the challenges and the document, then evaluates every
// predicate of every challenge the document observes. doc is a value read
// by evidence.Read. A document that breaks a boundary rule is refused with
// a *RefusedError and nothing is scored (every problem of the challenges
// and of the document is listed); a challenge without an observation is
// listed in Missing.
func Score(s *Schemas, challenges []*Challenge, doc any, opt Options) (*Report, error) {
	if s == nil || s.Recipe == nil || s.Observation == nil {
		return nil, errors.New("holdout: Score needs both schemas of the pinned package")
	}
	probs := ValidateChallenges(s, challenges)
	return score(s, challenges, doc, opt, probs)
}

// Score scores one document against the validated challenge set (the
// document-side rules of Score).
func (sc *Scorer) Score(doc any, opt Options) (*Report, error) {
	return score(sc.schemas, sc.challenges, doc, opt, nil)
}

func score(s *Schemas, challenges []*Challenge, doc any, opt Options, probs []Problem) (*Report, error) {
	if err := s.Observation.Validate(doc); err != nil {
		probs = append(probs, schemaProblems(errObservationSchema, "observation document", err)...)
	}
	d, _ := doc.(*evidence.Object)
	impl, _ := resolve(d, "implementation").(string)
	srel, _ := resolve(d, "spec_release_id").(string)
	if opt.ExpectImplementation != "" && impl != opt.ExpectImplementation {
		probs = append(probs, Problem{errImplementation, fmt.Sprintf("implementation %q is not the adapter's %q", impl, opt.ExpectImplementation)})
	}
	if opt.ExpectRelease != "" && srel != opt.ExpectRelease {
		probs = append(probs, Problem{errRelease, fmt.Sprintf("spec_release_id %q is not the run's %s", srel, opt.ExpectRelease)})
	}
	obsAll, _ := resolve(d, "observations").(*evidence.Object)
	for _, c := range challenges {
		o, ok := obsAll.Get(c.ID)
		if !ok {
			continue
		}
		got := resolve(o, "fixture_root")
		want, _ := c.FixtureRoot()
		if gs, ok := got.(string); !ok || gs != want {
			probs = append(probs, Problem{errFixtureRoot, fmt.Sprintf("observation %s: fixture_root %s is not the challenge's fixture.root %s", c.ID, clip(stable(got)), want)})
		}
	}
	if len(probs) > 0 {
		return nil, &RefusedError{Problems: probs}
	}
	rep := &Report{Implementation: impl, SpecReleaseID: srel, Missing: []string{}}
	for _, c := range challenges {
		o, ok := obsAll.Get(c.ID)
		if !ok {
			rep.Missing = append(rep.Missing, c.ID)
			continue
		}
		for k, p := range c.Predicates() {
			res := Evaluate(c.ID, p, o)
			res.Index = k + 1
			rep.Results = append(rep.Results, res)
			rep.Total++
			switch res.Outcome() {
			case "PASS":
				rep.Pass++
			case "FAIL":
				rep.Fail++
			default:
				rep.Unresolved++
			}
		}
	}
	return rep, nil
}

// detailLimit bounds each value quoted in a result's detail.
const detailLimit = 80

func clip(s string) string {
	if s == absentStable {
		return "ABSENT"
	}
	return clip16(s, detailLimit)
}

func verdictOf(b bool) *bool { return &b }

// Evaluate applies one predicate to one observation. Each operator reads
// exactly one root, with no fallback to another.
func Evaluate(id string, p *evidence.Object, obs any) Result {
	op, _ := resolve(p, "op").(string)
	path, _ := resolve(p, "path").(string)
	left, _ := resolve(p, "left").(string)
	right, _ := resolve(p, "right").(string)
	value, hasValue := p.Get("value")
	res := Result{ID: id, Op: op, Path: path}
	if res.Path == "" {
		if p.Has("left") {
			res.Path = left + " < " + right
		} else {
			res.Path = "refusal_set"
		}
	}
	unresolved := func(detail string) Result { res.Detail = detail; return res }
	switch op {
	case OpHOLDS, OpMOVES:
		b := resolve(resolve(obs, "baseline"), path)
		c := resolve(resolve(obs, "candidate"), path)
		sb, sc := stable(b), stable(c)
		res.Expected, res.Observed = clip(sb), clip(sc)
		detail := "baseline=" + clip(sb) + " candidate=" + clip(sc)
		if sb == absentStable || sc == absentStable {
			return unresolved(detail)
		}
		res.Pass = verdictOf((sb == sc) == (op == OpHOLDS))
		res.Detail = detail
	case OpEQ, OpNEQ:
		l := resolve(obs, path)
		r := value
		if !hasValue {
			r = resolve(obs, right)
		}
		sl, sr := stable(l), stable(r)
		res.Expected, res.Observed = clip(sr), clip(sl)
		detail := "left=" + clip(sl) + " right=" + clip(sr)
		if sl == absentStable || sr == absentStable {
			return unresolved(detail)
		}
		res.Pass = verdictOf((sl == sr) == (op == OpEQ))
		res.Detail = detail
	case OpVerdictEQ, OpOutcomeEQ:
		root := obs
		if op == OpVerdictEQ {
			root = resolve(obs, "candidate")
		}
		v := resolve(root, path)
		sv := stable(v)
		res.Expected, res.Observed = clip(stable(valueOrAbsent(value, hasValue))), clip(sv)
		detail := "observed=" + res.Observed + " expected=" + res.Expected
		if sv == absentStable {
			return unresolved(detail)
		}
		// Strict equality: a predicate without a value equals nothing.
		res.Pass = verdictOf(hasValue && strictEqual(v, value))
		res.Detail = detail
	case OpRefusalSetEQ:
		rs := resolve(obs, "refusal_set")
		got, ok := rs.([]any)
		res.Observed = clip(stable(rs))
		if want, ok := value.([]any); ok {
			res.Expected = clip(stable(jsSorted(want)))
		} else {
			res.Expected = clip(stable(valueOrAbsent(value, hasValue)))
		}
		if !ok {
			return unresolved("refusal_set=" + clip(stable(rs)) + " (absent or not an array)")
		}
		// An absent or null value is the empty set, as the reference reads
		// it ([...(p.value ?? [])]): "refuses nothing" has one reading. Any
		// other non-array value has none (the reference spreads a string
		// into its characters and throws on an object), so it is
		// UNRESOLVED.
		want, ok := value.([]any)
		if !hasValue || value == nil {
			want, ok = []any{}, true
		}
		if !ok {
			return unresolved("the predicate's value is not an array")
		}
		sg, sw := stable(jsSorted(got)), stable(jsSorted(want))
		res.Observed = clip(sg)
		// Exact set equality, never "includes": five unrelated extra codes
		// must not pass unnoticed.
		res.Pass = verdictOf(sg == sw)
		res.Detail = "observed=" + clip(sg) + " expected=" + clip(sw)
	case OpLT:
		l, r := resolve(obs, left), resolve(obs, right)
		res.Expected, res.Observed = clip(stable(r)), clip(stable(l))
		detail := "left=" + res.Observed + " right=" + res.Expected
		// Numbers only: a string "10" < "9" would order by code unit.
		if !isNumber(l) || !isNumber(r) {
			return unresolved(detail + " (both sides must be numbers)")
		}
		res.Pass = verdictOf(l.(float64) < r.(float64))
		res.Detail = detail
	default:
		return unresolved(fmt.Sprintf("unknown predicate operator %q", op))
	}
	return res
}

func valueOrAbsent(v any, ok bool) any {
	if !ok {
		return absent
	}
	return v
}

// jsSorted is a sorted copy as JavaScript's default Array.prototype.sort
// orders it: by String(element), in UTF-16 code-unit order, stably.
func jsSorted(a []any) []any {
	out := slices.Clone(a)
	slices.SortStableFunc(out, func(x, y any) int {
		return evidence.CompareUTF16(evidence.JSString(x), evidence.JSString(y))
	})
	return out
}

// Scored is one document's outcome in ScoreAll.
type Scored struct {
	Report *Report
	Err    error
}

// ScoreAll scores several implementations' documents concurrently (each
// with its own label expected), one goroutine per document up to
// GOMAXPROCS. Results are in the order of docs.
func (sc *Scorer) ScoreAll(docs []Document, expectRelease string) []Scored {
	out := make([]Scored, len(docs))
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	var wg sync.WaitGroup
	for i, d := range docs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, err := sc.Score(d.Value, Options{ExpectRelease: expectRelease, ExpectImplementation: d.Implementation})
			out[i] = Scored{r, err}
		}()
	}
	wg.Wait()
	return out
}

// FaultClass is Refused (internal/fault): an observation document is refused.
func (*RefusedError) FaultClass() fault.Class { return fault.Refused }
