package holdout

import (
	"context"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
)

// Predicates converts a report's totals into the RESULT's predicate block.
func (r *Report) Predicates() experiment.Predicates {
	return experiment.Predicates{Total: r.Total, Satisfied: r.Pass, Unsatisfied: r.Fail, Unresolved: r.Unresolved}
}

// Replay re-derives a COMPLETE run's measurement from its archive
// (experiment.ReplayFunc, TRVM-FORMATS §5.6): the scorer's self-test over
// the package's fixture, the committed challenge set (commitment and recipe
// schema), every archived observation re-scored with the run's release and
// the subject's label expected, and interop replayed over the archived
// documents. Findings counts the replayed disagreements the findings
// register has not classified: a classified finding is a known, ruled-on
// difference; an unclassified one blocks the terminal claim.
func Replay(ctx context.Context, in experiment.ReplayInput) (*experiment.ReplayOutcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ins, err := LoadInstrument(in.World.PackageDir(), in.HoldoutDir, in.Release)
	if err != nil {
		return nil, err
	}
	sc := ins.Scorer
	out := &experiment.ReplayOutcome{Subjects: map[string]experiment.ReplayedSubject{}}
	var read []Document
	for _, a := range in.Record.Adapters {
		b, ok := in.Observations[a.Implementation]
		if !ok {
			continue
		}
		doc, err := evidence.Read(b)
		if err != nil {
			out.Subjects[a.Implementation] = experiment.ReplayedSubject{Refused: err.Error()}
			continue
		}
		read = append(read, Document{Implementation: a.Implementation, Value: doc})
	}
	var docs []Document
	for i, r := range sc.ScoreAll(read, in.Record.SpecReleaseID) {
		impl := read[i].Implementation
		if r.Err != nil {
			out.Subjects[impl] = experiment.ReplayedSubject{Refused: r.Err.Error()}
			continue
		}
		out.Subjects[impl] = experiment.ReplayedSubject{Predicates: r.Report.Predicates(), Missing: r.Report.Missing}
		docs = append(docs, read[i])
	}
	io, err := CompareAll(docs)
	if err != nil {
		return nil, err
	}
	reg, err := WorldRegister(in.World)
	if err != nil {
		return nil, err
	}
	n, err := reg.Outstanding(in.Record.SpecReleaseID, io.Pairs)
	if err != nil {
		return nil, err
	}
	out.Findings = n
	return out, nil
}
