package adapter

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
)

// StagingPrefix begins the name of every staging directory [Execute] makes
// (in ExecuteOptions.ScratchDir, os.TempDir by default). After a reveal it
// holds the revealed challenges: a process killed before its deferred
// removal leaves it, and [GCStaging] removes it.
const StagingPrefix = "cleanroom-adapter-"

// newStagingDir creates a staging directory for impl, held
// (durable.HoldDir) until release: a held directory is how GCStaging tells
// a live measurement's directory from one whose process is gone.
func newStagingDir(scratch, impl string) (dir string, release func(), err error) {
	dir, err = os.MkdirTemp(scratch, StagingPrefix+impl+"-")
	if err != nil {
		return "", nil, fmt.Errorf("staging directory: %w", err)
	}
	if release, err = durable.HoldDir(dir); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("staging directory: %w", err)
	}
	return dir, release, nil
}

// StagingGC is what [GCStaging] found.
type StagingGC struct {
	Dir     string   `json:"scratch_dir"`
	Removed []string `json:"removed"` // orphaned staging directories (with DryRun: to remove)
	Live    []string `json:"live"`    // held by a running measurement, untouched
}

// GCStaging removes the staging directories under scratch (os.TempDir
// when empty) whose measurement is gone: their lock can be taken without
// waiting. A live one is listed and left alone. Only directories named
// StagingPrefix… are considered, never followed through a symbolic link.
// With dryRun nothing is removed.
func GCStaging(scratch string, dryRun bool) (*StagingGC, error) {
	if scratch == "" {
		scratch = os.TempDir()
	}
	rep := &StagingGC{Dir: scratch, Removed: []string{}, Live: []string{}}
	ents, err := os.ReadDir(scratch)
	if errors.Is(err, fs.ErrNotExist) {
		return rep, nil // nothing was ever staged there
	}
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	var problems []error
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), StagingPrefix) {
			continue // a link named like one is not followed: not ours
		}
		dir := filepath.Join(scratch, e.Name())
		release, err := durable.HoldDir(dir)
		if errors.Is(err, durable.ErrHeld) {
			rep.Live = append(rep.Live, dir)
			continue
		}
		if err != nil {
			problems = append(problems, err)
			continue
		}
		// Removed while held: no measurement can take it now.
		if !dryRun {
			if err := os.RemoveAll(dir); err != nil {
				problems = append(problems, err)
				release()
				continue
			}
		}
		release()
		rep.Removed = append(rep.Removed, dir)
	}
	slices.Sort(rep.Removed)
	slices.Sort(rep.Live)
	return rep, errors.Join(problems...)
}
