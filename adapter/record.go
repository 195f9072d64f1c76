package adapter

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// linkObject is l as a log entry links it (nil when nothing was archived).
func linkObject(l *experiment.Link) any {
	if l == nil {
		return nil
	}
	return evidence.NewObject(evidence.Member{Name: "file", Value: l.File}, evidence.Member{Name: "sha256", Value: l.SHA256})
}

// Archived is what one measurement archived for one subject.
type Archived struct {
	Observation, Scored *experiment.Link
}

// archive publishes b in governance/evidence/ under its own SHA-256
// (create-exclusive, fsync'd: durable.Create). The name is the digest, so
// the same bytes archived twice are one file; a file already there with
// other bytes has been edited and is refused (ErrMeasurementEvidence), never
// replaced.
func archive(w *experiment.World, b []byte) (*experiment.Link, error) {
	sum := pkgwalk.SHA256Hex(b)
	l := &experiment.Link{File: path.Join(experiment.EvidenceDirName, sum+".json"), SHA256: sum}
	dir := filepath.Join(w.StateDir(), experiment.EvidenceDirName)
	// durable.MkdirAll fsyncs the parent of each directory it creates.
	if err := durable.MkdirAll(dir); err != nil {
		return nil, err
	}
	err := durable.Create(dir, sum+".json", b, 0o444)
	if !errors.Is(err, fs.ErrExist) {
		return l, err
	}
	// Read back beneath the state root: a symlink planted at the name is
	// not followed, and only the very bytes count as already archived.
	have, rerr := w.ReadStateFile(l.File)
	if rerr != nil || pkgwalk.SHA256Hex(have) != sum {
		return nil, &experiment.RunProblem{Rule: experiment.ErrMeasurementEvidence, File: path.Join(experiment.StateDirName, l.File),
			Detail: "already archived with other bytes; archived evidence is never rewritten", Err: rerr}
	}
	return l, nil
}

// scoredDocument is CLEANROOM-SCORED-v1, the scored results of one
// observation document, JSON.stringify(doc, null, 1) + "\n":
//
//	{type, run_id, spec_release_id, implementation, observation_sha256,
//	 refused (the scorer's or the strict reader's refusal, or null),
//	 totals {total, satisfied, unsatisfied, unresolved, missing} (null when refused),
//	 missing [challenge ids],
//	 predicates [{challenge, index, op, path, expected, observed, verdict, detail}]}
//
// predicates lists every predicate of every committed challenge in order
// (holdout.Report.Rows): verdict PASS, FAIL, UNRESOLVED, or MISSING for a
// challenge the document does not observe.
func scoredDocument(runID, srel string, s *Measurement, challenges []*holdout.Challenge) ([]byte, error) {
	var refused, totals any
	rows := []any{}
	missing := []any{}
	if s.Report != nil {
		totals = totalsOf(s.Report)
		for _, m := range s.Report.Missing {
			missing = append(missing, m)
		}
		for _, x := range s.Report.Rows(challenges) {
			rows = append(rows, evidence.NewObject(
				evidence.Member{Name: "challenge", Value: x.ID},
				evidence.Member{Name: "index", Value: x.Index},
				evidence.Member{Name: "op", Value: x.Op},
				evidence.Member{Name: "path", Value: x.Path},
				evidence.Member{Name: "expected", Value: x.Expected},
				evidence.Member{Name: "observed", Value: x.Observed},
				evidence.Member{Name: "verdict", Value: x.Outcome()},
				evidence.Member{Name: "detail", Value: x.Detail}))
		}
	} else {
		refused = s.Reason
	}
	return evidence.Stringify(evidence.NewObject(
		evidence.Member{Name: "type", Value: experiment.TypeScored},
		evidence.Member{Name: "run_id", Value: runID},
		evidence.Member{Name: "spec_release_id", Value: srel},
		evidence.Member{Name: "implementation", Value: s.Implementation},
		evidence.Member{Name: "observation_sha256", Value: pkgwalk.SHA256Hex(s.Observation)},
		evidence.Member{Name: "refused", Value: refused},
		evidence.Member{Name: "totals", Value: totals},
		evidence.Member{Name: "missing", Value: missing},
		evidence.Member{Name: "predicates", Value: rows},
	), " ")
}

