package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// copySyntheticRelease copies testdata/release/world and returns the
// package and holdout directories of the copy.
func copySyntheticRelease(t *testing.T) (pkg, holdout string) {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(testshared.RepoRoot(t), "testdata", "release", "world"))); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dst, "docs", "spec", "proof-wire"), filepath.Join(dst, "governance", "holdout")
}

func issueArgs(pkg, holdout string) []string {
	return []string{"release", "issue", pkg, "--spec-revision", "1", "--experiment-revision", "2", "--corpus-revision", "3", "--holdout", holdout}
}

func TestReleaseIssueVerifyCLI(t *testing.T) {
	t.Parallel()
	pkg, holdout := copySyntheticRelease(t)
	code, out, errs := runCLI(t, append([]string{"--json"}, issueArgs(pkg, holdout)...)...)
	if code != 0 {
		t.Fatalf("issue: exit %d: %s", code, errs)
	}
	v, err := evidence.ReadObject([]byte(out))
	if err != nil {
		t.Fatalf("issue --json output: %v", err)
	}
	idv, _ := v.Get("spec_release_id")
	id, _ := idv.(string)
	if !strings.HasPrefix(id, "srel-") {
		t.Fatalf("issue --json: no spec_release_id in %s", out)
	}
	if _, err := os.Stat(filepath.Join(pkg, "releases", id+".json")); err != nil {
		t.Errorf("archive: %v", err)
	}

	code, out, errs = runCLI(t, "release", "verify", pkg, "--holdout", holdout)
	if code != 0 || !strings.Contains(out, "✓ spec_digest") || !strings.Contains(out, "\nVERIFIED\n") {
		t.Errorf("verify: exit %d\n%s%s", code, out, errs)
	}

	code, out, _ = runCLI(t, "release", "id", filepath.Join(pkg, "SPEC-RELEASE.json"))
	if code != 0 || out != id+"\n" {
		t.Errorf("id: exit %d, %q, want %q", code, out, id)
	}

	// A spec file changed after issue: ✗ with both values, exit 1.
	p := filepath.Join(pkg, "SYNTHETIC-WIRE-v1.md")
	if err := os.WriteFile(p, []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "release", "verify", pkg, "--holdout", holdout)
	if code != 1 || !strings.Contains(out, "✗ spec_digest") || !strings.Contains(out, "    recorded   ") ||
		!strings.Contains(out, "    recomputed ") || !strings.Contains(out, "NOT VERIFIED: spec_digest, spec_files") {
		t.Errorf("verify after change: exit %d\n%s", code, out)
	}

	// Re-issue after the change: a new srel, diff shows spec_digest moved.
	old := filepath.Join(pkg, "releases", id+".json")
	if code, _, errs := runCLI(t, issueArgs(pkg, holdout)...); code != 0 {
		t.Fatalf("re-issue: exit %d %s", code, errs)
	}
	code, out, _ = runCLI(t, "release", "diff", old, filepath.Join(pkg, "SPEC-RELEASE.json"))
	if code != 0 || !strings.Contains(out, "srel moved: "+id) || !strings.Contains(out, "/spec_digest") {
		t.Errorf("diff: exit %d\n%s", code, out)
	}
}

