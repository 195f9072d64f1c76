package amber

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/sign"
)

// DemoResult is what Demo produced.
type DemoResult struct {
	Dir            string
	CaseID         string
	ManifestSHA256 string
	IndexVersion   int64
	TerminalState  string // "" when no sandbox ran
}

func (d *DemoResult) String() string {
	s := fmt.Sprintf("case %s manifest %s… index_version %d", d.CaseID, d.ManifestSHA256[:12], d.IndexVersion)
	if d.TerminalState != "" {
		s += ", run " + d.TerminalState + ", record verified by value"
	} else {
		s += " (no sandbox here: run skipped)"
	}
	return s
}

// demoSealed is the sealed store's address in the demo: 192.0.2.1 is
// TEST-NET-1 (RFC 5737), never routed, so from the fully isolated
// candidate the probe fails at the transport layer.
var demoSealed = netip.MustParseAddrPort("192.0.2.1:443")

// Demo runs the AMBER flow end to end in dir (which must be empty or
// absent) on a small repository it generates with git: producer and index
// keys, case build, verification by possession, index append, signed
// summary; then, when iso is not nil, a sandboxed run of a scripted
// candidate and the by-value verification of its signed record.
func Demo(ctx context.Context, dir string, iso Isolation) (*DemoResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := func(n string) string { return filepath.Join(dir, n) }
	// A small source repository with fixed identities and dates.
	env := append(gitEnv(true), "GIT_AUTHOR_NAME=Demo", "GIT_AUTHOR_EMAIL=demo@example.invalid", "GIT_AUTHOR_DATE=2026-01-10T00:00:00Z",
		"GIT_COMMITTER_NAME=Demo", "GIT_COMMITTER_EMAIL=demo@example.invalid", "GIT_COMMITTER_DATE=2026-01-10T00:00:00Z")
	sh := func(d string, args ...string) error {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir, cmd.Env = d, env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v: %s", args, err, out)
		}
		return nil
	}
	src := p("source")
	if err := sh("", "init", "--quiet", "-b", "main", src); err != nil {
		return nil, err
	}
	// The case is a Go module of its own (go.mod): a directory the demo
	// writes inside a Go checkout (make demo's demo-out/) must not join
	// that checkout's module, where ./... would vet and test it.
	files := map[string]string{
		"go.mod":       "module example.invalid/calc\n\ngo 1.22\n",
		"calc.go":      "package calc\n\n// Add returns a+b.\nfunc Add(a, b int) int { return a + b }\n",
		"README.md":    "# calc\n\nA tiny library for the AMBER demo.\n",
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 2) != 4 {\n\t\tt.Fatal(Add(2, 2))\n\t}\n}\n",
	}
	for _, name := range []string{"README.md", "go.mod", "calc.go", "calc_test.go"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(files[name]), 0o644); err != nil {
			return nil, err
		}
		if err := sh(src, "add", name); err != nil {
			return nil, err
		}
		if err := sh(src, "commit", "--quiet", "-m", "add "+name); err != nil {
			return nil, err
		}
	}
	oracle := p("oracle")
	if err := os.MkdirAll(oracle, 0o755); err != nil {
		return nil, err
	}
	for name, body := range map[string]string{
		"rubric.md":     "criterion answer: ANSWER holds 42\n",
		OracleEvaluator: "#!/bin/sh\nif [ \"$(cat \"$1/ANSWER\" 2>/dev/null)\" = 42 ]; then echo '{\"answer\": 1}'; else echo '{\"answer\": 0}'; fi\n",
	} {
		if err := os.WriteFile(filepath.Join(oracle, name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	for name, body := range map[string]string{"CORE.md": "# Demo core specification\n", "DIST.md": "# Demo distribution protocol\n"} {
		if err := os.WriteFile(p(name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	if err := sign.GenerateKeyWithComment(p("producer.key"), "demo-producer"); err != nil {
		return nil, err
	}
	signer, err := sign.LoadSigner(p("producer.key"))
	if err != nil {
		return nil, err
	}
	c, err := Build(ctx, BuildOptions{
		Repo: src, CutoffCommit: "main", CutoffUTC: "2026-01-10T00:00:00Z", OracleDir: oracle,
		Profile: "demo", CaseID: "A-demo-0001", SpecFile: p("CORE.md"), ProtocolFile: p("DIST.md"),
		Signer: signer, Producer: "demo-producer", Out: p("case"),
	})
	if err != nil {
		return nil, err
	}
	rep, err := VerifyCase(ctx, c.Dir, signer.PublicKey(), VerifyOptions{})
	if err != nil {
		return nil, err
	}
	if _, err := InitIndex(p("index"), "demo.cleanroom.invalid/index", p("index.key")); err != nil {
		return nil, err
	}
	ix, err := AppendCaseFile(p("index"), p("index.key"), EntryFromManifest(rep.Manifest, rep.ManifestSHA256))
	if err != nil {
		return nil, err
	}
	sum, err := NewSummary(rep.Manifest, rep.ManifestSHA256, ix)
	if err != nil {
		return nil, err
	}
	if _, err := WriteSummary(c.Dir, sum, signer); err != nil {
		return nil, err
	}
	res := &DemoResult{Dir: dir, CaseID: rep.Manifest.CaseID, ManifestSHA256: rep.ManifestSHA256, IndexVersion: ix.Checkpoint.Size}
	if iso == nil {
		return res, nil
	}
	run, err := Run(ctx, RunOptions{
		CaseDir: c.Dir, Producer: signer.PublicKey(), IndexDir: p("index"), Signer: signer,
		Provider: "demo", Model: "scripted", Args: []string{"/bin/sh", "-c", "echo 42 > /workspace/ANSWER"},
		Sealed: demoSealed, Out: p("run"), Isolation: iso,
	})
	if err != nil {
		return nil, err
	}
	vkey, err := os.ReadFile(filepath.Join(p("index"), IndexPubFile))
	if err != nil {
		return nil, err
	}
	if _, err := VerifyRecordByValue(filepath.Join(run.Dir, RecordFile), signer.PublicKey(), string(vkey),
		filepath.Join(c.Dir, SummaryFile), p("CORE.md")); err != nil {
		return nil, err
	}
	res.TerminalState = run.Record.TerminalState
	return res, nil
}
