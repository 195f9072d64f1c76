package durable

import (
	"errors"

	"golang.org/x/sys/unix"
)

// rename renames from to to in the directory fd: with RENAME_NOREPLACE
// through renameNoReplace, else by rename(2) (which replaces).
func rename(fd int, from, to string, flags uint, dir bool) error {
	if flags&unix.RENAME_NOREPLACE != 0 {
		return renameNoReplace(fd, from, to, dir)
	}
	return unix.Renameat(fd, from, fd, to)
}

// renameNoReplace renames from to to, both names in the directory fd,
// never replacing anything at to: an existing to is EEXIST and nothing
// changes. renameat2 RENAME_NOREPLACE does it in one step. Where that
// answers EINVAL (gVisor's runsc 20221219 takes no renameat2 flags; some
// filesystems neither) the same promise is kept without it: a file by
// linkNoReplace, a directory by renameDirNoReplace.
func renameNoReplace(fd int, from, to string, dir bool) error {
	err := unix.Renameat2(fd, from, fd, to, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) {
		return err
	}
	if dir {
		return renameDirNoReplace(fd, from, to)
	}
	return linkNoReplace(fd, from, to)
}

// linkNoReplace publishes the file from as to by link(2), which never
// replaces an existing name (EEXIST), then removes from. A crash between
// the two leaves the file under both names: the temporary one is
// recognisable by TempPrefix, and the published one is whole.
func linkNoReplace(fd int, from, to string) error {
	if err := unix.Linkat(fd, from, fd, to, 0); err != nil {
		return err
	}
	return unix.Unlinkat(fd, from, 0)
}

// renameDirNoReplace publishes the directory from as to where no flag
// makes rename(2) refuse to replace: a directory cannot be linked. It
// refuses a to that exists (EEXIST), then renames. Anything that appears
// at to in between is not replaced either, except an empty directory
// (rename(2) replaces only that: a file is ENOTDIR, a directory with an
// entry ENOTEMPTY, both reported as EEXIST) — nothing written is lost.
func renameDirNoReplace(fd int, from, to string) error {
	var st unix.Stat_t
	switch err := unix.Fstatat(fd, to, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		return unix.EEXIST
	case !errors.Is(err, unix.ENOENT):
		return err
	}
	err := unix.Renameat(fd, from, fd, to)
	if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.ENOTDIR) {
		return unix.EEXIST
	}
	return err
}
