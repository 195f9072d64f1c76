package adapter

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// Rules of a completion.
var (
	// errNotComplete: a frozen subject has no measurement (its adapter was
	// refused, failed or timed out), so the run cannot claim COMPLETE.
	errNotComplete = fault.New(fault.Refused, "a frozen subject was not measured")
	// ErrUnclassified: interop found disagreements nobody has classified.
	ErrUnclassified = fault.New(fault.Refused, "unclassified findings block completion")
	// errUnsatisfied: a subject has failing, unresolved or missing
	// predicates; COMPLETE asserts zero of each.
	errUnsatisfied = fault.New(fault.Refused, "a subject does not satisfy every committed predicate")
)

// RunOptions configure MeasureRun and CompleteRun.
type RunOptions struct {
	// Runner executes the adapters (required): SandboxRunner, or
	// UnsandboxedRunner when the operator chose it explicitly.
	Runner  Runner
	Timeout time.Duration
	Memory  int64
	// Scratch is where staged views are created (default os.TempDir).
	Scratch string
	// Transition carries the receipt signer, if any.
	Transition experiment.TransitionOptions
	// Progress, when set, is told as each adapter starts and ends (one
	// line each, no newline), for an operator watching stderr.
	Progress func(line string)
}

// RunMeasurement is everything one measurement of a run produced.
type RunMeasurement struct {
	Record   *experiment.Record
	Release  *experiment.Release
	SelfTest *holdout.FixtureReport
	Holdout  *holdout.Holdout
	Subjects []*Measurement
	Interop  *holdout.Interop
	// Findings are the register's records of every interop finding, opened
	// by this measurement if they were new.
	Findings []*holdout.FindingRecord
	// Outstanding counts the unclassified findings of this run: those this
	// measurement saw and those opened by an earlier measurement of the
	// same run (RunIDs); findings other runs opened are not counted.
	Outstanding int
	// RunIDs are the run_ids of the run's receipt chain (newest first).
	RunIDs []string
	// Archived is, per subject (Subjects order), what this measurement
	// archived in governance/evidence/.
	Archived []Archived
	// Logged is this measurement's entry in governance/measurements/.
	Logged holdout.LogEntry
}

// MeasureRun measures a run as it stands: it verifies the run (record,
// receipt chain, package, instrument), derives whether the chain witnesses
// REVEALED, runs the scorer's self-test (a failing self-test stops here),
// loads the committed challenge set (commitment + recipe schema), runs
// every adapter of the record (candidates only when revealed), compares the
// measured documents pairwise and opens every new finding in the findings
// register. Every observation document read and its scored results are
// archived in governance/evidence/, and the outcome, absent measurements
// included, is appended to the measurements log (governance/measurements/)
// with links to them. It does not transition the run. A finished run
// (COMPLETE or ABORTED) is not measured (experiment.ErrRunFinished).
func MeasureRun(ctx context.Context, w *experiment.World, opt RunOptions) (*RunMeasurement, error) {
	if opt.Runner == nil {
		return nil, errors.New("adapter: no runner (choose the sandbox, or --no-sandbox explicitly)")
	}
	if err := notFinished(w); err != nil {
		return nil, err
	}
	rep, err := experiment.Verify(ctx, w, experiment.VerifyOptions{})
	if err != nil {
		return nil, err
	}
	if err := rep.Err(); err != nil {
		return nil, err
	}
	rec, rel := rep.Record, rep.Release
	// REVEALED is derived from a verified chain, never from a status word
	// alone: Verify walked the receipts to this record.
	revealed := rec.Status.Revealed()
	m := &RunMeasurement{Record: rec, Release: rel, RunIDs: experiment.ChainRunIDs(rec, rep.Chain)}
	// Without the release the challenge set could not be authenticated
	// against its commitment (LoadInstrument would load it as it stands).
	if rel == nil {
		return m, errors.New("adapter: the verified run carries no release; the challenge set cannot be authenticated")
	}
	ins, err := holdout.LoadInstrument(w.PackageDir(), w.HoldoutDir(), rel.Committed())
	m.SelfTest, m.Holdout = ins.SelfTest, ins.Holdout
	if err != nil {
		return m, err
	}
	progress := func(string, ...any) {}
	if opt.Progress != nil {
		progress = func(f string, x ...any) { opt.Progress(fmt.Sprintf(f, x...)) }
	}
	var docs []holdout.Document
	for _, a := range rec.Adapters {
		progress("adapter %s [%s]: started", a.Implementation, a.Role)
		start := time.Now()
		sm, err := Execute(ctx, w, a, Options{Revealed: revealed, Runner: opt.Runner, Schemas: ins.Schemas, Challenges: m.Holdout.Challenges, Scorer: ins.Scorer,
			ExpectRelease: rec.SpecReleaseID, Timeout: opt.Timeout, Memory: opt.Memory, ScratchDir: opt.Scratch})
		if err != nil {
			progress("adapter %s [%s]: stopped after %s: %v", a.Implementation, a.Role, time.Since(start).Round(time.Millisecond), err)
			return m, err
		}
		progress("adapter %s [%s]: %s in %s", a.Implementation, a.Role, sm.State, time.Since(start).Round(time.Millisecond))
		m.Subjects = append(m.Subjects, sm)
		if sm.State == Measured {
			docs = append(docs, holdout.Document{Implementation: a.Implementation, Value: sm.Doc})
		}
	}
	if m.Interop, err = holdout.CompareAll(docs); err != nil {
		return m, err
	}
	// The evidence is durable before anything links it: the log entry
	// below names these files by digest.
	if err := m.archiveSubjects(w); err != nil {
		return m, err
	}
	reg, err := w.FindingsRegister()
	if err != nil {
		return m, err
	}
	if m.Findings, err = reg.Open(rec.RunID, rec.SpecReleaseID, m.Interop.Pairs); err != nil {
		return m, err
	}
	if m.Outstanding, err = reg.OutstandingIn(m.RunIDs, rec.SpecReleaseID, m.Interop.Pairs); err != nil {
		return m, err
	}
	if m.Logged, err = m.record(w.StateDir()); err != nil {
		return m, err
	}
	return m, nil
}

