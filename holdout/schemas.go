package holdout

import (
	"fmt"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/evidence/schema"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// Schema file names inside a package's experiment/ directory.
const (
	RecipeSchemaFile      = "holdout-recipe-v1.schema.json"
	ObservationSchemaFile = "holdout-observation-v1.schema.json"
)

// Schemas are the two boundary schemas of a pinned package: every challenge
// is validated against Recipe and every observation document against
// Observation before anything is scored.
type Schemas struct {
	Recipe      *schema.Schema
	Observation *schema.Schema
	// sha256 of the bytes each was compiled from, by file name.
	digests map[string]string
}

// LoadSchemas reads and compiles both schemas from experimentDir (the
// package's experiment/ directory). They are never embedded in the binary:
// the schema that decides a refusal is the one inside experiment_digest,
// so editing it moves the release identity.
func LoadSchemas(experimentDir string) (*Schemas, error) {
	digests := map[string]string{}
	recipe, err := loadSchema(experimentDir, RecipeSchemaFile, digests)
	if err != nil {
		return nil, err
	}
	obs, err := loadSchema(experimentDir, ObservationSchemaFile, digests)
	if err != nil {
		return nil, err
	}
	return &Schemas{Recipe: recipe, Observation: obs, digests: digests}, nil
}

// LoadPackageSchemas is LoadSchemas for a package root (the directory that
// holds experiment/).
func LoadPackageSchemas(pkgDir string) (*Schemas, error) {
	return LoadSchemas(filepath.Join(pkgDir, "experiment"))
}

func loadSchema(dir, name string, digests map[string]string) (*schema.Schema, error) {
	p := filepath.Join(dir, name)
	// The project's one bounded reader of a regular file: a FIFO or an
	// oversized file in the package is refused, not read.
	b, err := evidence.ReadFileBytes(p)
	if err != nil {
		return nil, fmt.Errorf("reading schema: %w", err)
	}
	digests[name] = pkgwalk.SHA256Hex(b)
	s, err := schema.Compile(name, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return s, nil
}
