package experiment

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// Identities published in TRVM-FORMATS §1 and §3 (computed by the reference).
const (
	wantSrel     = "srel-4844df97e124474e30f100cbe9f8422a99213ac9288f8fcc149086a9a434c952"
	wantSrelRev2 = "srel-f5720a3d0ee9dbb95670c9cd66672bf70c7dbe353df0c114a18c8a982f203629"
	wantSpec     = "2b4e6cc845f83f4bdfef2f7484ca47eb29f2f55eeee570513a132c6f5575fcff"
	wantExp      = "c130cf7fef95ccffa88843ae41ca5a8e855aa68977749b08a6ee7be6017c2824"
	wantCorpus   = "34a4097377605f1e12460cc91943e25cc399c19238d6309579516c1e3a89fc17"
	wantJCS      = "ce13b5a0325a11c8caa785ad1f959820eef2d9374e8253aa29b50f6232544940"
	wantHoldout  = "86d437fcbd9efee21c5cf27e25564d478592731ae8d2a9e2b9f472a592630071"
	wantPreimage = `TRVM-PROOF-WIRE-SPEC-RELEASE-v1|{"experiment_digest":"c130cf7fef95ccffa88843ae41ca5a8e855aa68977749b08a6ee7be6017c2824","experiment_revision":12,"holdout_commitment":"86d437fcbd9efee21c5cf27e25564d478592731ae8d2a9e2b9f472a592630071","holdout_entries":10,"jcs_upstream":{"commit":"19d51d7fe467d4706a3ff08adf8a748f29fc21e0","digest":"ce13b5a0325a11c8caa785ad1f959820eef2d9374e8253aa29b50f6232544940","repository":"github.com/cyberphone/json-canonicalization","vectors":6},"protocols":{"nested_composition":"TRVM-NESTED-COMPOSITION-v2","verified_claim":"TRVM-VERIFIED-CLAIM-v1","wire":"TRVM-PROOF-WIRE-v1"},"public_corpus_digest":"34a4097377605f1e12460cc91943e25cc399c19238d6309579516c1e3a89fc17","public_corpus_revision":1,"release_type":"TRVM-PROOF-WIRE-SPEC-RELEASE-v1","spec_digest":"2b4e6cc845f83f4bdfef2f7484ca47eb29f2f55eeee570513a132c6f5575fcff","spec_revision":1}`
)

// The .mjs instrument files the shared worlds leave out (their sha256 stays
// in experiment_files).
var wantMissingMJS = []string{
	"experiment/evidence.mjs",
	"experiment/holdout_runner.mjs",
	"experiment/holdout_schema.mjs",
	"experiment/holdout_score_core.mjs",
	"experiment/run_state.mjs",
}

func worldPkg(t testing.TB, world string) string {
	return filepath.Join(testshared.World(t, world), "docs", "spec", "proof-wire")
}

func TestConformanceSrel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		world, want string
	}{
		{"world", wantSrel},
		{"world-rev2", wantSrelRev2},
	}
	for _, c := range cases {
		t.Run(c.world, func(t *testing.T) {
			r, err := ReadRelease(filepath.Join(worldPkg(t, c.world), ReleaseFile))
			if err != nil {
				t.Fatal(err)
			}
			id, err := r.ID()
			if err != nil {
				t.Fatal(err)
			}
			if id != c.want {
				t.Errorf("srel = %s, want %s", id, c.want)
			}
			if r.SpecReleaseID != c.want {
				t.Errorf("recorded spec_release_id = %s, want %s", r.SpecReleaseID, c.want)
			}
			// The record is in the reference byte form: writing what was
			// read reproduces the file.
			b, err := r.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, r.Raw) {
				t.Errorf("re-rendered record differs from the file at byte %d", firstDiff(b, r.Raw))
			}
		})
	}
}

func TestConformancePreimage(t *testing.T) {
	t.Parallel()
	r, err := ReadRelease(filepath.Join(worldPkg(t, "world"), ReleaseFile))
	if err != nil {
		t.Fatal(err)
	}
	pre, err := r.Preimage()
	if err != nil {
		t.Fatal(err)
	}
	if string(pre) != wantPreimage {
		t.Errorf("preimage differs at byte %d:\n got %s\nwant %s", firstDiff(pre, []byte(wantPreimage)), pre, wantPreimage)
	}
	if got := "srel-" + pkgwalk.SHA256Hex([]byte(wantPreimage)); got != wantSrel {
		t.Errorf("sha256 of the published preimage = %s, want %s", got, wantSrel)
	}
}

