package holdout

import (
	"fmt"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// errCommitment: the holdout directory is not the challenge set the release
// committed to. A challenge set altered after it was committed is not a
// challenge set, so nothing in it is scored.
var errCommitment = fault.New(fault.Refused, "holdout does not match the release's holdout_commitment")

// Committed is what a release commits of the instrument that measures its
// runs (experiment.Release.Committed makes it from a release): the holdout
// commitment and entry count (TRVM-FORMATS §3.5) and the sha256 of each
// experiment file, by package-relative path.
type Committed struct {
	Commitment string
	Entries    int
	Files      map[string]string
}

// LoadCommitted is the reveal-time load of a challenge set: the directory
// is read as LoadDir reads it, the bytes read must digest to the release's
// commitment over its entry count before any challenge is parsed, and
// every challenge is validated against the package's recipe schema. Any
// failure refuses the whole set — never a partial one.
func LoadCommitted(pkgDir, holdoutDir string, c *Committed, s *Schemas) (*Holdout, error) {
	h, err := loadDir(holdoutDir, func(read []pkgwalk.FileDigest) error {
		// Authenticate the bytes that will be scored, not a second reading
		// of the directory: a challenge swapped between two readings would
		// otherwise be scored as committed. read is INDEX.json and every
		// file it names, and the directory holds nothing else, so the
		// digest covers the whole set.
		used, err := DigestOf(pkgDir, holdoutDir, read)
		if err != nil {
			return fmt.Errorf("%s: %w: %w", holdoutDir, errCommitment, err)
		}
		if used != c.Commitment || len(read)-1 != c.Entries {
			return fmt.Errorf("%s: the files read digest to %s over %d entries, the release committed %s over %d: %w", holdoutDir, used, len(read)-1, c.Commitment, c.Entries, errCommitment)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if probs := ValidateChallenges(s, h.Challenges); len(probs) > 0 {
		return nil, &RefusedError{Problems: probs}
	}
	return h, nil
}

// DigestOf applies the commitment's digest rule (TRVM-FORMATS §3.5) to
// files read from holdoutDir (paths relative to it, sha256 of the bytes
// read): the path-list digest with each path made relative to the package
// root pkgDir (for the TRVM layout, literally
// "../../../governance/holdout/<file>"). Both directories are made absolute
// and cleaned first; symbolic links are not resolved (the reference uses
// path.relative, which does not either).
func DigestOf(pkgDir, holdoutDir string, files []pkgwalk.FileDigest) (string, error) {
	a, err := filepath.Abs(pkgDir)
	if err != nil {
		return "", err
	}
	h, err := filepath.Abs(holdoutDir)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(a, h)
	if err != nil {
		return "", fmt.Errorf("holdout directory relative to the package: %w", err)
	}
	prefix := filepath.ToSlash(rel) + "/"
	out := make([]pkgwalk.FileDigest, len(files))
	for i, f := range files {
		out[i] = pkgwalk.FileDigest{Path: prefix + f.Path, SHA256: f.SHA256}
	}
	return pkgwalk.PathListDigest(out), nil
}
