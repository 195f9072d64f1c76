package worldinit

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/adapter"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/internal/report"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// candidateScript is what a scripted implementer writes for the example
// protocol (EXAMPLE-LENGTH-v1) from the contract alone. It reports one
// member more than the reference does (lines), which no predicate reads:
// the interop comparison must find it, and a person must rule on it.
const candidateScript = `#!/usr/bin/python3
import hashlib, json, os, sys
PKG = "docs/spec/proof-wire"
corpus = {}
for n in os.listdir(PKG + "/vectors/public/messages"):
    b = open(PKG + "/vectors/public/messages/" + n, "rb").read()
    corpus["sha256-" + hashlib.sha256(b).hexdigest()] = b
obs = {}
for c in json.load(open(sys.argv[1])):
    m = corpus[c["fixture"]["root"]]
    after = m + b"".join(s["value"].encode() for s in c["recipe"] if s["op"] == "APPEND")
    obs[c["id"]] = {"fixture_root": c["fixture"]["root"],
                    "baseline": {"message": {"length": len(m), "lines": m.count(b"\n")}},
                    "candidate": {"message": {"length": len(after), "lines": after.count(b"\n")}}}
release = json.load(open(PKG + "/SPEC-RELEASE.json"))["spec_release_id"]
json.dump({"type": "CLEANROOM-HOLDOUT-OBSERVATION-v1", "implementation": "candidate",
           "spec_release_id": release, "observations": obs}, open(sys.argv[2], "w"))
`

// TestInitWorldRunsToComplete: right after init, with every default — the
// declared reference adapter (Python), the declared finding classes — a
// run goes pin → freeze → reveal → measure → classify → COMPLETE → verify.
// The adapters run as plain processes (the sandboxed path is the guide's,
// which needs root); the run records that they were not isolated.
func TestInitWorldRunsToComplete(t *testing.T) { runToComplete(t, "") }

// TestInitWorldWithRootLabelRunsToComplete: a world initialised with
// --root-label spec/checksum has its package there and nothing at
// docs/spec/proof-wire; every step (release issue, pin, freeze, reveal,
// measure, complete, verify) finds it through the world root's
// cleanroom-package, and the pinned blind package is measured under that
// label.
func TestInitWorldWithRootLabelRunsToComplete(t *testing.T) { runToComplete(t, "spec/checksum") }