func TestReleaseCLIRefusals(t *testing.T) {
	t.Parallel()
	pkg, holdout := copySyntheticRelease(t)
	if code, _, errs := runCLI(t, issueArgs(pkg, holdout)...); code != 0 {
		t.Fatalf("issue: %s", errs)
	}
	rec := filepath.Join(pkg, "SPEC-RELEASE.json")
	good, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	dup := filepath.Join(t.TempDir(), "dup.json")
	if err := os.WriteFile(dup, []byte(strings.Replace(string(good), `"spec_revision": 1,`, `"spec_revision": 1, "spec_revision": 1,`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	unknown := filepath.Join(t.TempDir(), "unknown.json")
	if err := os.WriteFile(unknown, []byte(strings.Replace(string(good), `"spec_revision": 1,`, `"spec_revision": 1, "signed_off": true,`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		code    int
		message string
	}{
		{"duplicate member", []string{"release", "id", dup}, 1, "duplicate-name"},
		{"unknown member", []string{"release", "id", unknown}, 1, `"/signed_off": unknown member`},
		{"missing revision flag", []string{"release", "issue", pkg, "--spec-revision", "1", "--experiment-revision", "1"}, 2, "--corpus-revision is required"},
		{"zero revision", []string{"release", "issue", pkg, "--spec-revision", "0", "--experiment-revision", "1", "--corpus-revision", "1"}, 2, "positive integers"},
		{"no such package", []string{"release", "verify", filepath.Join(pkg, "nope")}, 2, "no such file"},
		{"no such record", []string{"release", "id", filepath.Join(pkg, "nope.json")}, 2, "no such file"},
		{"wrong argument count", []string{"release", "diff", rec}, 2, "accepts 2 arg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := runCLI(t, c.args...)
			if code != c.code || !strings.Contains(errs, c.message) {
				t.Errorf("exit %d (want %d), stderr %q (want %q)", code, c.code, errs, c.message)
			}
		})
	}

	// Archive conflict: the archive edited, re-issue refused, nothing written.
	id := strings.TrimSpace(func() string { _, o, _ := runCLI(t, "release", "id", rec); return o }())
	arch := filepath.Join(pkg, "releases", id+".json")
	if err := os.WriteFile(arch, []byte(strings.Replace(string(good), `"note": "`, `"note": "edited `, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, issueArgs(pkg, holdout)...)
	if code != 1 || !strings.Contains(errs, "archive exists with different bytes") || !strings.Contains(errs, id+".json") {
		t.Errorf("archive conflict: exit %d, %q", code, errs)
	}
	if after, _ := os.ReadFile(rec); string(after) != string(good) {
		t.Error("SPEC-RELEASE.json changed by a refused issue")
	}
	// And verify reports the archive mismatch.
	code, out, _ := runCLI(t, "release", "verify", pkg, "--holdout", holdout)
	if code != 1 || !strings.Contains(out, "✗ archive") {
		t.Errorf("verify with a conflicting archive: exit %d\n%s", code, out)
	}
}

// On the shared reference world the five .mjs files are absent: verify
// names each one and fails; --allow-missing accepts them since every digest
// recomputes from the recorded list.
func TestReleaseVerifyReferenceWorld(t *testing.T) {
	t.Parallel()
	w := testshared.World(t, "world")
	pkg := filepath.Join(w, "docs", "spec", "proof-wire")
	holdout := filepath.Join(w, "governance", "holdout")
	code, out, _ := runCLI(t, "release", "verify", pkg, "--holdout", holdout)
	if code != 1 || !strings.Contains(out, "NOT VERIFIED: files_present") {
		t.Errorf("exit %d\n%s", code, out)
	}
	for _, f := range []string{"evidence.mjs", "holdout_runner.mjs", "holdout_schema.mjs", "holdout_score_core.mjs", "run_state.mjs"} {
		if !strings.Contains(out, "missing on disk: experiment/"+f+"\n") {
			t.Errorf("output does not name experiment/%s", f)
		}
	}
	if strings.Count(out, "missing on disk: experiment/") != 5 {
		t.Errorf("names %d missing files, want 5", strings.Count(out, "missing on disk: experiment/"))
	}
	code, out, _ = runCLI(t, "release", "verify", pkg, "--holdout", holdout, "--allow-missing")
	if code != 0 || !strings.Contains(out, "✓ holdout_commitment") || !strings.Contains(out, "86d437fcbd9efee21c5cf27e25564d478592731ae8d2a9e2b9f472a592630071") {
		t.Errorf("--allow-missing: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "release", "id", filepath.Join(pkg, "SPEC-RELEASE.json"))
	if code != 0 || out != "srel-4844df97e124474e30f100cbe9f8422a99213ac9288f8fcc149086a9a434c952\n" {
		t.Errorf("id: exit %d %q", code, out)
	}
}

func TestDemoReleaseStage(t *testing.T) {
	t.Parallel()
	env := &demoEnv{out: t.TempDir(), ids: map[string]string{}}
	stage := demoReleaseStage(os.DirFS(filepath.Join(testshared.RepoRoot(t), "testdata", "release", "world")))
	res, err := stage(t.Context(), env)
	if err != nil {
		t.Fatal(err)
	}
	srel := env.ids["srel"]
	if !strings.HasPrefix(res, srel+" issued") || len(srel) != len("srel-")+64 {
		t.Errorf("result %q, srel %q", res, srel)
	}
	// The CLI, run on what the stage left, agrees.
	code, out, _ := runCLI(t, "release", "id", filepath.Join(env.ids["release_package"], "SPEC-RELEASE.json"))
	if code != 0 || out != srel+"\n" {
		t.Errorf("id: exit %d %q", code, out)
	}
}

// demoReleaseStage returns a stage shaped like the demo's (a test helper:
// the demo issues its own world's release with demoIssueRelease) that
// copies the synthetic release world in src (the layout of
// testdata/release/world: docs/spec/proof-wire/ and governance/holdout/)
// into the demo's output directory and issues its release there with
// demoIssueRelease.
func demoReleaseStage(src fs.FS) func(context.Context, *demoEnv) (string, error) {
	return func(_ context.Context, env *demoEnv) (string, error) {
		world := filepath.Join(env.out, "release-world")
		if err := os.CopyFS(world, src); err != nil {
			return "", fmt.Errorf("copying the synthetic release world: %w", err)
		}
		pkg := filepath.Join(world, "docs", "spec", "proof-wire")
		holdout := filepath.Join(world, "governance", "holdout")
		return demoIssueRelease(env, pkg, holdout)
	}
}
