package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// runWorld copies the synthetic world and issues its release.
func runWorld(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "world")
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(testshared.RepoRoot(t), "testdata", "world"))); err != nil {
		t.Fatal(err)
	}
	// CopyFS keeps no permission bits: the candidate binary must stay
	// executable for the freeze to describe a runnable subject.
	if err := os.Chmod(filepath.Join(dst, "implementer", "tally-candidate"), 0o755); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(dst, "docs", "spec", "proof-wire")
	if code, _, errs := runCLI(t, "release", "issue", pkg, "--spec-revision", "1", "--experiment-revision", "1", "--corpus-revision", "1", "--holdout", filepath.Join(dst, "governance", "holdout")); code != 0 {
		t.Fatalf("release issue: %d %s", code, errs)
	}
	return dst
}

func TestRunCLILifecycle(t *testing.T) {
	t.Parallel()
	w := runWorld(t)
	freeze := []string{"run", "--world", w, "freeze", "--implementation", "candidate", "--files", "implementer/tally-candidate",
		"--binary", "implementer/tally-candidate", "--toolchain", "node 22", "--model", "scripted", "--tool-version", "1"}
	for _, step := range []struct {
		args []string
		code int
		out  string // in stdout, or for a refusal in stderr (the rule broken)
	}{
		{[]string{"run", "--world", w, "verify"}, 1, "✗ run record present"},
		{[]string{"run", "--world", w, "pin", "--reference", filepath.Join(w, "governance", "reference-adapter.json")}, 0, "PINNED brun-"},
		{[]string{"run", "--world", w, "reveal"}, 1, "transition not permitted"},
		{freeze[:len(freeze)-2], 1, "candidate provenance missing"}, // no --tool-version
		{freeze, 0, "CANDIDATE_FROZEN brun-"},
		{[]string{"run", "--world", w, "reveal"}, 0, "REVEALED brun-"},
		{[]string{"run", "--world", w, "verify"}, 0, "✓ receipt chain reaches PINNED"},
		{[]string{"run", "--world", w, "status"}, 0, "CANDIDATE_FROZEN"},
		{[]string{"run", "--world", w, "abort"}, 2, "--reason is required"},
		{[]string{"run", "--world", w, "verify", "--state-root", w}, 2, "unknown flag: --state-root"},
		{[]string{"run", "--world", w, "abort", "--reason", "done"}, 0, "ABORTED brun-"},
	} {
		code, out, errs := runCLI(t, step.args...)
		if code != step.code || !strings.Contains(out+errs, step.out) {
			t.Fatalf("%v: exit %d (want %d)\n%s%s", step.args[3:], code, step.code, out, errs)
		}
	}
	code, out, _ := runCLI(t, "--json", "run", "--world", w, "status")
	if code != 0 {
		t.Fatalf("status --json: exit %d", code)
	}
	v, err := evidence.ReadObject([]byte(out))
	if err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	tl, _ := v.Get("timeline")
	if arr, _ := tl.([]any); len(arr) != 4 {
		t.Errorf("timeline has %d entries, want 4: %s", len(arr), out)
	}
	// The subjects each step admits read the same in `run status` and in
	// the run report: one text.
	type timeline struct {
		Timeline []struct {
			Status   string   `json:"status"`
			Admitted []string `json:"admitted"`
		} `json:"timeline"`
	}
	var status timeline
	var rep struct {
		Report timeline `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &status); err != nil {
		t.Fatal(err)
	}
	code, rout, rerrs := runCLI(t, "--json", "run", "--world", w, "report")
	if err := json.Unmarshal([]byte(rout), &rep); code != 0 || err != nil {
		t.Fatalf("report --json: exit %d, %v\n%s", code, err, rerrs)
	}
	if len(rep.Report.Timeline) != len(status.Timeline) {
		t.Fatalf("report timeline %d entries, status %d", len(rep.Report.Timeline), len(status.Timeline))
	}
	for i, e := range status.Timeline {
		if !slices.Equal(e.Admitted, rep.Report.Timeline[i].Admitted) {
			t.Errorf("%s: status admits %q, the report %q", e.Status, e.Admitted, rep.Report.Timeline[i].Admitted)
		}
	}
	if fz := status.Timeline[1]; fz.Status != "CANDIDATE_FROZEN" || len(fz.Admitted) != 1 ||
		!strings.HasPrefix(fz.Admitted[0], "candidate (candidate) package ") || !strings.Contains(fz.Admitted[0], ", binary ") ||
		!strings.HasSuffix(fz.Admitted[0], `, toolchain "node 22", model "scripted", tool_version "1"`) {
		t.Errorf("the freeze admits %q", fz.Admitted)
	}
}

func TestRunIDCLI(t *testing.T) {
	t.Parallel()
	rec := filepath.Join(testshared.World(t, "world"), "governance", "blind-run.json")
	code, out, errs := runCLI(t, "run", "id", rec)
	if code != 0 || out != "brun-c39b708f1d96f2b6df1562d66c33c3eee3d13e2307274e42adbff79025b13ad8\n" {
		t.Errorf("run id: exit %d %q %s", code, out, errs)
	}
	bad := filepath.Join(t.TempDir(), "dup.json")
	b, _ := os.ReadFile(rec)
	if err := os.WriteFile(bad, []byte(strings.Replace(string(b), `"status": "PINNED",`, `"status": "REVEALED", "status": "PINNED",`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, "run", "id", bad); code != 1 || !strings.Contains(errs, "duplicate-name") {
		t.Errorf("run id of a record with two readings: exit %d %s", code, errs)
	}
}

func TestRunDemoCycle(t *testing.T) {
	t.Parallel()
	w := runWorld(t)
	var out strings.Builder
	tr, err := runDemoCycle(t.Context(), w, experiment.Environment{Toolchain: "node", Model: "scripted", ToolVersion: "1"}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if tr.Status != experiment.StatusRevealed || !strings.Contains(out.String(), "\nVERIFIED\n") {
		t.Errorf("%+v\n%s", tr, out.String())
	}
}

// runDemoCycle takes the synthetic world at dir (testdata/world copied, its
// release issued) from no run to REVEALED: pin with the world's
// governance/reference-adapter.json, freeze implementer/tally-candidate
// with the given provenance, reveal governance/holdout, and print each
// transition and the final verification to out. A test helper: the demo
// runs these steps as its own stages (demo.go).
func runDemoCycle(ctx context.Context, dir string, env experiment.Environment, out io.Writer) (*experiment.Transition, error) {
	w, err := experiment.OpenWorld(dir)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(w.StateDir() + "/reference-adapter.json")
	if err != nil {
		return nil, err
	}
	ref, err := experiment.ParseAdapterSpec(b, "governance/reference-adapter.json")
	if err != nil {
		return nil, err
	}
	p, err := experiment.Pin(ctx, w, experiment.PinOptions{Reference: ref})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "PINNED           %s\n", p.RunID)
	f, err := experiment.Freeze(ctx, w, experiment.FreezeOptions{Implementation: "candidate",
		Files: []string{"implementer/tally-candidate"}, Binary: "implementer/tally-candidate",
		Toolchain: env.Toolchain, Model: env.Model, ToolVersion: env.ToolVersion})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "CANDIDATE_FROZEN %s\n", f.RunID)
	r, err := experiment.Reveal(ctx, w, experiment.RevealOptions{})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "REVEALED         %s\n", r.RunID)
	rep, err := experiment.Verify(ctx, w, experiment.VerifyOptions{})
	if err != nil {
		return nil, err
	}
	printRunReport(out, rep)
	return r, rep.Err()
}
