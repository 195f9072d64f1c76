package experiment

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// The revision-2 release against the release the run was pinned to
// (TRVM-FORMATS §1, §3.6, §3.7): exactly the spec surface moved — two spec
// files changed, the spec revision and digest, and so srel — and nothing
// else. Values read off the two SPEC-RELEASE.json files and recomputed with
// sha256sum/python over world-rev2's spec files, never with this code.
func TestConformanceRev2Diff(t *testing.T) {
	t.Parallel()
	a, err := ReadRelease(filepath.Join(worldPkg(t, "world"), ReleaseFile))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadRelease(filepath.Join(worldPkg(t, "world-rev2"), ReleaseFile))
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Field: "/spec_revision", Plane: PlaneDeclared, Core: true, Old: "1", New: "2"},
		{Field: "/spec_digest", Plane: PlaneDerived, Core: true, Old: wantSpec, New: wantSpecRev2},
		{Field: "/spec_files[TRVM-NESTED-COMPOSITION-v2.md]", Plane: PlaneDerived,
			Old: "8160664abe1db19d6b86dcbe43692fc32a06828d57a8b9569e8998f0f6c35f71",
			New: "7b6f0ea5d704bcfebb77190270e76778c4ececb9b9bc18c296274336dbeb2895"},
		{Field: "/spec_files[schema/nested-composition-v2.json]", Plane: PlaneDerived,
			Old: "5935b455584a138aa2d879a9b502229baa499ff5d13330e38140007368cbfe82",
			New: "b18ea4c3158346b291082294126a6bc35443803fda4f503ff3d9606a0ebab87a"},
		{Field: "/spec_release_id", Plane: PlaneDerived, Old: wantSrel, New: wantSrelRev2},
	}
	if got := DiffReleases(a, b); !slices.Equal(got, want) {
		t.Errorf("diff world → world-rev2:\n got %+v\nwant %+v", got, want)
	}
	// The reverse diff names the same fields with the sides swapped.
	back := DiffReleases(b, a)
	if len(back) != len(want) {
		t.Fatalf("reverse diff %+v", back)
	}
	for i, c := range back {
		if c.Field != want[i].Field || c.Old != want[i].New || c.New != want[i].Old || c.Core != want[i].Core {
			t.Errorf("reverse diff [%d] = %+v, want %+v swapped", i, c, want[i])
		}
	}
}

// Every surface of the revision-2 package recomputes from its files: the
// spec digest moved to a2337b7f…, every other surface (and the holdout,
// committed relative to this package) is the world's.
func TestConformanceRev2Digests(t *testing.T) {
	t.Parallel()
	w := testshared.World(t, "world-rev2")
	pkg := worldPkg(t, "world-rev2")
	rec, err := ReadRelease(filepath.Join(pkg, ReleaseFile))
	if err != nil {
		t.Fatal(err)
	}
	c, err := RecomputeAgainst(pkg, filepath.Join(w, "governance", "holdout"), rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []struct{ name, got, want string }{
		{"spec_digest", c.Spec.Digest, wantSpecRev2},
		{"experiment_digest", c.Experiment.Digest, wantExp},
		{"public_corpus_digest", c.PublicCorpus.Digest, wantCorpus},
		{"jcs_upstream.digest", c.JCS.Digest, wantJCS},
		{"holdout_commitment", c.HoldoutCommitment, wantHoldout},
	} {
		if ch.got != ch.want {
			t.Errorf("%s = %s, want %s", ch.name, ch.got, ch.want)
		}
	}
	if c.JCSVectors != 6 || c.HoldoutEntries != 10 || len(c.Spec.Files) != 4 {
		t.Errorf("jcs vectors %d, holdout entries %d, spec files %d; want 6, 10, 4", c.JCSVectors, c.HoldoutEntries, len(c.Spec.Files))
	}
	if rec.SpecRevision != 2 || rec.ExperimentRevision != 12 || rec.PublicCorpusRevision != 1 {
		t.Errorf("revisions %d/%d/%d, want 2/12/1", rec.SpecRevision, rec.ExperimentRevision, rec.PublicCorpusRevision)
	}
}

// wantSpecRev2 is world-rev2's spec_digest (recomputed independently; the
// §1 table gives only its srel, bpkg and run_id).
const wantSpecRev2 = "a2337b7f1c29bc6eaea770c93c3823da91cf1ad26921ad8adab0506599870b24"
