package experiment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/holdout"
)

// CheckHoldout is the rule of `holdout check`: it reads the holdout
// directory dir (INDEX.json and exactly the files it names) and validates
// every challenge against s, the recipe schema of the package pkg. When pkg
// holds SPEC-RELEASE.json, the set must also be the one that release
// committed to (holdout.LoadCommitted recomputes holdout_commitment and
// holdout_entries over the bytes read, paths relative to pkg), and rel is
// that release; rel is nil when the package has none, and then nothing was
// compared.
func CheckHoldout(pkg, dir string, s *holdout.Schemas) (h *holdout.Holdout, rel *Release, err error) {
	relPath := filepath.Join(pkg, ReleaseFile)
	_, err = os.Lstat(relPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		h, err := holdout.LoadDir(dir)
		if err != nil {
			return nil, nil, err
		}
		if probs := holdout.ValidateChallenges(s, h.Challenges); len(probs) > 0 {
			return nil, nil, &holdout.RefusedError{Problems: probs}
		}
		return h, nil, nil
	case err != nil:
		// Only a release that is not there means nothing was committed: one
		// that cannot be examined must not let an altered set pass as an
		// uncommitted one.
		return nil, nil, fmt.Errorf("reading release record: %w", err)
	}
	// A link or a non-regular file at the name is ReadRelease's to refuse,
	// not a reason to skip the comparison.
	if rel, err = ReadRelease(relPath); err != nil {
		return nil, nil, err
	}
	if h, err = holdout.LoadCommitted(pkg, dir, rel.Committed(), s); err != nil {
		return nil, nil, err
	}
	return h, rel, nil
}
