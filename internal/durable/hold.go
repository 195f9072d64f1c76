package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cleanroom-dev/cleanroom/internal/fsx"
	"golang.org/x/sys/unix"
)

// ErrHeld: the directory is held by a live process ([HoldDir]).
var ErrHeld = errors.New("directory held by a live process")

// HoldDir takes an exclusive flock on the directory dir without waiting
// and holds it until release. A held lock is how a clean-up tells a
// directory a live process is filling from one a killed process left: the
// kernel drops the lock with the process, however it ended. The lock is
// on the directory's own descriptor (fsx.OpenDir: a symlink at dir is
// refused), so the directory holds no file of the lock's. ErrHeld when
// another holds it; an error too when dir was removed before the lock was
// taken (a clean-up got there first). It is also the one writer's lock of a directory (the AMBER
// index). release may be called more than once.
func HoldDir(dir string) (release func(), err error) {
	// A symlink at dir is refused (fsx.OpenDir: on gVisor too).
	fd, err := fsx.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		err = fmt.Errorf("%s: %w", dir, ErrHeld)
	} else if err != nil {
		err = &os.PathError{Op: "flock", Path: dir, Err: err}
	} else {
		var st unix.Stat_t
		if err = unix.Fstat(fd, &st); err == nil && st.Nlink == 0 {
			err = &os.PathError{Op: "hold", Path: dir, Err: fs.ErrNotExist}
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	// Once only: a second close would close whatever descriptor took the
	// number meanwhile.
	return sync.OnceFunc(func() {
		// Unlocked explicitly: a child forked meanwhile holds a copy of the
		// descriptor until its exec, and closing ours alone would release
		// the lock only then. Should the unlock fail, the close (with the
		// last copy) still releases it.
		_ = unix.Flock(fd, unix.LOCK_UN)
		unix.Close(fd)
	}), nil
}

// heldInfix marks a staging directory made by StageDirHeld.
const heldInfix = ".held-"

// StageDirHeld is [StageDir] for a writer that may be killed: the staging
// directory is held ([HoldDir]) until release, and its name marks it as
// held, so that [RemoveStaleStages] removes it once its writer is gone and
// never while the writer lives. The caller publishes it with [CreateDir]
// or removes it, then releases it.
func StageDirHeld(dir string) (stage string, release func(), err error) {
	dir = filepath.Clean(dir)
	stage, err = os.MkdirTemp(filepath.Dir(dir), TempPrefix+tempStem(filepath.Base(dir))+heldInfix+"*")
	if err != nil {
		return "", nil, fmt.Errorf("staging %s: %w", dir, err)
	}
	if release, err = HoldDir(stage); err != nil {
		os.RemoveAll(stage)
		return "", nil, fmt.Errorf("staging %s: %w", dir, err)
	}
	return stage, release, nil
}

// RemoveStaleStages removes the staging directories of dir made by
// [StageDirHeld] whose writer is gone (their lock can be taken); a held
// one is left alone. It returns what it removed.
func RemoveStaleStages(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	parent, prefix := filepath.Dir(dir), TempPrefix+tempStem(filepath.Base(dir))+heldInfix
	ents, err := os.ReadDir(parent)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		// Only a directory of exactly this name's pattern, never a link.
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		p := filepath.Join(parent, e.Name())
		release, err := HoldDir(p)
		if errors.Is(err, ErrHeld) || errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// Removed while held: no writer can take it meanwhile.
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		} else {
			removed = append(removed, p)
		}
		release()
	}
	return removed, errors.Join(errs...)
}

// RemoveTemps removes the temporary files ([TempPrefix]…) an interrupted
// write left in dir, by name beneath dir's descriptor (a link named like
// one is removed, never followed; a directory is left alone). Only a caller
// that holds the lock every writer of dir takes may call it: a temporary
// file of a live writer would go too. It returns the names removed.
func RemoveTemps(dir string) ([]string, error) {
	// A directory swapped for a symlink is not listed or cleaned
	// through it (fsx.OpenDir: on gVisor too).
	fd, err := fsx.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: err}
	}
	var removed []string
	var errs []error
	for _, n := range names {
		if !strings.HasPrefix(n, TempPrefix) {
			continue
		}
		if err := unix.Unlinkat(int(f.Fd()), n, 0); err != nil {
			if !errors.Is(err, unix.EISDIR) {
				errs = append(errs, &os.PathError{Op: "remove", Path: filepath.Join(dir, n), Err: err})
			}
			continue
		}
		removed = append(removed, n)
	}
	return removed, errors.Join(errs...)
}
