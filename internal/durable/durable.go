package durable

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/internal/fsx"
	"golang.org/x/sys/unix"
)

// errBadName: the name given is not a plain file name of the directory
// held (empty, "." or "..", or it has a separator).
var errBadName = errors.New("not a plain file name")

// TempPrefix starts the name of every temporary file this package writes.
const TempPrefix = ".cleanroom-tmp-"

// Create publishes data as dir/name only if nothing is there. When the name
// exists the error matches fs.ErrExist and nothing is changed.
func Create(dir, name string, data []byte, perm os.FileMode) error {
	return publish(dir, name, data, perm, unix.RENAME_NOREPLACE)
}

// Replace replaces dir/name with data atomically: a crash leaves either the
// old bytes or the new ones.
func Replace(dir, name string, data []byte, perm os.FileMode) error {
	return publish(dir, name, data, perm, 0)
}

// CreateFile is Create for a path.
func CreateFile(path string, data []byte, perm os.FileMode) error {
	return Create(filepath.Dir(path), filepath.Base(path), data, perm)
}

// ReplaceFile is Replace for a path.
func ReplaceFile(path string, data []byte, perm os.FileMode) error {
	return Replace(filepath.Dir(path), filepath.Base(path), data, perm)
}

// CreateIn is Create in the directory open as dir (named dir.Name() in
// errors): for a caller that checked that very directory (where it is, what
// it is) and must write into it, not into whatever its path names by then.
func CreateIn(dir *os.File, name string, data []byte, perm os.FileMode) error {
	if err := checkName(dir.Name(), name); err != nil {
		return err
	}
	return publishAt(int(dir.Fd()), dir.Name(), name, data, perm, unix.RENAME_NOREPLACE)
}

// ReplaceIn is Replace in the directory open as dir: the held directory is
// the one written, whatever its path names by then.
func ReplaceIn(dir *os.File, name string, data []byte, perm os.FileMode) error {
	if err := checkName(dir.Name(), name); err != nil {
		return err
	}
	return publishAt(int(dir.Fd()), dir.Name(), name, data, perm, 0)
}

func checkName(dir, name string) error {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		// A separator would address another directory than the one held.
		return fmt.Errorf("durable: %q in %s: %w", name, dir, errBadName)
	}
	return nil
}

func publish(dir, name string, data []byte, perm os.FileMode, flags uint) error {
	if err := checkName(dir, name); err != nil {
		return err
	}
	return withDir(dir, func(fd int) error { return publishAt(fd, dir, name, data, perm, flags) })
}

// publishAt writes data to a temporary file beneath the directory fd and
// renames it to name there (dir names the directory in errors).
func publishAt(fd int, dir, name string, data []byte, perm os.FileMode, flags uint) error {
	tmp, err := writeTemp(fd, dir, name, data, perm)
	if err != nil {
		return err
	}
	if err := rename(fd, tmp, name, flags, false); err != nil {
		_ = unix.Unlinkat(fd, tmp, 0)
		if errors.Is(err, unix.EEXIST) {
			return &os.PathError{Op: "create", Path: filepath.Join(dir, name), Err: fs.ErrExist}
		}
		return &os.PathError{Op: "rename", Path: filepath.Join(dir, name), Err: err}
	}
	return fsyncFD(fd, dir)
}

func writeTemp(dirfd int, dir, name string, data []byte, perm os.FileMode) (string, error) {
	var r [8]byte
	_, _ = rand.Read(r[:])
	tmp := TempPrefix + tempStem(name) + "." + hex.EncodeToString(r[:])
	// O_EXCL|O_NOFOLLOW: a file or symlink planted at the temporary name is
	// never written through (nor its target), the create simply fails.
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		return "", &os.PathError{Op: "create", Path: filepath.Join(dir, tmp), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	_, werr := f.Write(data)
	if werr == nil {
		// The umask must not decide the mode of evidence.
		werr = f.Chmod(perm.Perm())
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return "", fmt.Errorf("writing %s: %w", filepath.Join(dir, tmp), werr)
	}
	return tmp, nil
}

// maxStem is how much of the target's name a temporary name repeats: the
// prefix, the stem and a random suffix (at most 17 bytes here, 11 for
// StageDir) stay within NAME_MAX (255) whatever the name.
const maxStem = 200

// tempStem is name, cut to maxStem bytes: a name of the longest length the
// file system accepts must not fail because its temporary name is longer.
func tempStem(name string) string {
	if len(name) > maxStem {
		return name[:maxStem]
	}
	return name
}

// SyncDir fsyncs a directory so a created or renamed entry survives a crash
// of the machine, not only of the process.
func SyncDir(dir string) error {
	return withDir(dir, func(fd int) error { return fsyncFD(fd, dir) })
}

// MkdirAll creates dir and any missing parents, fsyncing each parent a new
// directory was created in. An existing non-directory is an error.
func MkdirAll(dir string) error {
	fi, err := os.Lstat(dir)
	if err == nil {
		return isDir(dir, fi)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if err := MkdirAll(parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); errors.Is(err, fs.ErrExist) {
		// Created by someone else since the Lstat: it must still be a
		// directory, not a file or symlink planted in the gap.
		fi, err := os.Lstat(dir)
		if err != nil {
			return err
		}
		return isDir(dir, fi)
	} else if err != nil {
		return err
	}
	return SyncDir(parent)
}

// isDir refuses a non-directory (a symlink included) where a directory is
// wanted; the error matches syscall.ENOTDIR.
func isDir(dir string, fi fs.FileInfo) error {
	if !fi.IsDir() {
		return &os.PathError{Op: "mkdir", Path: dir, Err: unix.ENOTDIR}
	}
	return nil
}

func withDir(dir string, fn func(fd int) error) error {
	// A directory swapped for a symlink is refused (ENOTDIR), so nothing
	// is published into wherever the link points; fsx.OpenDir also
	// refuses it on gVisor, where O_NOFOLLOW alone would not.
	fd, err := fsx.OpenDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return fn(fd)
}

func fsyncFD(fd int, dir string) error {
	if err := unix.Fsync(fd); err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return nil
}