// notFinished refuses a run in a terminal state, saying which and what to
// do instead. Verification would refuse a COMPLETE run without a scorer for
// another reason ("RESULT not replayed"), which is true and beside the
// point: a finished run is not measured again.
func notFinished(w *experiment.World) error {
	rec, err := w.ReadRecord()
	if err != nil || !rec.Status.Terminal() {
		return nil // Verify reports an unreadable record with its rule
	}
	return &experiment.RunProblem{Rule: experiment.ErrRunFinished, File: path.Join(experiment.StateDirName, experiment.RecordFileName),
		Detail: fmt.Sprintf("run %s is %s; nothing is measured after a terminal state (cleanroom run verify re-checks it, cleanroom run report shows it, cleanroom run pin starts a new run)", rec.RunID, rec.Status)}
}

// CompleteRun is `run complete`: MeasureRun, then — only if every frozen
// subject was measured, every subject satisfies every committed predicate
// with nothing missing, interop was measured and no finding is unclassified
// — the REVEALED → COMPLETE transition (experiment.Complete: archive,
// RESULT, replayed by the frozen scorer, receipt, record). The measurement
// is returned even when completion is refused, so the caller can show why.
func CompleteRun(ctx context.Context, w *experiment.World, opt RunOptions) (*RunMeasurement, *experiment.Transition, *experiment.Result, error) {
	m, err := MeasureRun(ctx, w, opt)
	if err != nil {
		return m, nil, nil, err
	}
	var subjects []experiment.SubjectMeasurement
	for _, s := range m.Subjects {
		if s.State != Measured {
			return m, nil, nil, fmt.Errorf("%s: %s: %w", s.Implementation, s.Reason, errNotComplete)
		}
		if s.Report.Verdict() != "PASS" {
			return m, nil, nil, fmt.Errorf("%s: %d unsatisfied, %d unresolved, %d missing: %w", s.Implementation, s.Report.Fail, s.Report.Unresolved, len(s.Report.Missing), errUnsatisfied)
		}
		subjects = append(subjects, experiment.SubjectMeasurement{Implementation: s.Implementation, Observation: s.Observation, Predicates: experiment.PredicatesOf(s.Report)})
	}
	if !m.Interop.Measured {
		return m, nil, nil, fmt.Errorf("interop NOT MEASURED (%d document(s)): %w", len(subjects), errNotComplete)
	}
	if m.Outstanding > 0 {
		return m, nil, nil, fmt.Errorf("%d finding(s) of this run unclassified (cleanroom run finding classify ID --class C --ruling TEXT): %w", m.Outstanding, ErrUnclassified)
	}
	t, res, err := experiment.Complete(ctx, w, experiment.Measurement{RunID: m.Record.RunID, Subjects: subjects, Pairs: len(m.Interop.Pairs), Findings: m.Outstanding},
		experiment.CompleteOptions{TransitionOptions: opt.Transition})
	return m, t, res, err
}
