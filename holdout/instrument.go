package holdout

import (
	"fmt"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// Instrument is what measures a run, all of it read from the pinned
// package and the holdout directory: the boundary schemas, the scorer's
// self-test over the package's synthetic fixture, the challenge set and the
// scorer over it.
type Instrument struct {
	Schemas  *Schemas
	SelfTest *FixtureReport
	Holdout  *Holdout
	Scorer   *Scorer
}

// errInstrument: an instrument file is not the one the release records in
// experiment_files.
var errInstrument = fault.New(fault.Refused, "instrument file is not the one the release records")

// LoadInstrument loads the instrument in the order that makes each step
// trustworthy: the schemas of pkgDir, the self-test (a failing one stops
// here with ErrSelfTest: nothing such a scorer says counts), then the
// challenge set — against what a release committed when rel is given
// ([LoadCommitted]), otherwise as the directory holds it ([LoadDir]) — and
// the scorer, which refuses a set that breaks the recipe schema. What was
// loaded before a failure is returned with the error.
func LoadInstrument(pkgDir, holdoutDir string, rel *Committed) (*Instrument, error) {
	in := &Instrument{}
	var err error
	if in.Schemas, err = LoadPackageSchemas(pkgDir); err != nil {
		return in, err
	}
	if rel != nil {
		// The schemas are read by path after the run was verified: the
		// bytes compiled must be the ones the release records, or a schema
		// opened up (or swapped for a symlink) since decides the refusals.
		for _, name := range []string{RecipeSchemaFile, ObservationSchemaFile} {
			if got, want := in.Schemas.digests[name], rel.Files["experiment/"+name]; got != want {
				in.Schemas = nil
				return in, fmt.Errorf("%s: sha256 %s, the release records %q: %w", filepath.Join(pkgDir, "experiment", name), got, want, errInstrument)
			}
		}
	}
	if in.SelfTest, err = SelfTestWith(in.Schemas, filepath.Join(pkgDir, "experiment", "fixtures")); err != nil {
		return in, err
	}
	if !in.SelfTest.OK() {
		return in, fmt.Errorf("%w: %v", ErrSelfTest, in.SelfTest.Problems)
	}
	if rel != nil {
		in.Holdout, err = LoadCommitted(pkgDir, holdoutDir, rel, in.Schemas)
	} else {
		in.Holdout, err = LoadDir(holdoutDir)
	}
	if err != nil {
		return in, err
	}
	in.Scorer, err = NewScorer(in.Schemas, in.Holdout.Challenges)
	return in, err
}
