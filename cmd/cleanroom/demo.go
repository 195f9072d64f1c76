package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom"
	"github.com/cleanroom-dev/cleanroom/adapter"
	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/harness"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sandbox"
	"github.com/spf13/cobra"
)

// demoEnv is what the demo's stages share: the output directory and the
// identities earlier stages produced.
type demoEnv struct {
	out   string
	world string // the demo's copy of the synthetic world
	ids   map[string]string
	// findings are the interop findings the measurement opened.
	findings []*holdout.FindingRecord
	// scorecard is what the demo prints last: one line per fact a scorer
	// reads first.
	scorecard []string
}

func (env *demoEnv) pkg() string     { return filepath.Join(env.world, "docs", "spec", "proof-wire") }
func (env *demoEnv) holdout() string { return filepath.Join(env.world, "governance", "holdout") }

// demoStage is one step of the demo: it returns a one-line result (an
// identity or a count) or an error that stops the demo.
type demoStage struct {
	name string
	run  func(ctx context.Context, env *demoEnv) (string, error)
	// isolated marks a stage that needs namespaces, cgroups and nf_tables
	// (the clean room, the sandbox): where the kernel cannot provide them
	// the demo stops before it, naming the missing piece.
	isolated bool
}

type demoStageResult struct {
	Stage  string  `json:"stage"`
	Result string  `json:"result"`
	Millis float64 `json:"ms"`
}

