package holdout

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// generated builds n challenges (three predicates each: HOLDS, EQ, LT) and
// one observation document for impl. Each challenge and each observation is
// read on its own and the document assembled in memory: at 100,000
// challenges a single document would exceed the strict reader's 8 MiB limit
// (and be refused, as it should be), but the scorer's own cost is what is
// measured here.
func generated(b *testing.B, n int, impl string) ([]*Challenge, any) {
	b.Helper()
	root := "root-" + strings.Repeat("a", 64)
	nclaim := "nclaim-" + strings.Repeat("b", 64)
	chs := make([]*Challenge, 0, n)
	obs := &evidence.Object{Members: make([]evidence.Member, 0, n)}
	for i := 0; i < n; i++ {
		c, err := evidence.ReadObject([]byte(fmt.Sprintf(`{"id":"H%d","name":"generated","fixture":{"artifact":"D","root":"%s"},"recipe":[{"op":"IDENTITY"}],"predicates":[{"op":"HOLDS","path":"D.nested_claim_sem_id"},{"op":"EQ","path":"candidate.D.structure.edges","value":%d},{"op":"LT","left":"candidate.D.structure.unique_artifacts","right":"candidate.D.structure.edges"}]}`, i, root, i%7+2)))
		if err != nil {
			b.Fatal(err)
		}
		chs = append(chs, &Challenge{ID: fmt.Sprintf("H%d", i), Value: c})
		o, err := evidence.ReadObject([]byte(fmt.Sprintf(`{"baseline":{"D":{"artifact_root":"%s","nested_claim_sem_id":"%s","structure":{"edges":%d,"unique_artifacts":1}}},"candidate":{"D":{"artifact_root":"%s","nested_claim_sem_id":"%s","structure":{"edges":%d,"unique_artifacts":1},"verdict":"VERIFIED"}},"refusal_set":[],"fixture_root":"%s"}`,
			root, nclaim, i%7+2, root, nclaim, i%7+2, root)))
		if err != nil {
			b.Fatal(err)
		}
		obs.Set(fmt.Sprintf("H%d", i), o)
	}
	doc := evidence.NewObject(
		evidence.Member{Name: "type", Value: "TRVM-HOLDOUT-OBSERVATION-v1"},
		evidence.Member{Name: "implementation", Value: impl},
		evidence.Member{Name: "spec_release_id", Value: "srel-" + strings.Repeat("0", 64)},
		evidence.Member{Name: "observations", Value: obs})
	return chs, doc
}

// BenchmarkScoreInterop: validate n generated challenges, score two
// implementations' documents, then compare them (the measurement of `run
// complete` minus the adapters). Target: ≤ 1 s at 10,000, linear.
func BenchmarkScoreInterop(b *testing.B) {
	s, err := LoadSchemas(worldExperiment(b))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("challenges=%d", n), func(b *testing.B) {
			chs, a := generated(b, n, "a")
			_, c := generated(b, n, "c")
			b.ResetTimer()
			for range b.N {
				// Every iteration starts as a fresh `run complete` does:
				// no garbage of the generator or of the previous
				// iteration, and no heap pages already faulted in. Without
				// this a size measured over several iterations (1,000:
				// b.N = 5) reused the pages of the one before, while a
				// size measured once (10,000: b.N = 1) paid for its own,
				// and the two were compared as one curve.
				b.StopTimer()
				debug.FreeOSMemory()
				b.StartTimer()
				sc, err := NewScorer(s, chs)
				if err != nil {
					b.Fatal(err)
				}
				for _, r := range sc.ScoreAll([]Document{{"a", a}, {"c", c}}, "") {
					if r.Err != nil || r.Report.Pass != 3*n {
						b.Fatalf("%v %v", r.Report, r.Err)
					}
				}
				r, err := CompareAll([]Document{{"a", a}, {"c", c}})
				if err != nil || r.Findings != 0 {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInterop is the comparison alone.
func BenchmarkInterop(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("challenges=%d", n), func(b *testing.B) {
			_, a := generated(b, n, "a")
			_, c := generated(b, n, "c")
			runtime.GC() // the generator's garbage is not the scorer's cost
			b.ResetTimer()
			for range b.N {
				if fs := Compare(a, c); len(fs) != 0 {
					b.Fatal(fs)
				}
			}
		})
	}
}
