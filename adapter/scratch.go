package adapter

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// StagingPrefix begins the name of every staging directory [Execute] makes
// (in ExecuteOptions.ScratchDir, os.TempDir by default). After a reveal it
// holds the revealed challenges: a process killed before its deferred
// removal leaves it, and [GCStaging] removes it.
const StagingPrefix = "cleanroom-adapter-"

// newStagingDir creates a staging directory for impl and holds an
// exclusive flock on it until release: a held lock is how GCStaging tells
// a live measurement's directory from one whose process is gone. The lock
// is on the directory's own descriptor, so the staged view holds no file
// of cleanroom's.
func newStagingDir(scratch, impl string) (dir string, release func(), err error) {
	dir, err = os.MkdirTemp(scratch, StagingPrefix+impl+"-")
	if err != nil {
		return "", nil, fmt.Errorf("staging directory: %w", err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		var st unix.Stat_t
		if err == nil {
			err = unix.Fstat(fd, &st)
		}
		// A gc between the mkdir and the lock removed it: staging into a
		// directory no name reaches would fail later and less clearly.
		if err == nil && st.Nlink == 0 {
			err = errors.New("removed by a concurrent sandbox gc")
		}
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("staging directory %s: lock: %w", dir, err)
	}
	return dir, func() { unix.Close(fd) }, nil
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
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", dir, err))
			continue
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
			rep.Live = append(rep.Live, dir)
			unix.Close(fd)
			continue
		} else if err != nil {
			problems = append(problems, fmt.Errorf("%s: lock: %w", dir, err))
			unix.Close(fd)
			continue
		}
		// Removed while the lock is held: no measurement can take it now.
		if !dryRun {
			if err := os.RemoveAll(dir); err != nil {
				problems = append(problems, err)
				unix.Close(fd)
				continue
			}
		}
		unix.Close(fd)
		rep.Removed = append(rep.Removed, dir)
	}
	slices.Sort(rep.Removed)
	slices.Sort(rep.Live)
	return rep, errors.Join(problems...)
}
