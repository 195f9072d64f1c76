// Package runworld builds, for tests, a run of the project's synthetic
// world (testdata/world) through the real run API, so the packages that
// read a run (report, fleet) start from the same witnessed state.
//
// It is a package of its own, not part of testshared: it imports
// experiment, whose own tests import testshared.
package runworld

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom"
	"github.com/cleanroom-dev/cleanroom/experiment"
)

// Revealed copies the synthetic world into dir (which must not exist or be
// empty), issues its release and drives it to REVEALED: pinned with the
// world's reference adapter, the candidate implementer/tally-candidate
// frozen, revealed. It returns the world and its record; the record pins
// the release just issued.
func Revealed(t testing.TB, dir string) (*experiment.World, *experiment.Record) {
	t.Helper()
	return RevealedWith(t, dir, nil)
}

// RevealedWith is Revealed with edit applied to the copied world (its root
// directory) before anything is issued or pinned: a test that needs another
// candidate (one that fails a predicate) edits implementer/tally-candidate.
func RevealedWith(t testing.TB, dir string, edit func(root string)) (*experiment.World, *experiment.Record) {
	t.Helper()
	sub, err := fs.Sub(cleanroom.World, "testdata/world")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, sub); err != nil {
		t.Fatal(err)
	}
	// embed.FS keeps no mode bits; the candidate is executed.
	if err := os.Chmod(filepath.Join(dir, "implementer", "tally-candidate"), 0o755); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(dir)
	}
	w, err := experiment.OpenWorld(dir)
	if err != nil {
		t.Fatal(err)
	}
	is, err := experiment.IssueRelease(w.PackageDir(), experiment.IssueOptions{
		SpecRevision: 1, ExperimentRevision: 1, PublicCorpusRevision: 1, HoldoutDir: w.HoldoutDir()})
	if err != nil {
		t.Fatal(err)
	}
	PinFreezeReveal(t, w, "runworld")
	rec, err := w.ReadRecord()
	if err != nil {
		t.Fatal(err)
	}
	if rec.SpecReleaseID != is.ID {
		t.Fatalf("the run pins %s, the release issued is %s", rec.SpecReleaseID, is.ID)
	}
	return w, rec
}

// PinFreezeReveal starts a run of w and drives it to REVEALED: pinned with
// the world's reference adapter (governance/reference-adapter.json), the
// candidate implementer/tally-candidate as it now is frozen (recorded tool
// version toolVersion), revealed. A later run of a world whose earlier run
// ended uses it as Revealed does for the first.
func PinFreezeReveal(t testing.TB, w *experiment.World, toolVersion string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.StateDir(), "reference-adapter.json"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := experiment.ParseAdapterSpec(b, "governance/reference-adapter.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := experiment.Pin(ctx, w, experiment.PinOptions{Reference: ref}); err != nil {
		t.Fatal(err)
	}
	if _, err := experiment.Freeze(ctx, w, experiment.FreezeOptions{Implementation: "candidate",
		Files: []string{"implementer/tally-candidate"}, Binary: "implementer/tally-candidate",
		Toolchain: "node", Model: "scripted-implementer", ToolVersion: toolVersion}); err != nil {
		t.Fatal(err)
	}
	if _, err := experiment.Reveal(ctx, w, experiment.RevealOptions{}); err != nil {
		t.Fatal(err)
	}
}
