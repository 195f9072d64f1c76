package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// StageDir makes an empty staging directory beside dir, for a caller that
// writes a whole directory and then publishes it with [CreateDir]. Its name
// starts with [TempPrefix], so what an interrupted write left behind is
// recognisable. The caller removes it when it does not publish it.
func StageDir(dir string) (string, error) {
	dir = filepath.Clean(dir)
	stage, err := os.MkdirTemp(filepath.Dir(dir), TempPrefix+tempStem(filepath.Base(dir))+".*")
	if err != nil {
		return "", fmt.Errorf("staging %s: %w", dir, err)
	}
	return stage, nil
}

// CreateDir publishes the fully written directory stage (from [StageDir])
// as dir, only if nothing is there: stage gets mode perm, is fsynced, is
// renamed into place with RENAME_NOREPLACE, and dir's parent is fsynced.
// When dir exists the error matches fs.ErrExist and nothing is changed; a
// reader sees the whole directory or none. The files in stage must already
// be fsynced (Create writes them so).
func CreateDir(stage, dir string, perm os.FileMode) error {
	return publishDir(stage, dir, perm, unix.RENAME_NOREPLACE)
}

// ReplaceEmptyDir is CreateDir for a dir that may exist as an empty
// directory: the rename replaces it in one step (the kernel refuses to
// replace a directory that has any entry, so an entry that appears after
// the caller looked is never lost). When dir holds an entry the error
// matches ErrDirNotEmpty and nothing is changed; when dir is not a
// directory it matches syscall.ENOTDIR.
func ReplaceEmptyDir(stage, dir string, perm os.FileMode) error {
	return publishDir(stage, dir, perm, 0)
}

// ErrDirNotEmpty: ReplaceEmptyDir found an entry in the directory it was
// to replace.
var ErrDirNotEmpty = errors.New("directory is not empty")

func publishDir(stage, dir string, perm os.FileMode, flags uint) error {
	stage, dir = filepath.Clean(stage), filepath.Clean(dir)
	parent := filepath.Dir(dir)
	if filepath.Dir(stage) != parent {
		// A rename relative to one parent descriptor cannot move a
		// directory between two parents (nor across file systems).
		return fmt.Errorf("durable: stage %s is not beside %s: %w", stage, dir, errBadName)
	}
	err := withDir(stage, func(fd int) error {
		// The umask must not decide the mode of published evidence.
		if err := unix.Fchmod(fd, uint32(perm.Perm())); err != nil {
			return &os.PathError{Op: "chmod", Path: stage, Err: err}
		}
		return fsyncFD(fd, stage)
	})
	if err != nil {
		return err
	}
	return withDir(parent, func(fd int) error {
		if err := rename(fd, filepath.Base(stage), filepath.Base(dir), flags, true); err != nil {
			switch {
			case flags&unix.RENAME_NOREPLACE != 0 && errors.Is(err, unix.EEXIST):
				return &os.PathError{Op: "create", Path: dir, Err: fs.ErrExist}
			case flags&unix.RENAME_NOREPLACE == 0 && (errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST)):
				// rename(2) reports a non-empty target as either.
				return &os.PathError{Op: "replace", Path: dir, Err: ErrDirNotEmpty}
			}
			return &os.PathError{Op: "rename", Path: dir, Err: err}
		}
		return fsyncFD(fd, parent)
	})
}