// Each archived release has the identity its file name says, and its
// recorded lists digest to its recorded digests.
func TestConformanceArchivedReleases(t *testing.T) {
	t.Parallel()
	for _, world := range []string{"world", "world-rev2"} {
		dir := filepath.Join(worldPkg(t, world), ReleasesDir)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"world": 16, "world-rev2": 17}[world]
		if len(ents) != want {
			t.Errorf("%s: %d archived releases, want %d", world, len(ents), want)
		}
		for _, e := range ents {
			t.Run(world+"/"+e.Name(), func(t *testing.T) {
				r, err := ReadRelease(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				id, err := r.ID()
				if err != nil {
					t.Fatal(err)
				}
				if id+".json" != e.Name() {
					t.Errorf("srel %s, file named %s", id, e.Name())
				}
				if id != r.SpecReleaseID {
					t.Errorf("srel %s, recorded %s", id, r.SpecReleaseID)
				}
				if d := pkgwalk.PathListDigest(r.SpecFiles); d != r.SpecDigest {
					t.Errorf("spec_files digest %s, recorded spec_digest %s", d, r.SpecDigest)
				}
				if d := pkgwalk.PathListDigest(r.ExperimentFiles); d != r.ExperimentDigest {
					t.Errorf("experiment_files digest %s, recorded experiment_digest %s", d, r.ExperimentDigest)
				}
				if b, _ := r.Bytes(); !bytes.Equal(b, r.Raw) {
					t.Errorf("not in the reference byte form")
				}
			})
		}
	}
}

func TestConformanceDigests(t *testing.T) {
	t.Parallel()
	world := testshared.World(t, "world")
	pkg := worldPkg(t, "world")
	rec, err := ReadRelease(filepath.Join(pkg, ReleaseFile))
	if err != nil {
		t.Fatal(err)
	}
	c, err := RecomputeAgainst(pkg, filepath.Join(world, "governance", "holdout"), rec)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name, got, want string
	}{
		{"spec_digest", c.Spec.Digest, wantSpec},
		{"experiment_digest", c.Experiment.Digest, wantExp},
		{"public_corpus_digest", c.PublicCorpus.Digest, wantCorpus},
		{"jcs_upstream.digest", c.JCS.Digest, wantJCS},
		{"holdout_commitment", c.HoldoutCommitment, wantHoldout},
		{"protocols.verified_claim", c.Protocols.VerifiedClaim, "TRVM-VERIFIED-CLAIM-v1"},
		{"protocols.nested_composition", c.Protocols.NestedComposition, "TRVM-NESTED-COMPOSITION-v2"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %s, want %s", ch.name, ch.got, ch.want)
		}
	}
	if c.JCSVectors != 6 || c.HoldoutEntries != 10 {
		t.Errorf("jcs vectors %d (want 6), holdout entries %d (want 10)", c.JCSVectors, c.HoldoutEntries)
	}
	if len(c.Spec.Files) != 4 || len(c.Experiment.Files) != 15 || len(c.PublicCorpus.Files) != 12 || len(c.JCS.Files) != 16 {
		t.Errorf("file counts spec %d exp %d corpus %d jcs %d, want 4 15 12 16",
			len(c.Spec.Files), len(c.Experiment.Files), len(c.PublicCorpus.Files), len(c.JCS.Files))
	}
	if !slices.Equal(c.Experiment.Missing, wantMissingMJS) || len(c.Spec.Missing)+len(c.PublicCorpus.Missing)+len(c.JCS.Missing) != 0 {
		t.Errorf("missing = %q, want exactly %q", c.Missing(), wantMissingMJS)
	}
	// Without the recorded list the experiment digest cannot recompute:
	// the five absent files are simply not there.
	bare, err := RecomputeRelease(pkg, "")
	if err != nil {
		t.Fatal(err)
	}
	if bare.Experiment.Digest == wantExp || len(bare.Experiment.Files) != 10 {
		t.Errorf("disk-only experiment surface: %d files, digest %s", len(bare.Experiment.Files), bare.Experiment.Digest)
	}
}

func TestConformanceHoldoutCommitment(t *testing.T) {
	t.Parallel()
	for _, world := range []string{"world", "world-rev2"} {
		w := testshared.World(t, world)
		got, n, err := HoldoutCommitment(filepath.Join(w, "docs", "spec", "proof-wire"), filepath.Join(w, "governance", "holdout"))
		if err != nil {
			t.Fatal(err)
		}
		if got != wantHoldout || n != 10 {
			t.Errorf("%s: commitment %s / %d, want %s / 10", world, got, n, wantHoldout)
		}
	}
}

