package experiment

import (
	"context"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/holdout"
)

// replayInput is what a COMPLETE run's measurement is re-derived from: the
// record, its RESULT, the archived observation bytes (by label) and the
// committed challenge set in HoldoutDir.
type replayInput struct {
	World        *World
	Record       *Record
	Result       *Result
	Observations map[string][]byte
	HoldoutDir   string
	Release      *Release
}

// replayedSubject is one archived observation re-scored by the frozen
// scorer (expectRelease = the run's srel, expectImplementation = the label).
type replayedSubject struct {
	Predicates Predicates
	Missing    []string // committed challenges the document does not observe
	Refused    string   // non-empty: the scorer refused the document
}

// replayOutcome is the re-derived measurement: every subject re-scored and
// the interop comparison replayed over the archived documents.
type replayOutcome struct {
	Subjects map[string]replayedSubject
	Findings int // disagreements found by the replayed interop comparison
}

// replayFunc re-scores a COMPLETE run from its archive: replayRun, or a
// test's stand-in.
type replayFunc func(ctx context.Context, in replayInput) (*replayOutcome, error)

// PredicatesOf is a score's totals as a RESULT records them.
func PredicatesOf(r *holdout.Report) Predicates {
	return Predicates{Total: r.Total, Satisfied: r.Pass, Unsatisfied: r.Fail, Unresolved: r.Unresolved}
}

// replayRun re-derives a COMPLETE run's measurement from its archive
// (TRVM-FORMATS §5.6) with the frozen scorer: the scorer's self-test over
// the package's fixture, the committed challenge set (commitment and recipe
// schema), every archived observation re-scored with the run's release and
// the subject's label expected, and interop replayed over the archived
// documents. Findings counts the replayed disagreements the findings
// register has not classified: a classified finding is a known, ruled-on
// difference; an unclassified one blocks the terminal claim.
func replayRun(ctx context.Context, in replayInput) (*replayOutcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var committed *holdout.Committed
	if in.Release != nil {
		committed = in.Release.Committed()
	}
	ins, err := holdout.LoadInstrument(in.World.PackageDir(), in.HoldoutDir, committed)
	if err != nil {
		return nil, err
	}
	sc := ins.Scorer
	out := &replayOutcome{Subjects: map[string]replayedSubject{}}
	var read []holdout.Document
	for _, a := range in.Record.Adapters {
		b, ok := in.Observations[a.Implementation]
		if !ok {
			continue
		}
		doc, err := evidence.Read(b)
		if err != nil {
			out.Subjects[a.Implementation] = replayedSubject{Refused: err.Error()}
			continue
		}
		read = append(read, holdout.Document{Implementation: a.Implementation, Value: doc})
	}
	var docs []holdout.Document
	for i, r := range sc.ScoreAll(read, in.Record.SpecReleaseID) {
		impl := read[i].Implementation
		if r.Err != nil {
			out.Subjects[impl] = replayedSubject{Refused: r.Err.Error()}
			continue
		}
		out.Subjects[impl] = replayedSubject{Predicates: PredicatesOf(r.Report), Missing: r.Report.Missing}
		docs = append(docs, read[i])
	}
	io, err := holdout.CompareAll(docs)
	if err != nil {
		return nil, err
	}
	reg, err := in.World.FindingsRegister()
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
