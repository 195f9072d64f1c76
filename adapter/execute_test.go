package adapter

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

const testSrel = "srel-abababababababababababababababababababababababababababababababab"

var refFiles = []string{"governance/tally_adapter.mjs", "governance/tally_lib.mjs"}

// world copies testdata/world into a temporary directory, adds a
// SPEC-RELEASE.json naming testSrel (the adapters copy it into their
// documents) and returns the world, its schemas and challenges.
func world(t *testing.T) (*experiment.World, *holdout.Schemas, []*holdout.Challenge) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "world")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(testshared.RepoRoot(t), "testdata", "world"))); err != nil {
		t.Fatal(err)
	}
	rel := []byte(`{"spec_release_id":"` + testSrel + `"}`)
	if err := os.WriteFile(filepath.Join(dir, "docs/spec/proof-wire/SPEC-RELEASE.json"), rel, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := experiment.OpenWorld(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := holdout.LoadPackageSchemas(w.PackageDir())
	if err != nil {
		t.Fatal(err)
	}
	h, err := holdout.LoadDir(w.HoldoutDir())
	if err != nil {
		t.Fatal(err)
	}
	return w, s, h.Challenges
}

func needNode(t *testing.T) {
	t.Helper()
	if _, err := ResolveInterpreter("node"); err != nil {
		t.Skipf("node is not installed: %v", err)
	}
}

func digestOf(t *testing.T, root string, paths ...string) string {
	t.Helper()
	d, _, err := pkgwalk.DigestOfPaths(root, paths)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func reference(t *testing.T, w *experiment.World) experiment.Adapter {
	return experiment.Adapter{Implementation: "javascript", Role: experiment.RoleReference,
		Command:      []string{"node", "governance/tally_adapter.mjs", experiment.PlaceholderChallenges, experiment.PlaceholderOut},
		PackageFiles: refFiles, PackageDigest: digestOf(t, w.Root, refFiles...)}
}

// candidate freezes a binary at rel with the given content.
func candidate(t *testing.T, w *experiment.World, rel, content string) experiment.Adapter {
	t.Helper()
	p := filepath.Join(w.Root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	// The candidate's source (its package) is frozen beside the binary.
	src := rel + ".source.txt"
	if err := os.WriteFile(filepath.Join(w.Root, src), []byte("source of "+rel), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := pkgwalk.SHA256Hex([]byte(content))
	bp := rel
	return experiment.Adapter{Implementation: "candidate", Role: experiment.RoleCandidate,
		Command:      []string{rel, experiment.PlaceholderChallenges, experiment.PlaceholderOut},
		PackageFiles: []string{src}, PackageDigest: digestOf(t, w.Root, src), BinaryDigest: &sum, BinaryPath: &bp}
}

func run(t *testing.T, w *experiment.World, s *holdout.Schemas, chs []*holdout.Challenge, a experiment.Adapter, revealed bool, timeout time.Duration) *Measurement {
	t.Helper()
	scratch := t.TempDir()
	m, err := Execute(context.Background(), w, a, Options{Revealed: revealed, Runner: UnsandboxedRunner{}, Schemas: s,
		Challenges: chs, ExpectRelease: testSrel, Timeout: timeout, ScratchDir: scratch})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestExecuteHonestAdapters(t *testing.T) {
	t.Parallel()
	needNode(t)
	w, s, chs := world(t)
	cand, err := os.ReadFile(filepath.Join(w.Root, "implementer/tally-candidate"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []experiment.Adapter{reference(t, w), candidate(t, w, "workspace/tally-candidate", string(cand))} {
		m := run(t, w, s, chs, a, true, 0)
		if m.State != Measured {
			t.Fatalf("%s: %s: %v", a.Implementation, m.State, m.Err)
		}
		// The world's holdout: 7 challenges, 20 predicates, all satisfied
		// by both implementations (their one disagreement is unscored).
		if m.Report.Total != 20 || m.Report.Pass != 20 || len(m.Report.Missing) != 0 {
			t.Errorf("%s: %d predicates, %d pass, missing %v", a.Implementation, m.Report.Total, m.Report.Pass, m.Report.Missing)
		}
		if m.Sandboxed || m.Runner != "unsandboxed" {
			t.Errorf("%s: runner recorded as %q sandboxed=%v", a.Implementation, m.Runner, m.Sandboxed)
		}
	}
}

func TestExecuteRefusals(t *testing.T) {
	t.Parallel()
	needNode(t)
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	w, s, chs := world(t)
	srelDoc := func(impl, extra string) string {
		return `{"type":"TRVM-HOLDOUT-OBSERVATION-v1",` + extra + `"implementation":"` + impl + `","spec_release_id":"` + testSrel + `","observations":{}}`
	}
	cases := []struct {
		name     string
		adapter  func() experiment.Adapter
		after    func() // tampering after the freeze
		revealed bool
		timeout  time.Duration
		state    string
		rule     error
		cause    error
		says     string // a rule of another package, by its text in m.Err (the scorer lists the reference's problem texts)
	}{
		{name: "candidate before reveal", revealed: false, state: NotRun, rule: errNotRevealed,
			adapter: func() experiment.Adapter { return candidate(t, w, "ws1/c", "#!/bin/sh\nexit 0\n") }},
		{name: "package changed after freeze", revealed: true, state: Absent, rule: errPackageDigest,
			adapter: func() experiment.Adapter { return reference(t, w) },
			after: func() {
				p := filepath.Join(w.Root, "governance/tally_lib.mjs")
				b, _ := os.ReadFile(p)
				_ = os.WriteFile(p, append(b, '\n'), 0o644)
			}},
		{name: "binary changed after freeze", revealed: true, state: Absent, rule: errBinaryDigest,
			adapter: func() experiment.Adapter { return candidate(t, w, "ws2/c", "#!/bin/sh\nexit 0\n") },
			after:   func() { _ = os.WriteFile(filepath.Join(w.Root, "ws2/c"), []byte("#!/bin/sh\nexit 1\n"), 0o755) }},
		{name: "interpreter handed a file outside the package", revealed: true, state: Absent, rule: errCommand,
			adapter: func() experiment.Adapter {
				a := reference(t, w)
				a.Command = []string{"node", "/tmp/evil.mjs", experiment.PlaceholderChallenges, experiment.PlaceholderOut}
				return a
			}},
		{name: "argument naming a path outside the package", revealed: true, state: Absent, rule: errCommand,
			adapter: func() experiment.Adapter {
				a := candidate(t, w, "ws3/c", "#!/bin/sh\nexit 0\n")
				a.Command = []string{"ws3/c", "/etc/passwd", experiment.PlaceholderOut}
				return a
			}},
		{name: "command is not the frozen binary", revealed: true, state: Absent, rule: errCommand,
			adapter: func() experiment.Adapter {
				a := candidate(t, w, "ws4/c", "#!/bin/sh\nexit 0\n")
				a.Command = []string{"/bin/sh", "ws4/c", experiment.PlaceholderChallenges, experiment.PlaceholderOut}
				return a
			}},
		{name: "exit 99", revealed: true, state: Absent, rule: errExit,
			adapter: func() experiment.Adapter { return candidate(t, w, "ws5/c", "#!/bin/sh\necho broken >&2\nexit 99\n") }},
		{name: "timeout", revealed: true, timeout: 500 * time.Millisecond, state: Absent, rule: errTimeout,
			adapter: func() experiment.Adapter { return candidate(t, w, "ws6/c", "#!/bin/sh\nsleep 30\n") }},
		{name: "no output written", revealed: true, state: Absent, rule: errOutput,
			adapter: func() experiment.Adapter { return candidate(t, w, "ws7/c", "#!/bin/sh\nexit 0\n") }},
		{name: "output with a duplicate member", revealed: true, state: Absent, rule: errOutput, cause: evidence.ClassDuplicateName,
			adapter: func() experiment.Adapter {
				return candidate(t, w, "ws8/c", "#!/bin/sh\nprintf '%s' '"+srelDoc("candidate", `"implementation":"javascript",`)+"' > \"$2\"\n")
			}},
		{name: "output naming another implementation", revealed: true, state: Absent, rule: errScorerRefused, says: `implementation "javascript" is not the adapter's "candidate"`,
			adapter: func() experiment.Adapter {
				return candidate(t, w, "ws9/c", "#!/bin/sh\nprintf '%s' '"+srelDoc("javascript", "")+"' > \"$2\"\n")
			}},
		{name: "output is a FIFO", revealed: true, state: Absent, rule: errOutput,
			adapter: func() experiment.Adapter {
				return candidate(t, w, "wsb/c", "#!/bin/sh\nmkfifo \"$2\"\n")
			}},
		{name: "output over the reader's limit", revealed: true, state: Absent, rule: errOutput, cause: evidence.ClassTooLarge,
			adapter: func() experiment.Adapter {
				return candidate(t, w, "wsc/c", "#!/bin/sh\nhead -c 8388609 /dev/zero > \"$2\"\n")
			}},
		{name: "output is a symlink out of the view", revealed: true, state: Absent, rule: errOutput,
			adapter: func() experiment.Adapter {
				return candidate(t, w, "wsa/c", "#!/bin/sh\nln -s /etc/hostname \"$2\"\n")
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := c.adapter()
			if c.after != nil {
				c.after()
			}
			scratch := t.TempDir()
			m, err := Execute(context.Background(), w, a, Options{Revealed: c.revealed, Runner: UnsandboxedRunner{}, Schemas: s,
				Challenges: chs, ExpectRelease: testSrel, Timeout: c.timeout, ScratchDir: scratch})
			if err != nil {
				t.Fatal(err)
			}
			if m.State != c.state || m.Rule != c.rule || !errors.Is(m.Err, c.rule) {
				t.Fatalf("state %s rule %v (%v), want %s %v", m.State, m.Rule, m.Err, c.state, c.rule)
			}
			if c.cause != nil && !errors.Is(m.Err, c.cause) {
				t.Errorf("cause %v, want %v", m.Err, c.cause)
			}
			if c.says != "" && (m.Err == nil || !strings.Contains(m.Err.Error(), c.says)) {
				t.Errorf("cause %v, want one saying %q", m.Err, c.says)
			}
			// The bytes of a document that was read and then refused are
			// kept (they are archived as evidence); nothing is scored.
			if m.Report != nil || m.Doc != nil {
				t.Errorf("something was scored from a refused run")
			}
			if c.state == NotRun {
				// Nothing was staged: the challenge file was never written.
				if ents, _ := os.ReadDir(scratch); len(ents) != 0 {
					t.Errorf("a candidate before REVEALED left %d staged entries", len(ents))
				}
			}
		})
	}
}

func TestCommandProblem(t *testing.T) {
	t.Parallel()
	bp := "bin/c"
	d := strings.Repeat("0", 64)
	ok := []experiment.Adapter{
		{Implementation: "r", Role: experiment.RoleReference, Command: []string{"node", "a.mjs", "{{CHALLENGES}}", "{{OUT}}"}, PackageFiles: []string{"a.mjs"}},
		{Implementation: "c", Role: experiment.RoleCandidate, Command: []string{bp, "{{CHALLENGES}}", "{{OUT}}"}, BinaryPath: &bp, BinaryDigest: &d},
	}
	for _, a := range ok {
		if err := CommandProblem(a, []string{"node"}); err != nil {
			t.Errorf("%s: %v", a.Implementation, err)
		}
	}
	// A world that declares python3 runs a Python reference; node is then
	// no longer permitted.
	py := experiment.Adapter{Implementation: "py", Role: experiment.RoleReference, Command: []string{"python3", "a.py", "{{CHALLENGES}}", "{{OUT}}"}, PackageFiles: []string{"a.py"}}
	if err := CommandProblem(py, []string{"python3"}); err != nil {
		t.Errorf("python3 declared: %v", err)
	}
	if err := CommandProblem(ok[0], []string{"python3"}); !errors.Is(err, errCommand) {
		t.Errorf("node when only python3 is declared: %v, want errCommand", err)
	}
	bad := []experiment.Adapter{
		{Implementation: "empty", Role: experiment.RoleReference},
		{Implementation: "python", Role: experiment.RoleReference, Command: []string{"python3", "a.mjs"}, PackageFiles: []string{"a.mjs"}},
		{Implementation: "unfrozen-script", Role: experiment.RoleReference, Command: []string{"node", "b.mjs"}, PackageFiles: []string{"a.mjs"}},
		{Implementation: "no-binary", Role: experiment.RoleCandidate, Command: []string{"node", "a.mjs"}, PackageFiles: []string{"a.mjs"}},
		{Implementation: "stray-arg", Role: experiment.RoleCandidate, Command: []string{bp, "../x.sh"}, BinaryPath: &bp, BinaryDigest: &d},
	}
	for _, a := range bad {
		if err := CommandProblem(a, []string{"node"}); !errors.Is(err, errCommand) {
			t.Errorf("%s: %v, want errCommand", a.Implementation, err)
		}
	}
}

// A measurement cancelled by the caller is an error, never an ABSENT
// measurement recorded as the adapter's timeout: before the run (nothing is
// staged) and while the adapter runs.
func TestExecuteCancelled(t *testing.T) {
	t.Parallel()
	needNode(t)
	w, s, chs := world(t)
	marker := filepath.Join(t.TempDir(), "started")
	a := candidate(t, w, "wsx/c", "#!/bin/sh\ntouch '"+marker+"'\nsleep 30\n")
	cases := []struct {
		name   string
		cancel func(ctx context.Context, cancel context.CancelFunc)
	}{
		{"before the run", func(_ context.Context, cancel context.CancelFunc) { cancel() }},
		{"while the adapter runs", func(ctx context.Context, cancel context.CancelFunc) {
			// Cancel once the adapter has started (the marker exists);
			// the goroutine ends with the test's context either way.
			go func() {
				for ctx.Err() == nil {
					if _, err := os.Stat(marker); err == nil {
						cancel()
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c.cancel(ctx, cancel)
			m, err := Execute(ctx, w, a, Options{Revealed: true, Runner: UnsandboxedRunner{}, Schemas: s,
				Challenges: chs, ExpectRelease: testSrel, ScratchDir: t.TempDir()})
			if !errors.Is(err, context.Canceled) || m != nil {
				t.Fatalf("measurement %+v, error %v; want no measurement and context.Canceled", m, err)
			}
		})
	}
}

// The release package is staged beside every adapter; one that no longer
// stages as verified (here: a symlink planted in it) makes the measurement
// ABSENT under its own rule, not under the command's.
func TestExecuteReleasePackageRefused(t *testing.T) {
	t.Parallel()
	needNode(t)
	w, s, chs := world(t)
	a := reference(t, w)
	if err := os.Symlink("/etc/hostname", filepath.Join(w.PackageDir(), "planted")); err != nil {
		t.Fatal(err)
	}
	m := run(t, w, s, chs, a, true, 0)
	if m.State != Absent || m.Rule != errReleasePackage || !errors.Is(m.Err, pkgwalk.ErrSymlink) {
		t.Fatalf("state %s rule %v (%v), want ABSENT %v caused by %v", m.State, m.Rule, m.Err, errReleasePackage, pkgwalk.ErrSymlink)
	}
}

// A world that declares python3 among its adapter interpreters measures a
// Python reference (resolved in the fixed directories, never PATH); the same
// adapter in a world that declares nothing (node only) is refused by rule
// before anything runs.
func TestExecuteDeclaredInterpreter(t *testing.T) {
	t.Parallel()
	needNode(t)
	if _, err := ResolveInterpreter("python3"); err != nil {
		t.Skipf("python3 is not installed: %v", err)
	}
	w, s, chs := world(t)
	// The Python adapter replays what the JavaScript reference observes,
	// under its own label, so its document scores like the reference's.
	js := run(t, w, s, chs, reference(t, w), true, 0)
	if js.State != Measured {
		t.Fatalf("javascript reference: %s: %v", js.State, js.Err)
	}
	doc := strings.Replace(string(js.Observation), `"implementation": "javascript"`, `"implementation": "python"`, 1)
	if doc == string(js.Observation) {
		t.Fatal("the reference's document names no implementation to relabel")
	}
	files := map[string]string{
		"governance/py_adapter.py":        "import shutil, sys\nshutil.copyfile('governance/py_observations.json', sys.argv[2])\n",
		"governance/py_observations.json": doc,
	}
	for rel, body := range files {
		if err := os.WriteFile(filepath.Join(w.Root, rel), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pyFiles := []string{"governance/py_adapter.py", "governance/py_observations.json"}
	py := experiment.Adapter{Implementation: "python", Role: experiment.RoleReference,
		Command:      []string{"python3", "governance/py_adapter.py", experiment.PlaceholderChallenges, experiment.PlaceholderOut},
		PackageFiles: pyFiles, PackageDigest: digestOf(t, w.Root, pyFiles...)}
	if m := run(t, w, s, chs, py, true, 0); m.State != Absent || !errors.Is(m.Err, errCommand) {
		t.Errorf("python3 in a world that does not declare it: %s %v, want ABSENT %v", m.State, m.Err, errCommand)
	}
	decl := `{"format": "CLEANROOM-WORLD-v1", "adapter_interpreters": ["python3", "node"],
 "instrument": ["experiment/holdout-observation-v1.schema.json", "experiment/holdout-recipe-v1.schema.json", "experiment/fixtures"],
 "reference_adapter": "governance/reference-adapter.json", "finding_classes": ["SPEC_GAP"]}`
	if err := os.WriteFile(filepath.Join(w.PackageDir(), "experiment", "world.json"), []byte(decl), 0o644); err != nil {
		t.Fatal(err)
	}
	m := run(t, w, s, chs, py, true, 0)
	if m.State != Measured {
		t.Fatalf("python3 declared: %s: %v", m.State, m.Err)
	}
	if m.Report.Total != 20 || m.Report.Pass != 20 {
		t.Errorf("python reference: %d predicates, %d pass", m.Report.Total, m.Report.Pass)
	}
}
