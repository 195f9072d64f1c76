package experiment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// listRegularFiles returns every regular file under dir with its SHA-256,
// paths relative to dir with '/', sorted. A symbolic link or special file
// anywhere is refused (ErrNotRegular).
//
// TODO(pkgwalk): switch to pkgwalk.ListRegularFiles when it lands; this is
// the interim listing, kept to the same rules.
//
// Each entry is opened from its parent directory's descriptor with
// O_NOFOLLOW (a symlink swapped in after the directory was read fails to
// open instead of being followed) and O_NONBLOCK (a FIFO cannot stall the
// walk), and the decision is made on fstat of that descriptor, which is the
// one then read: nothing is re-resolved by path after it was checked.
func listRegularFiles(dir string) ([]pkgwalk.FileDigest, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, &ReleaseError{File: dir, Rule: ErrNotRegular, Detail: "the root is not a directory (or is a symbolic link)"}
		}
		return nil, fmt.Errorf("opening %s: %w", dir, &os.PathError{Op: "open", Path: dir, Err: err})
	}
	var out []pkgwalk.FileDigest
	if err := walkDirFD(fd, dir, "", &out); err != nil {
		return nil, err
	}
	pkgwalk.SortByPath(out)
	return out, nil
}

// walkDirFD walks the directory open at fd (it takes ownership of fd).
func walkDirFD(fd int, root, rel string, out *[]pkgwalk.FileDigest) error {
	d := os.NewFile(uintptr(fd), path.Join(root, rel))
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("reading directory %s: %w", d.Name(), err)
	}
	for _, name := range names {
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err != nil {
			if errors.Is(err, unix.ELOOP) {
				return &ReleaseError{File: root, Pointer: p, Rule: ErrNotRegular, Detail: "symbolic link"}
			}
			return fmt.Errorf("opening %s: %w", path.Join(root, p), err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(cfd, &st); err != nil {
			unix.Close(cfd)
			return fmt.Errorf("stat %s: %w", path.Join(root, p), err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if err := walkDirFD(cfd, root, p, out); err != nil {
				return err
			}
		case unix.S_IFREG:
			f := os.NewFile(uintptr(cfd), path.Join(root, p))
			b, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("reading %s: %w", path.Join(root, p), err)
			}
			*out = append(*out, pkgwalk.FileDigest{Path: p, SHA256: pkgwalk.SHA256Hex(b)})
		default:
			unix.Close(cfd)
			return &ReleaseError{File: root, Pointer: p, Rule: ErrNotRegular, Detail: fmt.Sprintf("file type %#o", st.Mode&unix.S_IFMT)}
		}
	}
	return nil
}
