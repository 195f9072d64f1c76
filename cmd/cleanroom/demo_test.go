package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/sandbox"
)

// TestDemo runs `cleanroom demo` as a user does and checks the story it
// tells: every stage ran, the finding was caught before completion, the run
// completed and verified, and only the output directory was written.
func TestDemo(t *testing.T) {
	t.Parallel()
	if err := exec.Command("unshare", "-m", "-n", "true").Run(); err != nil {
		t.Skipf("cannot create mount+network namespaces here (the demo's clean room and sandbox need them): %v", err)
	}
	// The demo's own gate: where it fails (not root, no cgroups) the demo
	// exits 3 before the clean room, as TestIsolationUnavailableExitsThree
	// asserts.
	if _, err := sandbox.CheckKernel(); err != nil {
		t.Skipf("the demo's sandbox cannot run here: %v", err)
	}
	bin := roomBinary(t)
	parent := t.TempDir()
	out := filepath.Join(parent, "demo")
	tmp := t.TempDir()
	cmd := exec.Command(bin, "demo", "--out", out)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, b)
	}
	text := string(b)
	for _, st := range demoStages() {
		if !strings.Contains(text, st.name) {
			t.Errorf("stage %q missing from the output", st.name)
		}
	}
	for _, want := range []string{
		"both claims proved",
		"symlink and empty directory refused",
		"1 refused read",
		"2 interop finding(s) at H4.candidate, H4.refusal_set block completion",
		"COMPLETE: every check passed",
		"CapEff:0000000000000000 NoNewPrivs:1",
		"record verified by value",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	// The run the demo completed is recorded as COMPLETE in its world.
	rec, err := evidence.ReadFile(filepath.Join(out, "world", "governance", "blind-run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := rec.(*evidence.Object).Get("status"); st != "COMPLETE" {
		t.Errorf("record status %v, want COMPLETE", st)
	}
	// `run status` of the completed run replays its RESULT and exits 0.
	if st, err := exec.Command(bin, "run", "status", "--world", filepath.Join(out, "world")).CombinedOutput(); err != nil || !strings.Contains(string(st), "COMPLETE") {
		t.Errorf("run status of the completed run: %v\n%s", err, st)
	}
	for _, f := range []string{"report.html", "report.md", "clean-room-transcript.jsonl"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("artifact %s: %v", f, err)
		}
	}
	// Nothing but the output directory: the parent holds only it, and the
	// demo's TMPDIR is left empty.
	if ents, _ := os.ReadDir(parent); len(ents) != 1 {
		t.Errorf("parent of --out holds %d entries, want only the output directory", len(ents))
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the demo left %v in TMPDIR", names)
	}
}

// TestDemoOutMustBeNew: the demo never writes into an existing directory.
func TestDemoOutMustBeNew(t *testing.T) {
	t.Parallel()
	existing := t.TempDir()
	if _, err := demoOutDir(existing); !errors.Is(err, fs.ErrExist) {
		t.Errorf("demoOutDir(an existing directory): %v, want fs.ErrExist", err)
	}
	code, _, stderr := runCLI(t, "demo", "--out", existing)
	if code != 2 || !strings.Contains(stderr, "writes only into a directory it creates") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
