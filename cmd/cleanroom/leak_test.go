package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// leakWorld is the synthetic world whose challenge H2 is renamed R2 (an id
// the challenge-shape rule's ^H[0-9]+$ does not know), with a reformatted
// copy of R2 (re-indented, members reordered, name and note dropped) placed
// in the blind package at docs/spec/proof-wire/notes/r2.json.
func leakWorld(t *testing.T) (world, pkg, holdout, copyRel string) {
	t.Helper()
	world = filepath.Join(t.TempDir(), "world")
	if err := os.CopyFS(world, os.DirFS(filepath.Join(testshared.RepoRoot(t), "testdata", "world"))); err != nil {
		t.Fatal(err)
	}
	holdout = filepath.Join(world, "governance", "holdout")
	old := filepath.Join(holdout, "H2-reference-set-permutation.json")
	b, err := os.ReadFile(old)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(s, from, to string) string {
		t.Helper()
		if !strings.Contains(s, from) {
			t.Fatalf("%q not found", from)
		}
		return strings.Replace(s, from, to, 1)
	}
	if err := os.Remove(old); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(holdout, "R2-reference-set-permutation.json"), []byte(edit(string(b), `"id":"H2"`, `"id":"R2"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	ib, err := os.ReadFile(filepath.Join(holdout, "INDEX.json"))
	if err != nil {
		t.Fatal(err)
	}
	idx := edit(string(ib), `"file":"H2-reference-set-permutation.json","id":"H2"`, `"file":"R2-reference-set-permutation.json","id":"R2"`)
	if err := os.WriteFile(filepath.Join(holdout, "INDEX.json"), []byte(idx), 0o644); err != nil {
		t.Fatal(err)
	}
	// The copy, written by hand from the committed file (same values,
	// another layout and member order).
	copyRel = "notes/r2.json"
	pkg = filepath.Join(world, "docs", "spec", "proof-wire")
	cp := `{
  "predicates": [
    { "path": "D.nested_claim_sem_id", "op": "HOLDS" },
    { "path": "D.artifact_root", "op": "MOVES" },
    { "value": "VERIFIED", "path": "D.verdict", "op": "VERDICT_EQ" }
  ],
  "recipe": [ { "path": "artifact.references", "op": "REVERSE" } ],
  "fixture": { "root": "root-b1995c9348d29993729d9d8bef44874a579b08fa9a88647853da4dfd7fafc04d", "artifact": "D" },
  "id": "R2"
}
`
	if err := os.MkdirAll(filepath.Join(pkg, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, filepath.FromSlash(copyRel)), []byte(cp), 0o644); err != nil {
		t.Fatal(err)
	}
	return world, pkg, holdout, copyRel
}

// The tests the issue asks for: a reformatted copy of the committed
// challenge R2 is refused at release issue --holdout (before anything is
// archived) and at run pin, each naming the challenge and the file.
func TestLeakOfNonHChallengeRefused(t *testing.T) {
	t.Parallel()
	world, pkg, holdout, copyRel := leakWorld(t)
	issue := []string{"release", "issue", pkg, "--spec-revision", "1", "--experiment-revision", "1", "--corpus-revision", "1", "--holdout", holdout}
	code, out, errs := runCLI(t, issue...)
	if code != 1 || !strings.Contains(errs, "package leaks the holdout") || !strings.Contains(errs, "leak: carries a committed holdout challenge") ||
		!strings.Contains(errs, `"R2"`) || !strings.Contains(errs, copyRel) {
		t.Fatalf("release issue --holdout: exit %d, want 1 naming %q, challenge R2 and %s\n%s%s", code, "package leaks the holdout", copyRel, out, errs)
	}
	if _, err := os.Stat(filepath.Join(pkg, experiment.ReleaseFile)); !os.IsNotExist(err) {
		t.Errorf("a refused issue wrote %s: %v", experiment.ReleaseFile, err)
	}
	if _, err := os.Stat(filepath.Join(pkg, experiment.ReleasesDir)); !os.IsNotExist(err) {
		t.Errorf("a refused issue archived a release: %v", err)
	}

	// A release issued without the check (an earlier cleanroom: the same
	// computation, written as IssueRelease writes it) is refused at pin.
	r, err := experiment.BuildRelease(pkg, experiment.IssueOptions{SpecRevision: 1, ExperimentRevision: 1, PublicCorpusRevision: 1, HoldoutDir: holdout})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(pkg, experiment.ReleasesDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(pkg, experiment.ReleaseFile), experiment.ArchivePath(pkg, r.SpecReleaseID)} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs = runCLI(t, "run", "--world", world, "pin", "--reference", filepath.Join(world, "governance", "reference-adapter.json"))
	if code != 1 || !strings.Contains(errs, "leak: carries a committed holdout challenge") || !strings.Contains(errs, `"R2"`) ||
		!strings.Contains(errs, "docs/spec/proof-wire/"+copyRel) {
		t.Fatalf("run pin: exit %d, want 1 naming %q, challenge R2 and %s\n%s%s", code, "leak: carries a committed holdout challenge", copyRel, out, errs)
	}
	if _, err := os.Stat(filepath.Join(world, "governance", "blind-run.json")); !os.IsNotExist(err) {
		t.Errorf("a refused pin wrote a record: %v", err)
	}
}

// release issue without --holdout while the world's governance/holdout
// exists is refused by rule; --no-holdout commits "absent" on purpose; the
// two flags together are unusable.
func TestReleaseIssueHoldoutOmitted(t *testing.T) {
	t.Parallel()
	world := filepath.Join(t.TempDir(), "world")
	if err := os.CopyFS(world, os.DirFS(filepath.Join(testshared.RepoRoot(t), "testdata", "world"))); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(world, "docs", "spec", "proof-wire")
	base := []string{"release", "issue", pkg, "--spec-revision", "1", "--experiment-revision", "1", "--corpus-revision", "1"}
	code, out, errs := runCLI(t, base...)
	if code != 1 || !strings.Contains(errs, "the world's holdout exists and is not committed") || !strings.Contains(errs, "--no-holdout") {
		t.Fatalf("issue without --holdout: exit %d, want 1 %q\n%s%s", code, "the world's holdout exists and is not committed", out, errs)
	}
	if _, err := os.Stat(filepath.Join(pkg, experiment.ReleaseFile)); !os.IsNotExist(err) {
		t.Errorf("a refused issue wrote %s: %v", experiment.ReleaseFile, err)
	}
	if code, out, errs := runCLI(t, append(base, "--no-holdout", "--holdout", filepath.Join(world, "governance", "holdout"))...); code != 2 {
		t.Errorf("--holdout with --no-holdout: exit %d, want 2\n%s%s", code, out, errs)
	}
	if code, out, errs := runCLI(t, append(base, "--no-holdout")...); code != 0 {
		t.Fatalf("--no-holdout: exit %d\n%s%s", code, out, errs)
	}
	rel, err := experiment.ReadRelease(filepath.Join(pkg, experiment.ReleaseFile))
	if err != nil {
		t.Fatal(err)
	}
	if rel.HoldoutCommitment != "absent" {
		t.Errorf("--no-holdout committed %q, want \"absent\"", rel.HoldoutCommitment)
	}
}
