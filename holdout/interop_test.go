package holdout

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

func TestCompare(t *testing.T) {
	t.Parallel()
	_, _, ob := loadFixture(t)
	mk := func() any { d, _ := evidence.Read(ob); return d }
	cases := []struct {
		name  string
		mut   func(d any)
		paths []string
	}{
		{"identical", func(any) {}, nil},
		{"implementation label only", func(d any) { mustMutate(d, "implementation", "other", false) }, nil},
		{"one unread member", func(d any) {
			mustMutate(d, "observations.S1.candidate.D.artifact_root", "root-"+strings.Repeat("b", 64), false)
		}, []string{"S1.candidate.D.artifact_root"}},
		{"member absent on one side", func(d any) { mustMutate(d, "observations.S1.resolve", nil, true) }, []string{"S1.resolve"}},
		{"array is a leaf", func(d any) { mustMutate(d, "observations.S2.refusal_set", []any{"another-code"}, false) }, []string{"S2.refusal_set"}},
		{"challenge observed by one only", func(d any) { mustMutate(d, "observations.S3", nil, true) }, []string{"S3"}},
		{"two places, sorted", func(d any) {
			mustMutate(d, "observations.S2.resolve.outcome", "x", false)
			mustMutate(d, "observations.S1.candidate.D.verdict", "REFUSED", false)
		}, []string{"S1.candidate.D.verdict", "S2.resolve.outcome"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := mk(), mk()
			c.mut(b)
			fs := Compare(a, b)
			var got []string
			for _, f := range fs {
				got = append(got, f.Path)
				if f.Classification != "UNCLASSIFIED_FINDING" {
					t.Errorf("%s classified %s", f.Path, f.Classification)
				}
			}
			if strings.Join(got, "|") != strings.Join(c.paths, "|") {
				t.Errorf("findings %v, want %v", got, c.paths)
			}
		})
	}
	// Values are quoted (first 40 code units) and ABSENT is named.
	b := mk()
	mustMutate(b, "observations.S1.resolve", nil, true)
	f := Compare(mk(), b)[0]
	if f.A != `{"outcome":"fixture-fine"}` || f.B != "ABSENT" {
		t.Errorf("a=%q b=%q", f.A, f.B)
	}
	b = mk()
	mustMutate(b, "observations.S1.candidate.D.artifact_root", "root-"+strings.Repeat("b", 64), false)
	f = Compare(mk(), b)[0]
	if f.A != `"root-3333333333333333333333333333333333` || len(f.B) != 40 {
		t.Errorf("a=%q b=%q", f.A, f.B)
	}
}

func TestCompareAll(t *testing.T) {
	t.Parallel()
	_, _, ob := loadFixture(t)
	mk := func(impl string) Document {
		d, _ := evidence.Read(ob)
		mustMutate(d, "implementation", impl, false)
		return Document{impl, d}
	}
	r, err := CompareAll([]Document{mk("a")})
	if err != nil || r.Measured || r.Verdict() != "NOT MEASURED" {
		t.Errorf("one document: %+v %v", r, err)
	}
	r, err = CompareAll(nil)
	if err != nil || r.Verdict() != "NOT MEASURED" {
		t.Errorf("no document: %+v %v", r, err)
	}
	c := mk("c")
	mustMutate(c.Value, "observations.S1.resolve.outcome", "different", false)
	r, err = CompareAll([]Document{mk("a"), mk("b"), c})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Pairs) != 3 || r.Findings != 2 || r.Verdict() != "UNCLASSIFIED_FINDING" {
		t.Errorf("pairs %d findings %d verdict %s", len(r.Pairs), r.Findings, r.Verdict())
	}
	r, _ = CompareAll([]Document{mk("a"), mk("b")})
	if r.Verdict() != "PASS" {
		t.Errorf("agreeing documents: %s", r.Verdict())
	}
	d := mk("d")
	mustMutate(d.Value, "spec_release_id", "srel-"+strings.Repeat("f", 64), false)
	if _, err := CompareAll([]Document{mk("a"), d}); !errors.Is(err, errIncomparable) {
		t.Errorf("different releases: %v, want errIncomparable", err)
	}
}

// mustMutate is Mutate for tests: a mutation that cannot be applied would
// leave the document unchanged and the case comparing it with itself.
func mustMutate(doc any, path string, value any, del bool) {
	if err := Mutate(doc, path, value, del); err != nil {
		panic(fmt.Sprintf("test mutation %s: %v", path, err))
	}
}
