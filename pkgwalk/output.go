package pkgwalk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"golang.org/x/sys/unix"
)

// IsInside reports whether the file path out (which need not exist yet)
// would be created inside the directory tree at root. It compares device
// and inode numbers of out's parent directory and each of its ancestors
// (reached through "..", from descriptors) with root's, so no spelling of
// the path (symlinks, "..", bind mounts of root, a trailing slash, case)
// hides an output inside the package, as a string-prefix test would. (A
// bind mount of a subdirectory of root, made elsewhere, is not recognised:
// nothing in that mount leads back up to root.)
func IsInside(root, out string) (bool, error) {
	fd, err := unix.Open(filepath.Dir(out), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("opening the directory of %s: %w", out, err)
	}
	defer unix.Close(fd)
	return isInside(fd, root)
}

// isInside reports whether the directory open at dirfd is root or lies
// beneath it.
func isInside(dirfd int, root string) (bool, error) {
	var rst unix.Stat_t
	if err := unix.Stat(root, &rst); err != nil {
		return false, fmt.Errorf("stat %s: %w", root, err)
	}
	fd, err := unix.Dup(dirfd)
	if err != nil {
		return false, err
	}
	for {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return false, err
		}
		if st.Dev == rst.Dev && st.Ino == rst.Ino {
			unix.Close(fd)
			return true, nil
		}
		parent, err := unix.Openat(fd, "..", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return false, fmt.Errorf("walking up from an output directory: %w", err)
		}
		var pst unix.Stat_t
		if err := unix.Fstat(parent, &pst); err != nil {
			unix.Close(parent)
			return false, err
		}
		if pst.Dev == st.Dev && pst.Ino == st.Ino {
			// "/" is its own parent: the top was reached.
			unix.Close(parent)
			return false, nil
		}
		fd = parent
	}
}

// WriteManifestFile writes the record file of m (MarshalRecord(note)) at
// out, never inside any of the trees given (ErrOutputInside): the manifest
// is written beside a package or mount, since a manifest inside is a file
// outside the identity it describes. The file is created exclusively (an
// existing out is an error) and appears complete or not at all: it is
// written to a temporary file in the same directory, fsynced, then renamed
// into place without replacing anything (durable.CreateIn).
func WriteManifestFile(out string, m *Manifest, note string, trees ...string) error {
	b, err := m.MarshalRecord(note)
	if err != nil {
		return err
	}
	// One descriptor for the check and the write: checking the path and
	// then writing to the path would let a directory renamed or re-linked
	// in between receive the manifest inside the package after all.
	dir, err := os.OpenFile(filepath.Dir(out), os.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the directory of %s: %w", out, err)
	}
	defer dir.Close()
	for _, t := range trees {
		inside, err := isInside(int(dir.Fd()), t)
		if err != nil {
			return err
		}
		if inside {
			return &RefusalError{Path: out, Rule: ErrOutputInside, Detail: "inside " + t}
		}
	}
	if err := durable.CreateIn(dir, filepath.Base(out), b, 0o644); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s already exists (records are never overwritten): %w", out, err)
		}
		return err
	}
	return nil
}
