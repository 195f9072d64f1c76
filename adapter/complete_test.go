package adapter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// pinnedWorld copies the synthetic world, issues its release (committing
// the holdout) and pins the reference adapter declared in
// governance/reference-adapter.json.
func pinnedWorld(t *testing.T) *experiment.World {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "world")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(testshared.RepoRoot(t), "testdata", "world"))); err != nil {
		t.Fatal(err)
	}
	w, err := experiment.OpenWorld(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := experiment.IssueRelease(w.PackageDir(), experiment.IssueOptions{SpecRevision: 1, ExperimentRevision: 1,
		PublicCorpusRevision: 1, HoldoutDir: w.HoldoutDir()}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "governance", "reference-adapter.json"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := experiment.ParseAdapterSpec(b, "reference-adapter.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := experiment.Pin(context.Background(), w, experiment.PinOptions{Reference: spec}); err != nil {
		t.Fatal(err)
	}
	return w
}

// freezeCandidate writes the world's candidate where an implementer's
// workspace would put it and freezes it.
func freezeCandidate(t *testing.T, w *experiment.World) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.Root, "implementer", "tally-candidate"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(w.Root, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.Root, "workspace", "tally-candidate"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := experiment.Freeze(context.Background(), w, experiment.FreezeOptions{Implementation: "candidate",
		Files: []string{"workspace/tally-candidate"}, Binary: "workspace/tally-candidate",
		Toolchain: "node", Model: "scripted", ToolVersion: "test"}); err != nil {
		t.Fatal(err)
	}
}

// From pin to COMPLETE on the synthetic world: the candidate is not run
// before the reveal; after it, the deliberate disagreement is caught as two
// findings that block completion until classified; then the run completes
// and re-verifies from its archive.
func TestCompleteRunLifecycle(t *testing.T) {
	t.Parallel()
	needNode(t)
	ctx := context.Background()
	w := pinnedWorld(t)
	freezeCandidate(t, w)
	opt := RunOptions{Runner: UnsandboxedRunner{}, Scratch: t.TempDir()}

	m, _, _, err := CompleteRun(ctx, w, opt)
	if !errors.Is(err, errNotComplete) {
		t.Fatalf("complete before reveal: %v, want errNotComplete", err)
	}
	if m.Subjects[1].State != NotRun || m.Subjects[0].State != Measured {
		t.Fatalf("before reveal: reference %s, candidate %s", m.Subjects[0].State, m.Subjects[1].State)
	}
	// The NOT_RUN subject is recorded as such, durably.
	logged, err := holdout.Log{Dir: filepath.Join(w.StateDir(), experiment.MeasurementsDirName)}.Read()
	if err != nil || len(logged) != 1 {
		t.Fatalf("measurements log: %v %v", logged, err)
	}
	subs, _ := logged[0].Value.Get("subjects")
	cand := subs.([]any)[1].(*evidence.Object)
	if st, _ := cand.Get("state"); st != NotRun {
		t.Errorf("logged candidate state %v", st)
	}
	if p, _ := cand.Get("predicates"); p != nil {
		t.Errorf("a NOT_RUN subject logged predicates %v", p)
	}

	if _, err := experiment.Reveal(ctx, w, experiment.RevealOptions{}); err != nil {
		t.Fatal(err)
	}
	m, _, _, err = CompleteRun(ctx, w, opt)
	if !errors.Is(err, ErrUnclassified) {
		t.Fatalf("complete with findings: %v, want ErrUnclassified", err)
	}
	if len(m.Findings) != 2 || m.Findings[0].Path != "H4.candidate" || m.Findings[1].Path != "H4.refusal_set" || m.Outstanding != 2 {
		t.Fatalf("findings %+v outstanding %d", m.Findings, m.Outstanding)
	}
	for _, s := range m.Subjects {
		if s.State != Measured || s.Report.Pass != 20 || s.Report.Total != 20 {
			t.Errorf("%s: %s %v", s.Implementation, s.State, s.Report)
		}
	}
	reg := holdout.OpenRegister(w.StateDir())
	if _, err := reg.Classify(m.Findings[0].ID, "SPEC_GAP", "the recipe grammar does not say whether a wire challenge verifies the fixture"); err != nil {
		t.Fatal(err)
	}
	// Still one outstanding: completion stays refused.
	if _, _, _, err := CompleteRun(ctx, w, opt); !errors.Is(err, ErrUnclassified) {
		t.Fatalf("one finding still unclassified: %v", err)
	}
	if _, err := reg.Classify(m.Findings[1].ID[:16], "SPEC_GAP", "same gap: the refusal set of the unmodified fixture"); err != nil {
		t.Fatal(err)
	}
	// A second measurement finds the same two findings, already opened:
	// the register does not grow.
	fs, _ := reg.Findings()
	if len(fs) != 2 {
		t.Fatalf("register holds %d findings", len(fs))
	}
	_, tr, res, err := CompleteRun(ctx, w, opt)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Status != experiment.StatusComplete || res.Interop.Pairs != 1 || res.Interop.Findings != 0 || len(res.Subjects) != 2 {
		t.Fatalf("transition %s, interop %+v, %d subjects", tr.Status, res.Interop, len(res.Subjects))
	}
	for _, s := range res.Subjects {
		if s.Predicates.Total != 20 || s.Predicates.Satisfied != 20 {
			t.Errorf("%s predicates %+v", s.Implementation, s.Predicates)
		}
	}
	// run verify of the COMPLETE run re-scores and re-compares the archive.
	rep, err := experiment.Verify(ctx, w, experiment.VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("verify COMPLETE: %v %v", err, rep.Err())
	}
	// Every measurement of the run archived its evidence, and it re-digests.
	ms, err := experiment.ReadMeasurements(w, nil)
	if err != nil || len(ms) != 4 {
		t.Fatalf("measurements log: %d entries, %v", len(ms), err)
	}
	for _, m := range ms {
		if m.Type != experiment.TypeMeasurement || m.Subjects[0].Observation == nil || m.Subjects[0].Scored == nil {
			t.Errorf("%s: type %s, reference archived %+v", m.File, m.Type, m.Subjects[0])
		}
	}
	if rep, err := experiment.Verify(ctx, w, experiment.VerifyOptions{Evidence: true}); err != nil || !rep.OK() {
		t.Fatalf("verify COMPLETE with its archive: %v %v", err, rep.Err())
	}
	// A finished run is not measured again, and says so — not that its
	// RESULT could not be replayed.
	if _, err := MeasureRun(ctx, w, opt); !errors.Is(err, experiment.ErrRunFinished) || strings.Contains(err.Error(), "RESULT not replayed") || !strings.Contains(err.Error(), "is COMPLETE") {
		t.Errorf("measure of a COMPLETE run: %v, want %v", err, experiment.ErrRunFinished)
	}
	if _, _, _, err := CompleteRun(ctx, w, opt); !errors.Is(err, experiment.ErrRunFinished) {
		t.Errorf("complete of a COMPLETE run: %v, want %v", err, experiment.ErrRunFinished)
	}
	// Without the classifications, the archive's findings are outstanding
	// again and the terminal claim no longer verifies.
	if err := os.Rename(filepath.Join(w.StateDir(), "findings"), filepath.Join(w.StateDir(), "findings.moved")); err != nil {
		t.Fatal(err)
	}
	rep, err = experiment.Verify(ctx, w, experiment.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Refused for the replayed disagreements, not for any other reason.
	if rerr := rep.Err(); rerr == nil || !strings.Contains(rerr.Error(), "RESULT does not verify") || !strings.Contains(fmt.Sprint(rerr), "finds 2 disagreement(s)") {
		t.Fatalf("verify without the register: %v, want %v for the 2 unclassified disagreements", rerr, "RESULT does not verify")
	}
}

// What a measurement archived cannot be changed, removed, swapped for a
// link or re-pointed by its log entry without run verify naming the
// measurements' evidence rule.
func TestEvidenceTamperRefused(t *testing.T) {
	t.Parallel()
	needNode(t)
	ctx := context.Background()
	cases := []struct {
		name   string
		tamper func(t *testing.T, w *experiment.World, l experiment.LoggedSubject)
		detail string
	}{
		{"observation edited", func(t *testing.T, w *experiment.World, l experiment.LoggedSubject) {
			p := filepath.Join(w.StateDir(), filepath.FromSlash(l.Observation.File))
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(`{"edited":true}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "the measurements log records"},
		{"scored results removed", func(t *testing.T, w *experiment.World, l experiment.LoggedSubject) {
			if err := os.Remove(filepath.Join(w.StateDir(), filepath.FromSlash(l.Scored.File))); err != nil {
				t.Fatal(err)
			}
		}, "cannot be read"},
		{"observation swapped for a symlink to the same bytes", func(t *testing.T, w *experiment.World, l experiment.LoggedSubject) {
			p := filepath.Join(w.StateDir(), filepath.FromSlash(l.Observation.File))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "copy.json")
			if err := os.WriteFile(out, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(out, p); err != nil {
				t.Fatal(err)
			}
		}, "cannot be read"},
		{"log entry re-points its link outside the archive", func(t *testing.T, w *experiment.World, l experiment.LoggedSubject) {
			// The last entry: no later entry's previous_sha256 catches it.
			p := filepath.Join(w.StateDir(), experiment.MeasurementsDirName, "000001.json")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b = []byte(strings.Replace(string(b), `"file": "`+l.Scored.File+`"`, `"file": "evidence/../blind-run.json"`, 1))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "not evidence/<its sha256>.json"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := pinnedWorld(t)
			if _, err := MeasureRun(ctx, w, RunOptions{Runner: UnsandboxedRunner{}, Scratch: t.TempDir()}); err != nil {
				t.Fatal(err)
			}
			if rep, err := experiment.Verify(ctx, w, experiment.VerifyOptions{Evidence: true}); err != nil || !rep.OK() {
				t.Fatalf("untouched archive: %v %v", err, rep.Err())
			}
			ms, err := experiment.ReadMeasurements(w, nil)
			if err != nil || len(ms) != 1 || ms[0].Subjects[0].Scored == nil {
				t.Fatalf("measurements %+v %v", ms, err)
			}
			c.tamper(t, w, ms[0].Subjects[0])
			rep, err := experiment.Verify(ctx, w, experiment.VerifyOptions{Evidence: true})
			if err != nil {
				t.Fatal(err)
			}
			ps := rep.Problems()
			if len(ps) == 0 || !errors.Is(ps[0], experiment.ErrMeasurementEvidence) || !strings.Contains(ps[0].Error(), c.detail) {
				t.Fatalf("problems %v, want %v saying %q", ps, experiment.ErrMeasurementEvidence, c.detail)
			}
		})
	}
}