func TestConformanceVerify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		world, srel string
	}{{"world", wantSrel}, {"world-rev2", wantSrelRev2}}
	for _, c := range cases {
		t.Run(c.world, func(t *testing.T) {
			w := testshared.World(t, c.world)
			rep, err := VerifyRelease(filepath.Join(w, "docs", "spec", "proof-wire"), filepath.Join(w, "governance", "holdout"))
			if err != nil {
				t.Fatal(err)
			}
			if rep.SpecRelID != c.srel {
				t.Errorf("srel %s, want %s", rep.SpecRelID, c.srel)
			}
			// Every check passes except files_present, which names exactly
			// the five .mjs files.
			if got := rep.Failed(); !slices.Equal(got, []string{"files_present"}) {
				for _, ch := range rep.Checks {
					t.Logf("%+v", ch)
				}
				t.Errorf("failed checks %q, want only files_present", got)
			}
			if !slices.Equal(rep.Missing, wantMissingMJS) {
				t.Errorf("missing %q, want %q", rep.Missing, wantMissingMJS)
			}
			if rep.OK || !rep.OnlyMissingFiles() {
				t.Errorf("OK=%v OnlyMissingFiles=%v, want false/true", rep.OK, rep.OnlyMissingFiles())
			}
		})
	}
}

// Two CAS leaves removed from a copy of the public corpus: the manifest's
// recorded sha256 stands in for them, the digest still recomputes, and
// verify names exactly those two files.
func TestConformanceMissingCASLeaves(t *testing.T) {
	t.Parallel()
	w := testshared.World(t, "world")
	dst := t.TempDir()
	copyTree(t, filepath.Join(w, "docs", "spec", "proof-wire"), dst)
	gone := []string{
		"vectors/public/cas/root-377d77c33137bdeb7ccd366b14ec13d6eead55e662524d5f8e2ee92de9895af4.json",
		"vectors/public/cas/root-b5b33778522764c7af9f30b22f3d7e1e3900064a6d2c0ab99d8b6d5aba39b65b.json",
	}
	for _, g := range gone {
		if err := os.Remove(filepath.Join(dst, g)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := VerifyRelease(dst, "")
	if err != nil {
		t.Fatal(err)
	}
	var corpus Check
	for _, ch := range rep.Checks {
		if ch.Name == "public_corpus_digest" {
			corpus = ch
		}
	}
	if !corpus.OK || corpus.Recomputed != wantCorpus || !slices.Equal(corpus.Missing, gone) {
		t.Errorf("public_corpus_digest check %+v, want ok with missing %q", corpus, gone)
	}
	want := sortedPaths(append(slices.Clone(gone), wantMissingMJS...))
	if !slices.Equal(rep.Missing, want) {
		t.Errorf("missing %q, want %q", rep.Missing, want)
	}
}

// copyTree copies the regular files of src into dst (tests only; the shared
// folder is read-only and must never be written).
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}

// Issuing on a copy of the reference world with the reference's labels and
// note reproduces the reference record byte for byte, except where the
// absent .mjs files must differ: the experiment surface (measured from the
// bytes present) and so srel.
func TestConformanceIssueReproducesReference(t *testing.T) {
	t.Parallel()
	w := testshared.World(t, "world")
	ref, err := ReadRelease(filepath.Join(worldPkg(t, "world"), ReleaseFile))
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	copyTree(t, w, dst)
	pkg := filepath.Join(dst, "docs", "spec", "proof-wire")
	is, err := IssueRelease(pkg, IssueOptions{
		SpecRevision: ref.SpecRevision, ExperimentRevision: ref.ExperimentRevision,
		PublicCorpusRevision: ref.PublicCorpusRevision, Note: ref.Note,
		HoldoutDir: filepath.Join(dst, "governance", "holdout"),
	})
	if err != nil {
		t.Fatal(err)
	}
	got := is.Release
	if len(got.ExperimentFiles) != 10 || got.ExperimentDigest == ref.ExperimentDigest || got.SpecReleaseID == wantSrel {
		t.Fatalf("experiment surface measured %d files (%s), srel %s", len(got.ExperimentFiles), got.ExperimentDigest, got.SpecReleaseID)
	}
	want := *ref
	want.ExperimentFiles, want.ExperimentDigest, want.SpecReleaseID = got.ExperimentFiles, got.ExperimentDigest, got.SpecReleaseID
	wb, err := want.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wb, got.Raw) {
		t.Errorf("issued record differs from the reference (outside the experiment surface) at byte %d", firstDiff(wb, got.Raw))
	}
	// The reference's archive of srel-4844… is still there, untouched.
	if _, err := os.Stat(filepath.Join(pkg, ReleasesDir, wantSrel+".json")); err != nil {
		t.Error(err)
	}
}