func runToComplete(t *testing.T, label string) {
	if _, err := adapter.ResolveInterpreter("python3"); err != nil {
		t.Skipf("the reference adapter needs python3 in a system directory: %v", err)
	}
	if _, err := exec.LookPath("/usr/bin/python3"); err != nil {
		t.Skip("the scripted candidate runs as #!/usr/bin/python3, which is absent")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "world")
	if _, err := Init(dir, Options{RootLabel: label}); err != nil {
		t.Fatal(err)
	}
	w, err := experiment.OpenWorld(dir)
	if err != nil {
		t.Fatal(err)
	}
	pkg := "docs/spec/proof-wire"
	if label != "" {
		pkg = label
		if b, err := os.ReadFile(filepath.Join(dir, "cleanroom-package")); err != nil || string(b) != label+"\n" {
			t.Fatalf("cleanroom-package: %q %v, want %q", b, err, label+"\n")
		}
		if _, err := os.Lstat(filepath.Join(dir, "docs")); !os.IsNotExist(err) {
			t.Fatalf("a world with its package at %s has docs/: %v", label, err)
		}
	} else if _, err := os.Lstat(filepath.Join(dir, "cleanroom-package")); !os.IsNotExist(err) {
		t.Fatalf("a world with the default package has a cleanroom-package: %v", err)
	}
	if got := w.PackageDir(); got != filepath.Join(w.Root, filepath.FromSlash(pkg)) {
		t.Fatalf("package dir %s, want %s", got, pkg)
	}
	// release issue finds governance/holdout beside the package by itself.
	if got := experiment.HoldoutBeside(w.PackageDir()); got != filepath.Join(w.Root, "governance", "holdout") {
		t.Fatalf("HoldoutBeside %q", got)
	}
	if _, err := experiment.IssueRelease(w.PackageDir(), experiment.IssueOptions{SpecRevision: 1, ExperimentRevision: 1, PublicCorpusRevision: 1, HoldoutDir: w.HoldoutDir()}); err != nil {
		t.Fatal(err)
	}
	d, err := w.Declaration()
	if err != nil || !d.Declared || !slices.Equal(d.AdapterInterpreters, []string{"python3"}) || !slices.Contains(d.FindingClasses, "CANDIDATE_DEFECT") {
		t.Fatalf("declaration %+v %v", d, err)
	}
	ref, err := w.ReferenceSpec()
	if err != nil {
		t.Fatal(err)
	}
	pin, err := experiment.Pin(ctx, w, experiment.PinOptions{Reference: ref})
	if err != nil {
		t.Fatal(err)
	}
	// The pin measured the package under its label (part of the bpkg id).
	tree, err := pkgwalk.Walk(filepath.Join(dir, filepath.FromSlash(pkg)), pkgwalk.WalkOptions{HoldoutDir: filepath.Join(dir, "governance", "holdout")})
	if err != nil {
		t.Fatal(err)
	}
	man, err := pkgwalk.NewManifest(tree, pkg)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := man.ID(); err != nil || id != pin.Record.BlindPackageID {
		t.Fatalf("pinned %s, the package under label %s is %s %v", pin.Record.BlindPackageID, pkg, id, err)
	}
	if a := pin.Record.Adapters; len(a) != 1 || a[0].Implementation != "reference" || a[0].Command[0] != "python3" {
		t.Fatalf("pinned adapters %+v", a)
	}
	// The scripted implementer's output, where a workspace would hold it.
	if err := os.MkdirAll(filepath.Join(dir, "implementer"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := strings.ReplaceAll(candidateScript, `PKG = "docs/spec/proof-wire"`, `PKG = "`+pkg+`"`)
	if err := os.WriteFile(filepath.Join(dir, "implementer", "candidate"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := experiment.Freeze(ctx, w, experiment.FreezeOptions{Implementation: "candidate",
		Files: []string{"implementer/candidate"}, Binary: "implementer/candidate",
		Toolchain: "python3", Model: "scripted-implementer", ToolVersion: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := experiment.Reveal(ctx, w, experiment.RevealOptions{}); err != nil {
		t.Fatal(err)
	}
	opt := adapter.RunOptions{Runner: adapter.UnsandboxedRunner{}, Scratch: t.TempDir()}
	m, _, _, err := adapter.CompleteRun(ctx, w, opt)
	if !errors.Is(err, adapter.ErrUnclassified) {
		t.Fatalf("first completion: %v, want %v", err, adapter.ErrUnclassified)
	}
	for _, s := range m.Subjects {
		if s.State != adapter.Measured || s.Report.Pass != 3 || s.Report.Total != 3 {
			t.Errorf("%s: %s %v, want MEASURED 3/3", s.Implementation, s.State, s.Err)
		}
	}
	var paths []string
	for _, f := range m.Findings {
		paths = append(paths, f.Path)
	}
	slices.Sort(paths)
	if want := []string{"E1.baseline.message.lines", "E1.candidate.message.lines"}; !slices.Equal(paths, want) {
		t.Fatalf("findings at %q, want %q", paths, want)
	}
	reg, err := w.FindingsRegister()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Findings {
		if _, err := reg.Classify(f.ID, "CANDIDATE_DEFECT", "the contract's measure has one member, length; the candidate adds lines"); err != nil {
			t.Fatal(err)
		}
	}
	_, tr, _, err := adapter.CompleteRun(ctx, w, opt)
	if err != nil || tr.Status != experiment.StatusComplete {
		t.Fatalf("completion after the ruling: %v", err)
	}
	rep, err := experiment.Verify(ctx, w, experiment.VerifyOptions{})
	if err != nil || rep.Err() != nil {
		t.Fatalf("verify: %v %v", err, rep.Err())
	}
	// run report reads the same world: a COMPLETE run that verifies.
	r, err := report.Gather(ctx, w, report.Options{})
	if err != nil || r.Status != string(experiment.StatusComplete) || !r.Verified || r.BlindPackageID != pin.Record.BlindPackageID {
		t.Fatalf("report: %v %+v", err, r)
	}
}