func newDemoCmd() *cobra.Command {
	var outDir string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run cleanroom end to end on the synthetic data embedded in the binary",
		Long: `Run cleanroom end to end on the synthetic data embedded in the binary.

Each stage prints one line with its identity or result and its time. The
artifacts stay in the output directory (a fresh temporary directory unless
--out names a new one); nothing else is left behind.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := demoOutDir(outDir)
			if err != nil {
				return err
			}
			env := &demoEnv{out: out, ids: map[string]string{}}
			w := cmd.OutOrStdout()
			if !jsonOutput(cmd) {
				fmt.Fprintf(w, "cleanroom demo — artifacts in %s\n", out)
			}
			var results []demoStageResult
			start := time.Now()
			// Asked once, before anything runs: can this machine isolate?
			_, kernelErr := sandbox.CheckKernel()
			for i, st := range demoStages() {
				if st.isolated && kernelErr != nil {
					if !jsonOutput(cmd) {
						fmt.Fprintf(w, "  %2d %-34s NOT RUN\n", i+1, st.name)
					}
					return fault.AsNoIsolation(fmt.Errorf("demo stopped before %q: this machine cannot create the isolation it needs: %w (`cleanroom sandbox check` lists what this machine offers); artifacts so far in %s", st.name, kernelErr, out))
				}
				t0 := time.Now()
				res, err := st.run(cmd.Context(), env)
				ms := float64(time.Since(t0).Microseconds()) / 1000
				if err != nil {
					if !jsonOutput(cmd) {
						fmt.Fprintf(w, "  %2d %-34s FAILED (%.1f ms)\n", i+1, st.name, ms)
					}
					return fault.AsRefused(fmt.Errorf("demo stage %q: %w", st.name, err))
				}
				results = append(results, demoStageResult{st.name, res, ms})
				if !jsonOutput(cmd) {
					fmt.Fprintf(w, "  %2d %-34s %s  (%.1f ms)\n", i+1, st.name, res, ms)
				}
			}
			total := float64(time.Since(start).Microseconds()) / 1000
			env.scorecard = append(env.scorecard, "report     "+filepath.Join(out, "report.html")+" (and report.md)")
			return printResult(cmd, map[string]any{"out": out, "stages": results, "scorecard": env.scorecard, "total_ms": total}, func(w io.Writer) {
				fmt.Fprintf(w, "\nscorecard\n")
				for _, l := range env.scorecard {
					fmt.Fprintf(w, "  %s\n", l)
				}
				fmt.Fprintf(w, "\ndemo complete in %.0f ms; artifacts in %s\n", total, out)
			})
		},
	}
	cmd.Flags().StringVar(&outDir, "out", "", "output directory (must not exist; default: a new temporary directory)")
	return cmd
}

func demoOutDir(flag string) (string, error) {
	if flag == "" {
		return os.MkdirTemp("", "cleanroom-demo-")
	}
	// A new directory only: the demo never mixes its artifacts with others.
	if err := os.Mkdir(flag, 0o755); err != nil {
		return "", fmt.Errorf("--out %s: %w (the demo writes only into a directory it creates)", flag, err)
	}
	return filepath.Abs(flag)
}

func demoStages() []demoStage {
	return []demoStage{
		{name: "evidence self-test", run: demoEvidenceSelfTest},
		{name: "canonicalise a bundled document", run: demoCanonicalise},
		{name: "copy the synthetic world", run: demoCopyWorld},
		{name: "issue and verify the release", run: func(_ context.Context, env *demoEnv) (string, error) {
			return demoIssueRelease(env, env.pkg(), env.holdout())
		}},
		{name: "package walk, emit, verify", run: func(ctx context.Context, env *demoEnv) (string, error) {
			return demoPackage(ctx, env.pkg(), env.holdout(), env.out)
		}},
		{name: "pin the run", run: demoPin},
		{name: "clean room: scripted implementer", run: demoRoom, isolated: true},
		{name: "freeze the candidate", run: demoFreeze},
		{name: "reveal the holdout", run: demoReveal},
		{name: "score both adapters in the sandbox", run: demoMeasure, isolated: true},
		{name: "classify the interop findings", run: demoClassify},
		{name: "complete the run", run: demoComplete},
		{name: "verify the run from its archive", run: demoVerifyRun},
		{name: "fleet plan and collect", run: demoFleet},
		{name: "run report (HTML + Markdown)", run: func(ctx context.Context, env *demoEnv) (string, error) {
			return demoReport(ctx, env.world, env.out, filepath.Join(env.out, "clean-room-transcript.jsonl"))
		}},
		{name: "candidate sandbox", run: demoSandbox, isolated: true},
		{name: "AMBER case (build, index, run, record)", run: demoAmberStage},
	}
}

// demoExecutables are the world's files that must be executable: embed.FS
// keeps no mode bits.
var demoExecutables = []string{"implementer/tally-candidate"}

func demoCopyWorld(_ context.Context, env *demoEnv) (string, error) {
	sub, err := fs.Sub(cleanroom.World, "testdata/world")
	if err != nil {
		return "", err
	}
	env.world = filepath.Join(env.out, "world")
	if err := os.CopyFS(env.world, sub); err != nil {
		return "", fmt.Errorf("copying the synthetic world: %w", err)
	}
	for _, p := range demoExecutables {
		if err := os.Chmod(filepath.Join(env.world, p), 0o755); err != nil {
			return "", err
		}
	}
	files := 0
	if err := fs.WalkDir(sub, ".", func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
		}
		return err
	}); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d files in %s", files, env.world), nil
}

func demoOpenWorld(env *demoEnv) (*experiment.World, error) {
	return experiment.OpenWorld(env.world)
}

func demoPin(ctx context.Context, env *demoEnv) (string, error) {
	w, err := demoOpenWorld(env)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(w.StateDir(), "reference-adapter.json"))
	if err != nil {
		return "", err
	}
	ref, err := experiment.ParseAdapterSpec(b, "governance/reference-adapter.json")
	if err != nil {
		return "", err
	}
	t, err := experiment.Pin(ctx, w, experiment.PinOptions{Reference: ref})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s PINNED (reference %s)", t.RunID, ref.Implementation), nil
}

// demoRoom opens the clean room on the pinned package and drives a scripted
// implementer through it over MCP: it lists the package, reads the contract
// and the specification, tries to read outside the package (refused), and
// writes its candidate into a fresh workspace — the bytes the world's
// implementer/tally-candidate holds, standing in for what a model would
// write.
func demoRoom(ctx context.Context, env *demoEnv) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	candidate, err := os.ReadFile(filepath.Join(env.world, "implementer", "tally-candidate"))
	if err != nil {
		return "", err
	}
	transcript := filepath.Join(env.out, "clean-room-transcript.jsonl")
	server := exec.Command(exe, "room", "serve", "--world", env.world,
		"--workspace", filepath.Join(env.world, demoWorkspace), "--transcript", transcript)
	results, err := harness.RunScript(ctx, server, []harness.ScriptCall{
		{Tool: "list_files", Args: map[string]any{}},
		{Tool: "read_file", Args: map[string]any{"path": "experiment/BLIND-IMPLEMENTATION-CONTRACT.md"}},
		{Tool: "read_file", Args: map[string]any{"path": "TOY-TALLY-v1.md"}},
		{Tool: "read_file", Args: map[string]any{"path": "../../../governance/holdout/INDEX.json"}},
		{Tool: "write_source", Args: map[string]any{"path": "tally-candidate", "content": string(candidate)}},
	})
	if err != nil {
		return "", err
	}
	if !results[3].IsError {
		return "", fmt.Errorf("the room served a path outside the package")
	}
	for i, r := range results {
		if i != 3 && r.IsError {
			return "", fmt.Errorf("%s refused: %s", r.Tool, r.Text)
		}
	}
	b, err := os.ReadFile(transcript)
	if err != nil {
		return "", err
	}
	doc, err := harness.ReadTranscript(b)
	if err != nil {
		return "", err
	}
	// The workspace file becomes the frozen binary: it must be executable.
	if err := os.Chmod(filepath.Join(env.world, demoWorkspace, "tally-candidate"), 0o755); err != nil {
		return "", err
	}
	count := func(name string) int {
		v, _ := doc.Get(name)
		switch x := v.(type) {
		case []any:
			return len(x)
		case *evidence.Object:
			return x.Len()
		}
		return 0
	}
	seal, _ := doc.Get("seal_digest")
	return fmt.Sprintf("seal %v: %d files read, %d refused read, %d written (transcript %s)",
		shortHex(fmt.Sprint(seal)), count("files_read"), count("refused_reads"), count("files_written"), filepath.Base(transcript)), nil
}

// demoWorkspace is where the implementer's workspace is created, relative to
// the world: a new directory the room makes, outside the package.
const demoWorkspace = "implementer-workspace"

func demoFreeze(ctx context.Context, env *demoEnv) (string, error) {
	w, err := demoOpenWorld(env)
	if err != nil {
		return "", err
	}
	// The frozen candidate is exactly the file the implementer wrote.
	cand := demoWorkspace + "/tally-candidate"
	t, err := experiment.Freeze(ctx, w, experiment.FreezeOptions{Implementation: "candidate",
		Files: []string{cand}, Binary: cand,
		Toolchain: "node", Model: "scripted-implementer", ToolVersion: "cleanroom-demo"})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s CANDIDATE_FROZEN (%s)", t.RunID, cand), nil
}

func demoReveal(ctx context.Context, env *demoEnv) (string, error) {
	w, err := demoOpenWorld(env)
	if err != nil {
		return "", err
	}
	t, err := experiment.Reveal(ctx, w, experiment.RevealOptions{})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s REVEALED", t.RunID), nil
}

// demoRunOptions runs the frozen adapters in the candidate sandbox.
func demoRunOptions() adapter.RunOptions {
	return adapter.RunOptions{Runner: adapter.SandboxRunner{}}
}

// demoMeasure runs the reference and the candidate adapters, scores both and
// compares them. The world's two implementations disagree in one deliberate
// place, so the first attempt to complete must be refused for unclassified
// findings: that refusal is the stage's success.
func demoMeasure(ctx context.Context, env *demoEnv) (string, error) {
	w, err := demoOpenWorld(env)
	if err != nil {
		return "", err
	}
	m, _, _, err := adapter.CompleteRun(ctx, w, demoRunOptions())
	if !errors.Is(err, adapter.ErrUnclassified) {
		if err == nil {
			return "", fmt.Errorf("the run completed although the two implementations disagree")
		}
		return "", err
	}
	var scores []string
	for _, s := range m.Subjects {
		scores = append(scores, fmt.Sprintf("%s %d/%d", s.Implementation, s.Report.Pass, s.Report.Total))
		env.scorecard = append(env.scorecard, fmt.Sprintf("%-10s %-9s %d/%d predicates satisfied, %d failed, %d unresolved, %d missing",
			s.Implementation, s.Role, s.Report.Pass, s.Report.Total, s.Report.Fail, s.Report.Unresolved, len(s.Report.Missing)))
	}
	var paths []string
	for _, f := range m.Findings {
		paths = append(paths, f.Path)
	}
	env.findings = m.Findings
	env.scorecard = append(env.scorecard, fmt.Sprintf("interop    %d finding(s): %s", len(m.Findings), strings.Join(paths, ", ")))
	return fmt.Sprintf("%s; %d interop finding(s) at %s block completion", strings.Join(scores, ", "), len(m.Findings), strings.Join(paths, ", ")), nil
}

// demoClassify plays the person who rules on each finding.
func demoClassify(_ context.Context, env *demoEnv) (string, error) {
	w, err := demoOpenWorld(env)
	if err != nil {
		return "", err
	}
	reg := holdout.OpenRegister(w.StateDir())
	for _, f := range env.findings {
		if _, err := reg.Classify(f.ID, "SPEC_GAP", "the recipe grammar does not say whether a wire challenge also verifies its fixture"); err != nil {
			return "", err
		}
	}
	env.scorecard = append(env.scorecard, fmt.Sprintf("ruling     %d finding(s) classified SPEC_GAP by a person", len(env.findings)))
	return fmt.Sprintf("%d finding(s) classified SPEC_GAP with a ruling", len(env.findings)), nil
}

func demoComplete(ctx context.Context, env *demoEnv) (string, error) {
	w, err := demoOpenWorld(env)
	if err != nil {
		return "", err
	}
	_, t, res, err := adapter.CompleteRun(ctx, w, demoRunOptions())
	if err != nil {
		return "", err
	}
	env.scorecard = append(env.scorecard, fmt.Sprintf("run        %s COMPLETE (receipt %s)", t.RunID, t.Receipt))
	return fmt.Sprintf("%s COMPLETE; RESULT: %d subjects, interop pairs %d, outstanding findings %d", t.RunID, len(res.Subjects), res.Interop.Pairs, res.Interop.Findings), nil
}

func demoVerifyRun(ctx context.Context, env *demoEnv) (string, error) {
	w, err := demoOpenWorld(env)
	if err != nil {
		return "", err
	}
	rep, err := experiment.Verify(ctx, w, experiment.VerifyOptions{})
	if err != nil {
		return "", err
	}
	if err := rep.Err(); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s: every check passed", rep.RunID, rep.Status), nil
}

func demoEvidenceSelfTest(context.Context, *demoEnv) (string, error) {
	rep, err := evidence.SelfTest()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d vectors: %d accepted, %d refused by class, both claims proved", rep.Vectors, rep.Accepted, rep.Refused), nil
}

func demoCanonicalise(_ context.Context, env *demoEnv) (string, error) {
	b, err := cleanroom.Demo.ReadFile("testdata/demo/observation.json")
	if err != nil {
		return "", err
	}
	v, err := evidence.Read(b)
	if err != nil {
		return "", fmt.Errorf("testdata/demo/observation.json: %w", err)
	}
	c, err := evidence.Canonical(v)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(env.out, "observation.canonical.json")
	if err := durable.CreateFile(dst, c, 0o644); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes → %d canonical bytes, sha256 %s", len(b), len(c), shortHex(pkgwalk.SHA256Hex(c))), nil
}
