package pkgwalk

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"golang.org/x/sys/unix"
)

// ListRegularFiles returns every regular file under dir with its SHA-256,
// paths relative to dir, '/'-separated, sorted in UTF-16 order: the file
// set of the release-surface digests (TRVM-FORMATS §3). It uses the same
// descriptor walk as Walk but only refuses what is not a regular file or a
// directory (a symlink, FIFO, socket, device, or a mount inside dir): those
// are an error, never skipped, since a skipped entry is an unmeasured one.
func ListRegularFiles(dir string) ([]File, error) {
	t, err := Walk(dir, WalkOptions{plain: true})
	if err != nil {
		return nil, err
	}
	if err := t.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return t.Files, nil
}

// DigestOfPaths is the reference's digestOfPaths (TRVM-FORMATS §5.3): for
// each listed path (relative to root), a regular file contributes
// {path, sha256}, a directory every regular file beneath it (recursively),
// and a path that does not exist {path, "ABSENT"}; the result is the
// path-list digest of all entries and the entries, sorted. Listed paths are
// opened beneath root with openat2 and no symlink anywhere is followed; a
// symlink or special file is an error.
func DigestOfPaths(root string, paths []string) (string, []FileDigest, error) {
	rootf, prob, err := openRoot(root)
	if err != nil {
		return "", nil, err
	}
	if prob != nil {
		return "", nil, fmt.Errorf("%s: %w", root, prob)
	}
	defer rootf.Close()
	sorted := slices.Clone(paths)
	slices.SortFunc(sorted, evidence.CompareUTF16)
	var out []FileDigest
	for _, p := range sorted {
		p = strings.TrimSuffix(p, "/")
		for seg := range strings.SplitSeq(p, "/") {
			// A listed path names one place beneath root: ".." (which
			// openat2 would refuse as a crossing, under another rule), "."
			// or an empty segment would let two spellings digest one file.
			if seg == "" || seg == "." || seg == ".." {
				return "", nil, &RefusalError{Path: p, Rule: errBadSegment, Detail: "listed path"}
			}
		}
		// Typed first through an O_PATH descriptor, which opens nothing: a
		// FIFO, socket or device is refused without being opened, as the
		// walk refuses one (opening a FIFO releases a writer waiting on
		// it; opening a device can act on it).
		pfd, err := openEntry(int(rootf.Fd()), p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			out = append(out, FileDigest{Path: p, SHA256: Absent})
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", root, openError(p, err))
		}
		var pst unix.Stat_t
		err = unix.Fstat(pfd, &pst)
		unix.Close(pfd)
		if err != nil {
			return "", nil, fmt.Errorf("fstat %s/%s: %w", root, p, err)
		}
		if t := pst.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFDIR {
			return "", nil, fmt.Errorf("%s: %w", root, &RefusalError{Path: p, Rule: typeRule(pst.Mode)})
		}
		fd, err := openEntry(int(rootf.Fd()), p, openFlags)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", root, openError(p, err))
		}
		f := os.NewFile(uintptr(fd), p)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			f.Close()
			return "", nil, fmt.Errorf("fstat %s/%s: %w", root, p, err)
		}
		if st.Dev != pst.Dev || st.Ino != pst.Ino {
			f.Close()
			return "", nil, fmt.Errorf("%s: %w", root, &RefusalError{Path: p, Rule: errChanged, Detail: "replaced while being opened"})
		}
		var t *Tree
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			t, err = walkFrom(context.Background(), f, p, root, WalkOptions{plain: true}, nil)
		case unix.S_IFREG:
			t, err = hashOne(f, p, st.Size)
		default:
			err = &RefusalError{Path: p, Rule: typeRule(st.Mode)}
		}
		f.Close()
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", root, err)
		}
		if err := t.Err(); err != nil {
			return "", nil, fmt.Errorf("%s: %w", root, err)
		}
		out = append(out, t.Digests()...)
	}
	SortByPath(out)
	return PathListDigest(out), out, nil
}

// hashOne reads one regular file open at f as a walk would.
func hashOne(f *os.File, p string, size int64) (*Tree, error) {
	w := &walker{opts: WalkOptions{plain: true}}
	w.read(int(f.Fd()), p, size, make([]byte, 256<<10))
	return w.finish(p), nil
}

// openError names the rule behind a failed openat2 of a listed path.
func openError(p string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return &RefusalError{Path: p, Rule: ErrSymlink}
	case errors.Is(err, unix.EXDEV):
		return &RefusalError{Path: p, Rule: errMountPoint}
	case errors.Is(err, unix.ENXIO):
		return &RefusalError{Path: p, Rule: errSocket}
	}
	return &RefusalError{Path: p, Rule: errUnreadable, Detail: err.Error()}
}
