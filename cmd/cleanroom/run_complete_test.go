package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/adapter"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// The synthetic world from release to COMPLETE through the CLI, adapters
// run without the sandbox (--no-sandbox; the sandboxed path is tested in
// package adapter).
func TestRunCompleteCLI(t *testing.T) {
	t.Parallel()
	if _, err := adapter.ResolveInterpreter("node"); err != nil {
		t.Skipf("node is not installed: %v", err)
	}
	w, must := cliWorld(t)
	must(0, "release", "issue", filepath.Join(w, "docs/spec/proof-wire"), "--spec-revision", "1", "--experiment-revision", "1",
		"--corpus-revision", "1", "--holdout", filepath.Join(w, "governance/holdout"))
	must(0, "run", "pin", "--world", w, "--reference", filepath.Join(w, "governance/reference-adapter.json"))
	if err := os.MkdirAll(filepath.Join(w, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(w, "implementer/tally-candidate"))
	if err := os.WriteFile(filepath.Join(w, "workspace/tally-candidate"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	must(0, "run", "freeze", "--world", w, "--implementation", "candidate", "--files", "workspace/tally-candidate",
		"--binary", "workspace/tally-candidate", "--toolchain", "node", "--model", "scripted", "--tool-version", "test")
	out := must(1, "run", "complete", "--world", w, "--no-sandbox")
	if !strings.Contains(out, "NOT_RUN") {
		t.Errorf("before reveal the candidate must not run:\n%s", out)
	}
	must(0, "run", "reveal", "--world", w)
	out = must(1, "run", "complete", "--world", w, "--no-sandbox")
	ids := regexp.MustCompile(`find-[0-9a-f]{64}`).FindAllString(out, -1)
	if len(ids) != 2 || !strings.Contains(out, "H4.candidate") || !strings.Contains(out, "NOT SANDBOXED") || !strings.Contains(out, "unclassified findings block completion") {
		t.Fatalf("complete with findings:\n%s", out)
	}
	// Each refusal names its rule.
	refused := func(want int, rule string, args ...string) {
		t.Helper()
		if out := must(want, args...); !strings.Contains(out, rule) {
			t.Errorf("%v: output lacks the rule %q:\n%s", args, rule, out)
		}
	}
	// For scripts: only the ids of the unclassified findings, one a line.
	if got, want := must(0, "run", "finding", "list", "--world", w, "--unclassified", "-q"), ids[0]+"\n"+ids[1]+"\n"; got != want {
		t.Errorf("finding list --unclassified -q printed %q, want %q", got, want)
	}
	if out := must(0, "run", "finding", "list", "--world", w); !strings.Contains(out, "opened in run brun-") {
		t.Errorf("finding list does not say which run opened each finding:\n%s", out)
	}
	refused(2, "not one of the world's finding classes", "run", "finding", "classify", "--world", w, ids[0], "--class", "MAYBE_A_BUG", "--ruling", "x")
	refused(2, "no such finding", "run", "finding", "classify", "--world", w, "find-000000000000", "--class", "SPEC_GAP", "--ruling", "x")
	for _, id := range ids {
		must(0, "run", "finding", "classify", "--world", w, id, "--class", "SPEC_GAP", "--ruling", "the grammar does not say")
	}
	refused(1, "finding already classified", "run", "finding", "classify", "--world", w, ids[0], "--class", "GO_PRODUCER_DEFECT", "--ruling", "again")
	refused(2, "not one of the world's finding classes", "run", "question", "add", "--world", w, "--revision", "1", "--question", "q", "--why", "w", "--ruling", "r", "--class", "NONE")
	must(0, "run", "question", "add", "--world", w, "--revision", "1", "--question", "q", "--why", "w", "--ruling", "r", "--class", "SPEC_GAP")
	out = must(0, "run", "complete", "--world", w, "--no-sandbox")
	if !strings.Contains(out, "COMPLETE brun-") {
		t.Fatalf("complete:\n%s", out)
	}
	out = must(0, "run", "verify", "--world", w)
	if !strings.Contains(out, "RESULT verifies and replays") || !strings.Contains(out, "✓ archived measurements re-digest") {
		t.Errorf("verify:\n%s", out)
	}
	if got := must(0, "run", "finding", "list", "--world", w, "--unclassified", "-q"); got != "" {
		t.Errorf("finding list --unclassified -q after classifying everything printed %q", got)
	}
	// A finished run is not measured or completed again, and says so —
	// not that its RESULT could not be replayed, while run verify says
	// VERIFIED.
	for _, sub := range []string{"measure", "complete"} {
		out = must(1, "run", sub, "--world", w, "--no-sandbox")
		if !strings.Contains(out, "the run is finished") || !strings.Contains(out, "is COMPLETE") || strings.Contains(out, "not replayed") {
			t.Errorf("run %s of a COMPLETE run:\n%s", sub, out)
		}
	}
	// Editing a register entry breaks the chain: the COMPLETE run no longer
	// verifies.
	p := filepath.Join(w, "governance/findings/000001.json")
	eb, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(eb), "H4.candidate", "H4.candidatX", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	must(1, "run", "verify", "--world", w)
}

// A candidate that fails one predicate: run measure names it with the
// expected and the observed value and says where the measurement is
// archived; after the abort the measurement is not repeated, and run
// verify re-digests the archive.
func TestRunMeasureNamesFailingPredicate(t *testing.T) {
	t.Parallel()
	if _, err := adapter.ResolveInterpreter("node"); err != nil {
		t.Skipf("node is not installed: %v", err)
	}
	w, must := cliWorld(t)
	// H3's candidate C2 has 4 edges (H3 predicate 2); this candidate says 3.
	b, err := os.ReadFile(filepath.Join(w, "implementer/tally-candidate"))
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "const doc = {", "if (observations.H3) observations.H3.candidate.C2.structure.edges = 3;\nconst doc = {", 1))
	if err := os.MkdirAll(filepath.Join(w, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w, "workspace/tally-candidate"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	must(0, "release", "issue", filepath.Join(w, "docs/spec/proof-wire"), "--spec-revision", "1", "--experiment-revision", "1",
		"--corpus-revision", "1", "--holdout", filepath.Join(w, "governance/holdout"))
	must(0, "run", "pin", "--world", w, "--reference", filepath.Join(w, "governance/reference-adapter.json"))
	must(0, "run", "freeze", "--world", w, "--implementation", "candidate", "--files", "workspace/tally-candidate",
		"--binary", "workspace/tally-candidate", "--toolchain", "node", "--model", "scripted", "--tool-version", "test")
	must(0, "run", "reveal", "--world", w)
	out := must(0, "run", "measure", "--world", w, "--no-sandbox")
	for _, want := range []string{
		"20 predicates: 19 pass, 1 fail, 0 unresolved, 0 missing → FAIL",
		"  ✗ candidate H3#2 EQ candidate.C2.structure.edges: expected 4, observed 3\n",
		"logged     governance/measurements/000001.json (observations and scored results archived in governance/evidence/)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("measure output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "✗ "); n != 1 {
		t.Errorf("measure names %d predicates, the candidate fails one:\n%s", n, out)
	}
	must(0, "run", "abort", "--world", w, "--reason", "the candidate miscounts edges")
	if out := must(1, "run", "measure", "--world", w, "--no-sandbox"); !strings.Contains(out, "is ABORTED") {
		t.Errorf("measure of an ABORTED run:\n%s", out)
	}
	if out := must(0, "run", "verify", "--world", w); !strings.Contains(out, "✓ archived measurements re-digest") {
		t.Errorf("verify of the aborted run:\n%s", out)
	}
	md := filepath.Join(t.TempDir(), "r.md")
	must(0, "run", "report", "--world", w, "--md", md)
	if rb, err := os.ReadFile(md); err != nil || !strings.Contains(string(rb), "ABORTED after measurement") || !strings.Contains(string(rb), "fail, observed `3`") {
		t.Errorf("report of the aborted run (%v):\n%s", err, rb)
	}
}

// cliWorld copies the synthetic world for a CLI test and returns it with
// must, which runs the CLI and fails the test unless it exits want.
func cliWorld(t *testing.T) (string, func(want int, args ...string) string) {
	w := filepath.Join(t.TempDir(), "world")
	if err := os.CopyFS(w, os.DirFS(filepath.Join(testshared.RepoRoot(t), "testdata", "world"))); err != nil {
		t.Fatal(err)
	}
	return w, mustExit(t)
}

// mustExit returns a runner of command lines that fails the test unless
// the exit code is want, and returns stdout and stderr together.
func mustExit(t *testing.T) func(want int, args ...string) string {
	return func(want int, args ...string) string {
		t.Helper()
		code, out, errs := runCLI(t, args...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, out, errs)
		}
		return out + errs
	}
}
