package adapter

import (
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// TypeMeasurement is the entry type of the measurements log.
const TypeMeasurement = "CLEANROOM-MEASUREMENT-v1"

// MeasurementsDirName is the measurements log's directory in the state root.
const MeasurementsDirName = "measurements"

// record appends this measurement to governance/measurements/ (an
// append-only, digest-linked log like the findings register): every
// subject's state — MEASURED, ABSENT with its rule and reason, or NOT_RUN —
// how it was executed (runner, sandboxed or not), its exit and its totals.
// An absent measurement is thereby recorded as absent, durably, and a run
// measured without the sandbox says so in a file, not only on a terminal.
func (m *RunMeasurement) record(stateDir string) (holdout.LogEntry, error) {
	subs := make([]any, 0, len(m.Subjects))
	for _, s := range m.Subjects {
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
			p := s.Report.Predicates()
			preds = evidence.NewObject(
				evidence.Member{Name: "total", Value: p.Total}, evidence.Member{Name: "satisfied", Value: p.Satisfied},
				evidence.Member{Name: "unsatisfied", Value: p.Unsatisfied}, evidence.Member{Name: "unresolved", Value: p.Unresolved},
				evidence.Member{Name: "missing", Value: len(s.Report.Missing)})
			sum = pkgwalk.SHA256Hex(s.Observation)
		}
		o.Set("rule", rule)
		o.Set("reason", s.Reason)
		o.Set("exit", exit)
		o.Set("predicates", preds)
		o.Set("observation_sha256", sum)
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
	return holdout.Log{Dir: filepath.Join(stateDir, MeasurementsDirName)}.Append(TypeMeasurement, []evidence.Member{
		{Name: "run_id", Value: m.Record.RunID},
		{Name: "status", Value: string(m.Record.Status)},
		{Name: "spec_release_id", Value: m.Record.SpecReleaseID},
		{Name: "self_test", Value: m.SelfTest != nil && m.SelfTest.OK()},
		{Name: "subjects", Value: subs},
		{Name: "interop", Value: interop},
	})
}