// totalsOf is a score's totals as the log and the scored results record
// them: {total, satisfied, unsatisfied, unresolved, missing}.
func totalsOf(rep *holdout.Report) *evidence.Object {
	p := experiment.PredicatesOf(rep)
	return evidence.NewObject(
		evidence.Member{Name: "total", Value: p.Total}, evidence.Member{Name: "satisfied", Value: p.Satisfied},
		evidence.Member{Name: "unsatisfied", Value: p.Unsatisfied}, evidence.Member{Name: "unresolved", Value: p.Unresolved},
		evidence.Member{Name: "missing", Value: len(rep.Missing)})
}

// archiveSubjects archives, for every subject whose output was read, the
// observation document and its scored results (before the log entry that
// links them is appended, so a link never names a file not yet durable).
func (m *RunMeasurement) archiveSubjects(w *experiment.World) error {
	m.Archived = make([]Archived, len(m.Subjects))
	var chs []*holdout.Challenge
	if m.Holdout != nil {
		chs = m.Holdout.Challenges
	}
	for i, s := range m.Subjects {
		if s.Observation == nil {
			continue
		}
		obs, err := archive(w, s.Observation)
		if err != nil {
			return fmt.Errorf("archiving %s's observation: %w", s.Implementation, err)
		}
		b, err := scoredDocument(m.Record.RunID, m.Record.SpecReleaseID, s, chs)
		if err != nil {
			return fmt.Errorf("rendering %s's scored results: %w", s.Implementation, err)
		}
		sc, err := archive(w, b)
		if err != nil {
			return fmt.Errorf("archiving %s's scored results: %w", s.Implementation, err)
		}
		m.Archived[i] = Archived{Observation: obs, Scored: sc}
	}
	return nil
}

// record appends this measurement to governance/measurements/ (an
// append-only, digest-linked log like the findings register): every
// subject's state — MEASURED, ABSENT with its rule and reason, or NOT_RUN —
// how it was executed (runner, sandboxed or not), its exit, its totals and
// the links to its archived observation and scored results; the interop
// outcome and the id of every finding it saw. An absent measurement is
// thereby recorded as absent, durably, and a run measured without the
// sandbox says so in a file, not only on a terminal.
func (m *RunMeasurement) record(stateDir string) (holdout.LogEntry, error) {
	subs := make([]any, 0, len(m.Subjects))
	for i, s := range m.Subjects {
		o := evidence.NewObject(
			evidence.Member{Name: "implementation", Value: s.Implementation},
			evidence.Member{Name: "role", Value: s.Role},
			evidence.Member{Name: "state", Value: s.State},
			evidence.Member{Name: "runner", Value: s.Runner},
			evidence.Member{Name: "sandboxed", Value: s.Sandboxed},
		)
		var rule, exit, preds, sum any
		if s.Rule != nil {
			rule = s.Rule.Error()
		}
		if s.Outcome != nil {
			exit = evidence.NewObject(evidence.Member{Name: "status", Value: s.Outcome.Status}, evidence.Member{Name: "code", Value: s.Outcome.ExitCode})
		}
		if s.Report != nil {
			preds = totalsOf(s.Report)
		}
		if s.Observation != nil {
			sum = pkgwalk.SHA256Hex(s.Observation)
		}
		var a Archived
		if i < len(m.Archived) {
			a = m.Archived[i]
		}
		o.Set("rule", rule)
		o.Set("reason", s.Reason)
		o.Set("exit", exit)
		o.Set("predicates", preds)
		o.Set("observation_sha256", sum)
		o.Set("observation", linkObject(a.Observation))
		o.Set("scored", linkObject(a.Scored))
		subs = append(subs, o)
	}
	var interop any
	if m.Interop != nil {
		interop = evidence.NewObject(
			evidence.Member{Name: "measured", Value: m.Interop.Measured},
			evidence.Member{Name: "pairs", Value: len(m.Interop.Pairs)},
			evidence.Member{Name: "findings", Value: m.Interop.Findings},
			evidence.Member{Name: "unclassified", Value: m.Outstanding})
	}
	seen := []any{}
	for _, f := range m.Findings {
		seen = append(seen, f.ID)
	}
	return holdout.Log{Dir: filepath.Join(stateDir, experiment.MeasurementsDirName)}.Append(experiment.TypeMeasurement, []evidence.Member{
		{Name: "run_id", Value: m.Record.RunID},
		{Name: "status", Value: string(m.Record.Status)},
		{Name: "spec_release_id", Value: m.Record.SpecReleaseID},
		{Name: "self_test", Value: m.SelfTest != nil && m.SelfTest.OK()},
		{Name: "subjects", Value: subs},
		{Name: "interop", Value: interop},
		{Name: "findings", Value: seen},
	})
}
