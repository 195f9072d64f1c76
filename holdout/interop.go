package holdout

import (
	"fmt"
	"slices"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// Unclassified is the classification of every finding the comparison
// produces: the comparator assigns no blame.
const Unclassified = "UNCLASSIFIED_FINDING"

// findingClip is how many UTF-16 code units of each side a finding quotes
// (the reference's 40).
const findingClip = 40

// Finding is one place where two observation documents disagree.
type Finding struct {
	// Path is "<challenge id>.<member>.<member>…".
	Path string
	// A and B are the first 40 code units of each side's stable encoding,
	// or "ABSENT".
	A, B           string
	Classification string
	// full stable encodings of both sides, for the finding's identity.
	fullA, fullB string
}

// ID is the finding's identity: the release, the two implementations, the
// path and the SHA-256 of both full values. The same disagreement found
// again (by run complete, by run verify's replay) has the same id, so a
// classification made once applies to it and to nothing else.
func (f Finding) ID(srel, implA, implB string) string {
	core := evidence.NewObject(
		evidence.Member{Name: "spec_release_id", Value: srel},
		evidence.Member{Name: "a", Value: implA},
		evidence.Member{Name: "b", Value: implB},
		evidence.Member{Name: "path", Value: f.Path},
		evidence.Member{Name: "a_sha256", Value: pkgwalk.SHA256Hex([]byte(f.fullA))},
		evidence.Member{Name: "b_sha256", Value: pkgwalk.SHA256Hex([]byte(f.fullB))},
	)
	c, _ := evidence.Canonical(core)
	return "find-" + pkgwalk.SHA256Hex(append([]byte("CLEANROOM-FINDING-v1|"), c...))
}

// Compare deep-compares the observations of two documents: every member,
// not only what predicates read. Equal subtrees yield nothing; two objects
// are compared member by member over the sorted union of their names;
// anything else (arrays included) that differs is one finding. The
// implementation label and the envelope are not compared.
func Compare(a, b any) []Finding {
	oa, _ := resolve(a, "observations").(*evidence.Object)
	ob, _ := resolve(b, "observations").(*evidence.Object)
	ids := unionNames(oa, ob)
	var out []Finding
	for _, id := range ids {
		compareAt(id, member(oa, id), member(ob, id), &out)
	}
	return out
}

func member(o *evidence.Object, name string) any {
	v, ok := o.Get(name)
	if !ok {
		return absent
	}
	return v
}

func unionNames(a, b *evidence.Object) []string {
	names := make([]string, 0, a.Len()+b.Len())
	seen := make(map[string]bool, a.Len()+b.Len())
	for _, o := range []*evidence.Object{a, b} {
		if o == nil {
			continue
		}
		for _, m := range o.Members {
			if !seen[m.Name] {
				seen[m.Name] = true
				names = append(names, m.Name)
			}
		}
	}
	slices.SortFunc(names, evidence.CompareUTF16)
	return names
}

func compareAt(path string, x, y any, out *[]Finding) {
	// Structural equality is the stable encodings' equality, without
	// encoding every agreeing observation.
	if equal(x, y) {
		return
	}
	ox, okx := x.(*evidence.Object)
	oy, oky := y.(*evidence.Object)
	if okx && oky {
		for _, k := range unionNames(ox, oy) {
			compareAt(path+"."+k, member(ox, k), member(oy, k), out)
		}
		return
	}
	sx, sy := stable(x), stable(y)
	*out = append(*out, Finding{Path: path, A: quoteSide(sx), B: quoteSide(sy), Classification: Unclassified, fullA: sx, fullB: sy})
}

func quoteSide(s string) string {
	if s == absentStable {
		return "ABSENT"
	}
	return clip16(s, findingClip)
}

// Document is one implementation's observation document for interop.
type Document struct {
	Implementation string
	Value          any
}

// PairFindings are the findings between two implementations.
type PairFindings struct {
	A, B     string
	Findings []Finding
}

// Interop is the result of comparing every pair of documents.
type Interop struct {
	// Measured is false with fewer than two documents: NOT MEASURED,
	// never PASS.
	Measured bool
	Pairs    []PairFindings
	// Findings is the total number of findings over all pairs.
	Findings int
}

// Verdict is NOT MEASURED (fewer than two documents), PASS (no finding)
// or UNCLASSIFIED_FINDING.
func (r *Interop) Verdict() string {
	switch {
	case !r.Measured:
		return "NOT MEASURED"
	case r.Findings > 0:
		return Unclassified
	}
	return "PASS"
}

// errIncomparable: the documents were written against different releases;
// comparing two implementations of two specifications measures nothing.
var errIncomparable = fault.New(fault.Refused, "observation documents name different releases")

// CompareAll compares every pair of documents (n(n-1)/2 pairs, in the
// given order). Documents whose spec_release_id differ are refused.
func CompareAll(docs []Document) (*Interop, error) {
	r := &Interop{Measured: len(docs) >= 2, Pairs: []PairFindings{}}
	for i := 1; i < len(docs); i++ {
		s0, _ := resolve(docs[0].Value, "spec_release_id").(string)
		si, _ := resolve(docs[i].Value, "spec_release_id").(string)
		if s0 != si {
			return nil, fmt.Errorf("%s names %q, %s names %q: %w", docs[0].Implementation, s0, docs[i].Implementation, si, errIncomparable)
		}
	}
	for i := 0; i < len(docs); i++ {
		for j := i + 1; j < len(docs); j++ {
			f := Compare(docs[i].Value, docs[j].Value)
			r.Pairs = append(r.Pairs, PairFindings{A: docs[i].Implementation, B: docs[j].Implementation, Findings: f})
			r.Findings += len(f)
		}
	}
	return r, nil
}

// JSON renders the comparison: {measured, verdict, pairs:[{a, b,
// findings:[{path, a, b, classification}]}], findings}.
func (r *Interop) JSON() *evidence.Object {
	pairs := make([]any, len(r.Pairs))
	for i, p := range r.Pairs {
		fs := make([]any, len(p.Findings))
		for k, f := range p.Findings {
			fs[k] = f.JSON()
		}
		pairs[i] = evidence.NewObject(
			evidence.Member{Name: "a", Value: p.A},
			evidence.Member{Name: "b", Value: p.B},
			evidence.Member{Name: "findings", Value: fs},
		)
	}
	return evidence.NewObject(
		evidence.Member{Name: "measured", Value: r.Measured},
		evidence.Member{Name: "verdict", Value: r.Verdict()},
		evidence.Member{Name: "pairs", Value: pairs},
		evidence.Member{Name: "findings", Value: r.Findings},
	)
}

// JSON renders one finding as {path, a, b, classification}.
func (f Finding) JSON() *evidence.Object {
	return evidence.NewObject(
		evidence.Member{Name: "path", Value: f.Path},
		evidence.Member{Name: "a", Value: f.A},
		evidence.Member{Name: "b", Value: f.B},
		evidence.Member{Name: "classification", Value: f.Classification},
	)
}
