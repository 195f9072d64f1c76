package evidence_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// observationDoc returns an observation-like document (the shape of the
// TRVM holdout observations: per challenge a baseline and a candidate with
// hex roots, claim ids, structure counts, a verdict and a refusal set),
// written as JSON.stringify(v, null, 1) writes it, of at most size bytes
// and within 4 KiB of it.
func observationDoc(tb testing.TB, size int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	hex := func(prefix string) string {
		const digits = "0123456789abcdef"
		b := []byte(prefix)
		for range 64 {
			b = append(b, digits[r.IntN(16)])
		}
		return string(b)
	}
	side := func(verdict bool) *evidence.Object {
		d := evidence.NewObject(
			evidence.Member{Name: "artifact_root", Value: hex("root-")},
			evidence.Member{Name: "nested_claim_sem_id", Value: hex("nclaim-")},
			evidence.Member{Name: "structure", Value: evidence.NewObject(
				evidence.Member{Name: "edges", Value: float64(r.IntN(1000))},
				evidence.Member{Name: "unique_artifacts", Value: float64(r.IntN(1000))},
				evidence.Member{Name: "ratio", Value: r.Float64()},
			)},
		)
		if verdict {
			d.Set("verdict", []string{"VERIFIED", "REFUSED"}[r.IntN(2)])
		}
		return evidence.NewObject(evidence.Member{Name: "D", Value: d})
	}
	observations := &evidence.Object{}
	doc := evidence.NewObject(
		evidence.Member{Name: "implementation", Value: "bench-fixture"},
		evidence.Member{Name: "observations", Value: observations},
	)
	var out []byte
	next := 64 // the entry count at which to measure the size next
	for i := 0; ; i++ {
		refusals := []any{}
		if r.IntN(3) == 0 {
			refusals = append(refusals, "refusal-code-é-\u2028", "escaped \"quote\" and \\ back\tslash")
		}
		observations.Members = append(observations.Members, evidence.Member{Name: fmt.Sprintf("S%06d", i), Value: evidence.NewObject(
			evidence.Member{Name: "baseline", Value: side(false)},
			evidence.Member{Name: "candidate", Value: side(true)},
			evidence.Member{Name: "fixture_root", Value: hex("root-")},
			evidence.Member{Name: "refusal_set", Value: refusals},
			evidence.Member{Name: "resolve", Value: evidence.NewObject(evidence.Member{Name: "outcome", Value: "synthetic-ok"})},
		)})
		if i < next {
			continue
		}
		b, err := evidence.Stringify(doc, " ")
		if err != nil {
			tb.Fatal(err)
		}
		if len(b) > size {
			if out == nil {
				tb.Fatalf("size %d too small", size)
			}
			return out
		}
		out = b
		// Step 90% of the way to the target, then entry by entry.
		perEntry := len(b) / (i + 1)
		next = i + max(1, (size-len(b))/perEntry*9/10)
	}
}

var benchSizes = []struct {
	name string
	size int
}{{"1MiB", 1 << 20}, {"8MiB", evidence.MaxSize}}

// BenchmarkRead compares the strict reader with encoding/json's lenient
// Unmarshal into any on the same bytes. Target: strict ≤ 1.5× lenient.
func BenchmarkRead(b *testing.B) {
	for _, s := range benchSizes {
		doc := observationDoc(b, s.size)
		b.Run(s.name+"/strict", func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := evidence.Read(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(s.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(doc, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCanonical measures RFC 8785 encoding of the read documents
// (MB/s of the input document).
func BenchmarkCanonical(b *testing.B) {
	for _, s := range benchSizes {
		doc := observationDoc(b, s.size)
		v, err := evidence.Read(doc)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := evidence.Canonical(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestObservationDocSize(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds an 8 MiB document")
	}
	for _, s := range benchSizes {
		doc := observationDoc(t, s.size)
		if len(doc) > s.size || len(doc) < s.size-4096 {
			t.Errorf("%s document is %d bytes", s.name, len(doc))
		}
		if _, err := evidence.Read(doc); err != nil {
			t.Errorf("%s document refused: %v", s.name, err)
		}
	}
}
