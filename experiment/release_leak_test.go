package experiment

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// IssueRelease with a holdout refuses a package carrying one of its
// challenges before anything is written; both rules are errors.Is-testable.
func TestIssueRefusesCommittedChallenge(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "world")
	runCopyTree(t, filepath.Join(testshared.RepoRoot(t), "testdata", "world"), dir)
	w, err := OpenWorld(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(w.HoldoutDir(), "H5-policy-weakening.json"))
	if err != nil {
		t.Fatal(err)
	}
	// Re-spaced into a Markdown note: not byte-identical, not .json.
	note := "# Notes\n\n```\n" + strings.ReplaceAll(string(b), ",", ",\n  ") + "\n```\n"
	if err := os.WriteFile(filepath.Join(w.PackageDir(), "NOTES.md"), []byte(note), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = IssueRelease(w.PackageDir(), IssueOptions{SpecRevision: 1, ExperimentRevision: 1, PublicCorpusRevision: 1, HoldoutDir: w.HoldoutDir()})
	if !errors.Is(err, errPackageLeak) || !strings.Contains(err.Error(), "leak: carries a committed holdout challenge") || !strings.Contains(err.Error(), `"H5"`) || !strings.Contains(err.Error(), "NOTES.md") {
		t.Fatalf("%v, want %q and %q naming H5 and NOTES.md", err, errPackageLeak, "leak: carries a committed holdout challenge")
	}
	for _, p := range []string{ReleaseFile, ReleasesDir} {
		if _, err := os.Stat(filepath.Join(w.PackageDir(), p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused issue left %s: %v", p, err)
		}
	}
}

// In a world whose governance/holdout exists, a release must commit it or
// say it is not meant: issuing without either is errHoldoutNotCommitted,
// naming the holdout, with nothing written; NoHoldout commits "absent";
// both at once contradict each other and write nothing.
func TestIssueCommitsTheWorldsHoldout(t *testing.T) {
	w := newWorld(t)
	for _, p := range []string{ReleaseFile, ReleasesDir} {
		if err := os.RemoveAll(filepath.Join(w.PackageDir(), p)); err != nil {
			t.Fatal(err)
		}
	}
	base := IssueOptions{SpecRevision: 1, ExperimentRevision: 1, PublicCorpusRevision: 1}
	nothingWritten := func(what string) {
		t.Helper()
		for _, p := range []string{ReleaseFile, ReleasesDir} {
			if _, err := os.Stat(filepath.Join(w.PackageDir(), p)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left %s: %v", what, p, err)
			}
		}
	}
	_, err := IssueRelease(w.PackageDir(), base)
	if !errors.Is(err, errHoldoutNotCommitted) || !strings.Contains(err.Error(), filepath.Join("governance", "holdout")) {
		t.Fatalf("issue without the holdout: %v, want %q naming governance/holdout", err, errHoldoutNotCommitted)
	}
	nothingWritten("a refused issue")
	both := base
	both.HoldoutDir, both.NoHoldout = w.HoldoutDir(), true
	if _, err := IssueRelease(w.PackageDir(), both); err == nil || !strings.Contains(err.Error(), "contradict") {
		t.Errorf("HoldoutDir and NoHoldout: %v, want a contradiction", err)
	}
	nothingWritten("a contradictory issue")
	absent := base
	absent.NoHoldout = true
	is, err := IssueRelease(w.PackageDir(), absent)
	if err != nil {
		t.Fatalf("NoHoldout: %v", err)
	}
	if is.Release.HoldoutCommitment != "absent" || is.Release.HoldoutEntries != 0 {
		t.Errorf("NoHoldout committed %q over %d entries, want \"absent\" over 0", is.Release.HoldoutCommitment, is.Release.HoldoutEntries)
	}
}
