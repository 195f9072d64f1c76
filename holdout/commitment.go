package holdout

import (
	"fmt"

	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// ErrCommitment: the holdout directory is not the challenge set the release
// committed to. A challenge set altered after it was committed is not a
// challenge set, so nothing in it is scored.
var ErrCommitment = fault.New(fault.Refused, "holdout does not match the release's holdout_commitment")

// Commitment computes holdout_commitment and holdout_entries of holdoutDir
// with paths relative to the package root pkgDir (TRVM-FORMATS §3.5; the
// release's own rule, experiment.HoldoutCommitment).
func Commitment(pkgDir, holdoutDir string) (string, int, error) {
	return experiment.HoldoutCommitment(pkgDir, holdoutDir)
}

// LoadCommitted is the reveal-time load of a challenge set: the directory
// must recompute the release's commitment and entry count, then it is read
// (LoadDir) and every challenge is validated against the package's recipe
// schema. Any failure refuses the whole set — never a partial one.
func LoadCommitted(pkgDir, holdoutDir string, rel *experiment.Release, s *Schemas) (*Holdout, error) {
	c, n, err := Commitment(pkgDir, holdoutDir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", holdoutDir, ErrCommitment, err)
	}
	if c != rel.HoldoutCommitment || n != rel.HoldoutEntries {
		return nil, fmt.Errorf("%s: commitment %s over %d entries, the release committed %s over %d: %w", holdoutDir, c, n, rel.HoldoutCommitment, rel.HoldoutEntries, ErrCommitment)
	}
	h, err := LoadDir(holdoutDir)
	if err != nil {
		return nil, err
	}
	// The commitment above was a reading of the directory; LoadDir's is
	// another. Authenticate the bytes that will be scored: a challenge
	// swapped between the two readings is otherwise scored as committed.
	used, err := experiment.HoldoutDigestOf(pkgDir, holdoutDir, h.read)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", holdoutDir, ErrCommitment, err)
	}
	if used != rel.HoldoutCommitment {
		return nil, fmt.Errorf("%s: the files read for scoring digest to %s, the release committed %s (changed while it was read): %w", holdoutDir, used, rel.HoldoutCommitment, ErrCommitment)
	}
	if probs := ValidateChallenges(s, h.Challenges); len(probs) > 0 {
		return nil, &RefusedError{Problems: probs}
	}
	return h, nil
}
