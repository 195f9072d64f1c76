package fsx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// alwaysFlags are added to every open (see withAlways):
//   - O_CLOEXEC: a descriptor never leaks into a child process (the
//     candidate's container, an adapter, git).
//   - O_NOFOLLOW, unless the open is O_PATH: a symbolic link as the last
//     component is refused (ELOOP), not followed; RESOLVE_NO_SYMLINKS
//     covers the components before it. With O_PATH, O_NOFOLLOW would open
//     the link itself, so an O_PATH caller that wants that passes it; left
//     out, RESOLVE_NO_SYMLINKS refuses the link with ELOOP.
//   - O_NOCTTY, unless the open is O_PATH (which openat2 allows only with
//     O_CLOEXEC, O_DIRECTORY and O_NOFOLLOW): a terminal device planted at
//     the name cannot become the controlling terminal by being opened.
const alwaysFlags = unix.O_CLOEXEC

// resolveBeneath is the resolve set every caller needs:
//   - RESOLVE_BENEATH: the lookup never leaves the directory: an absolute
//     name or a ".." that would climb out of it is refused (EXDEV).
//   - RESOLVE_NO_SYMLINKS: no symbolic link is followed in any component,
//     so a link planted in the tree cannot stand in for a file or a
//     directory.
//   - RESOLVE_NO_MAGICLINKS: no /proc magic link (/proc/self/fd/N,
//     /proc/PID/root) is followed; they jump to any file a process holds.
//   - RESOLVE_NO_XDEV: a mount stacked on an entry (a bind mount of a host
//     file or directory over a name in the tree) is refused, not entered.
//     [AcrossMounts] drops it.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// Option changes what Open resolves.
type Option int

const (
	// AcrossMounts drops RESOLVE_NO_XDEV: the lookup may cross into a
	// mount beneath the directory. For trees whose mounts are part of the
	// layout by design; the caller says why where it passes it.
	AcrossMounts Option = iota + 1
	// FollowInside drops RESOLVE_NO_SYMLINKS: symbolic links are followed,
	// each resolved beneath the directory as the name is (an absolute
	// target or a climb out of it is refused, EXDEV). For asking where a
	// link planted in a tree really leads: its text alone can stay inside
	// while a chain of links climbs out.
	FollowInside
)

// Open opens name beneath the directory dirfd with openat2(2) (or the
// walk that enforces the same rules where the kernel has none): flags (the
// access mode and what the caller needs, e.g. O_DIRECTORY, O_NONBLOCK,
// O_CREAT|O_EXCL) plus O_CLOEXEC|O_NOFOLLOW|O_NOCTTY (O_CLOEXEC only
// with O_PATH), resolved with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|RESOLVE_NO_XDEV
// unless an option says otherwise. mode is the permission of a file O_CREAT
// makes. It returns the raw errno (compare with errors.Is).
func Open(dirfd int, name string, flags int, mode uint32, opts ...Option) (int, error) {
	return auto().open(dirfd, name, flags, mode, opts...)
}

func (r resolver) open(dirfd int, name string, flags int, mode uint32, opts ...Option) (int, error) {
	resolve := uint64(resolveBeneath)
	for _, o := range opts {
		switch o {
		case AcrossMounts:
			resolve &^= unix.RESOLVE_NO_XDEV
		case FollowInside:
			resolve &^= unix.RESOLVE_NO_SYMLINKS
		}
	}
	return r.openat2(dirfd, name, &unix.OpenHow{
		Flags:   withAlways(flags),
		Mode:    uint64(mode),
		Resolve: resolve,
	})
}

// OpenFile opens the directory dir (dir itself must not be a symbolic
// link: ENOTDIR; links in the path leading to it are the caller's choice)
// and name beneath it as [Open] does, and returns the file named
// dir/name. Errors are *os.PathError naming dir/name.
func OpenFile(dir, name string, flags int, mode uint32, opts ...Option) (*os.File, error) {
	return auto().openFile(dir, name, flags, mode, opts...)
}

