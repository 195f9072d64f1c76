package experiment

import (
	"context"
	"fmt"
	"path"
	"time"
)

// TimelineEntry is one witnessed transition of the current run, oldest
// first: the state, when its receipt was written, the receipt's digest, and
// the subjects admitted at that step (the candidate, at the freeze).
type TimelineEntry struct {
	Status        Status
	RunID         string
	Receipt       string // world-relative
	ReceiptSHA256 string
	Time          time.Time // the receipt file's modification time
	Note          string
	Admitted      []ReceiptAdapter
}

// Timeline verifies the run (without walking the package, which a status
// display does not need; a COMPLETE run's RESULT is re-scored by the frozen
// scorer, as Verify does; opt.RecordBytes selects another run
// than the current one, see SelectedRun.VerifyOptions) and returns its
// witnessed history. The report says whether the history is trustworthy:
// entries come only from receipts the chain walk reached.
func Timeline(ctx context.Context, w *World, opt VerifyOptions) (*RunReport, []TimelineEntry, error) {
	opt.SkipPackage = true
	rep, err := Verify(ctx, w, opt)
	if err != nil {
		return nil, nil, err
	}
	return rep, TimelineOf(rep.Chain), nil
}

// TimelineOf is the witnessed history of a chain a Verify already walked
// (RunReport.Chain), oldest first, for a caller that has verified the run
// itself: a subject is listed at the first receipt that admits it.
func TimelineOf(chain []ChainLink) []TimelineEntry {
	var out []TimelineEntry
	seen := map[string]bool{}
	for i := len(chain) - 1; i >= 0; i-- {
		l := chain[i]
		e := TimelineEntry{Status: l.Receipt.Status, RunID: l.Receipt.RunID, Receipt: path.Join(StateDirName, l.File),
			ReceiptSHA256: l.SHA256, Time: l.ModTime, Note: l.Receipt.Note}
		for _, a := range l.Receipt.Adapters {
			if !seen[a.Implementation] {
				e.Admitted = append(e.Admitted, a)
				seen[a.Implementation] = true
			}
		}
		out = append(out, e)
	}
	return out
}

// AdmittedText is how a subject admitted at a step of the timeline is
// written, the one text `run status` and the run report (internal/report)
// show: implementation, role in parentheses, package digest, then the
// binary digest and the environment where the receipt has them.
func (a ReceiptAdapter) AdmittedText() string {
	s := fmt.Sprintf("%s (%s) package %s", a.Implementation, a.Role, a.PackageDigest)
	if a.BinaryDigest != nil {
		s += ", binary " + *a.BinaryDigest
	}
	if a.Environment != nil {
		s += fmt.Sprintf(", toolchain %q, model %q, tool_version %q", a.Environment.Toolchain, a.Environment.Model, a.Environment.ToolVersion)
	}
	return s
}

// AdmittedTexts is AdmittedText of every subject the entry admits (nil
// for none).
func (e TimelineEntry) AdmittedTexts() []string {
	var out []string
	for _, a := range e.Admitted {
		out = append(out, a.AdmittedText())
	}
	return out
}