func (r resolver) openFile(dir, name string, flags int, mode uint32, opts ...Option) (*os.File, error) {
	full := filepath.Join(dir, filepath.FromSlash(name))
	d, err := openDirNoFollow(unix.AT_FDCWD, dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(d)
	fd, err := r.open(d, name, flags, mode, opts...)
	if err != nil {
		return nil, &os.PathError{Op: r.op(), Path: full, Err: err}
	}
	return os.NewFile(uintptr(fd), full), nil
}

// OpenDir opens the directory dir O_RDONLY|O_DIRECTORY|O_CLOEXEC (to
// read, fsync or lock it), refusing a symbolic link as its last component
// with ENOTDIR, as O_DIRECTORY|O_NOFOLLOW does on Linux, but on gVisor
// too, whose runsc 20221219 follows the link despite O_NOFOLLOW, and
// whatever "/" or "/." ends dir (with which the kernel would follow it). Links in
// the path leading to dir are the caller's choice. Errors are
// *os.PathError naming dir.
func OpenDir(dir string) (int, error) {
	return OpenDirAt(unix.AT_FDCWD, dir)
}

// OpenDirAt is [OpenDir] for name relative to the directory dirfd (as
// openat(2) resolves it: only its last component is checked). The
// directory opened is the one typed: reopened through the O_PATH
// descriptor that was checked (".").
func OpenDirAt(dirfd int, name string) (int, error) {
	pfd, err := openDirNoFollow(dirfd, name)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return fd, nil
}

// openDirNoFollow opens the directory name (relative to dirfd) O_PATH,
// refusing a symbolic link as its last component with ENOTDIR (what
// O_DIRECTORY|O_NOFOLLOW answers on Linux). The type is read from the
// O_PATH descriptor of the entry itself: gVisor's runsc 20221219 follows
// a link to a directory despite O_DIRECTORY|O_NOFOLLOW.
func openDirNoFollow(dirfd int, name string) (int, error) {
	fd, err := unix.Openat(dirfd, lastNamed(name), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: name, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: "fstat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		return -1, &os.PathError{Op: "open", Path: name, Err: unix.ENOTDIR}
	}
	return fd, nil
}

// lastNamed is name without a trailing "/" or "/." (any number of
// them): with either, the kernel follows a symbolic link as the last
// component despite O_NOFOLLOW, so "link/" would open the directory the
// link points at.
func lastNamed(name string) string {
	for {
		switch {
		case name == "/.":
			return "/"
		case len(name) > 1 && strings.HasSuffix(name, "/"):
			name = name[:len(name)-1]
		case len(name) > 2 && strings.HasSuffix(name, "/."):
			name = name[:len(name)-2]
		default:
			return name
		}
	}
}

// OpenPath opens the absolute path with no symbolic or magic link followed
// in any of its components. It is for a directory named by the operator
// (a state root): the path starts at / and so necessarily crosses mounts,
// which is why RESOLVE_BENEATH and RESOLVE_NO_XDEV do not apply.
func OpenPath(path string, flags int) (int, error) {
	return auto().openPath(path, flags)
}

func (r resolver) openPath(path string, flags int) (int, error) {
	return r.openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   withAlways(flags),
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// withAlways adds alwaysFlags, and O_NOFOLLOW|O_NOCTTY unless flags has
// O_PATH.
func withAlways(flags int) uint64 {
	flags |= alwaysFlags
	if flags&unix.O_PATH == 0 {
		flags |= unix.O_NOFOLLOW | unix.O_NOCTTY
	}
	return uint64(flags)
}

// resolver is how a name is resolved: by openat2(2), or by [walk] where
// the kernel has no openat2. Tests run every case through both.
type resolver struct{ walk bool }

// auto is this kernel's resolver, decided once: the walk only when
// openat2 answers ENOSYS (Linux before 5.6; gVisor, whose runsc 20221219
// does not implement it). Any other failure of openat2 (EPERM from a
// seccomp filter) is left to surface from the calls themselves: the walk
// is for a kernel that lacks the call, not for one that forbids it.
var auto = sync.OnceValue(func() resolver {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC})
	if err == nil {
		unix.Close(fd)
	}
	return resolver{walk: errors.Is(err, unix.ENOSYS)}
})

// op names the call in an *os.PathError.
func (r resolver) op() string {
	if r.walk {
		return "openat"
	}
	return "openat2"
}

// openat2 calls openat2(2) (or walks), retrying once when the call was
// interrupted (EINTR: a signal arrived during a blocking open) or the
// kernel asked for a retry (EAGAIN: with RESOLVE_BENEATH a concurrent
// rename or mount anywhere on the system makes the lookup give up rather
// than risk an escape; the walk says EAGAIN when the last component was
// replaced between its check and its open). A second failure is returned:
// a tree being renamed under us without pause is not one to keep trying
// on.
func (r resolver) openat2(dirfd int, name string, how *unix.OpenHow) (int, error) {
	call := unix.Openat2
	if r.walk {
		call = walk
	}
	fd, err := call(dirfd, name, how)
	if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
		fd, err = call(dirfd, name, how)
	}
	return fd, err
}
