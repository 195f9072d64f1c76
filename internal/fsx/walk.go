package fsx

import (
	"errors"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// maxLinks is how many symbolic links one lookup may follow (the
// kernel's MAXSYMLINKS): a chain or a loop of links ends in ELOOP.
const maxLinks = 40

// walk resolves name beneath dirfd as openat2(2) would with how, for a
// kernel that has no openat2 (ENOSYS: Linux before 5.6, gVisor). It walks
// one component at a time from a descriptor: every directory on the way
// is opened O_PATH|O_NOFOLLOW relative to the descriptor of its parent and
// checked on fstat of that descriptor (statx on the fd), never by path.
// Because each step starts from a descriptor already held, renaming or
// replacing a component after it was opened cannot redirect the walk: the
// held descriptor still names the directory that was checked (this is what
// makes the walk race-free without openat2's rename checks). ".." is
// resolved by going back to the descriptor the walk came from, not by
// asking the kernel for the parent, so a directory moved out of the tree
// mid-walk cannot take a ".." with it.
//
// The answers are openat2's: ELOOP for a symbolic link under
// RESOLVE_NO_SYMLINKS (or a /proc magic link, always), EXDEV for a climb
// out of dirfd or an absolute name under RESOLVE_BENEATH and for a mount
// crossed under RESOLVE_NO_XDEV, ENOTDIR, ENOENT and the rest as the
// kernel gives them. Differences, each on the safe side: a name swapped
// between the check of the last component and its open is refused with
// EAGAIN (the caller's retry applies) rather than opened; and where the
// kernel reports no mount id (gVisor, Linux before 5.8 on a filesystem
// without file handles) a mount is seen by its device number only, so a
// bind mount of a directory of the same filesystem is not told apart.
func walk(dirfd int, name string, how *unix.OpenHow) (int, error) {
	flags := int(how.Flags)
	beneath := how.Resolve&unix.RESOLVE_BENEATH != 0
	noSymlinks := how.Resolve&unix.RESOLVE_NO_SYMLINKS != 0
	noXdev := how.Resolve&unix.RESOLVE_NO_XDEV != 0
	// openat2 refuses what open(2) would silently ignore; so does the
	// walk, so a caller's mistake fails the same way on both.
	// (O_TMPFILE's bits include O_DIRECTORY's: only all of them are it.)
	if how.Mode != 0 && flags&unix.O_CREAT == 0 && flags&unix.O_TMPFILE != unix.O_TMPFILE || how.Mode&^0o7777 != 0 {
		return -1, unix.EINVAL
	}
	if flags&unix.O_PATH != 0 && flags&^(unix.O_PATH|unix.O_CLOEXEC|unix.O_DIRECTORY|unix.O_NOFOLLOW) != 0 {
		return -1, unix.EINVAL
	}
	if name == "" {
		return -1, unix.ENOENT // as open(2): an empty name names nothing
	}
	if len(name) >= unix.PathMax {
		return -1, unix.ENAMETOOLONG
	}
	// An absolute name would start the lookup at / instead of dirfd.
	if strings.HasPrefix(name, "/") && beneath {
		return -1, unix.EXDEV
	}

	// The descriptors of the directories walked through, the start at
	// the bottom: ".." pops one. The start is the caller's unless the
	// walk opened it (an absolute name, or AT_FDCWD).
	s := &stack{}
	defer s.close()
	switch {
	case strings.HasPrefix(name, "/"):
		fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		s.push(fd, true)
	case dirfd == unix.AT_FDCWD:
		fd, err := unix.Open(".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		s.push(fd, true)
	default:
		s.push(dirfd, false)
	}
	var root node
	if noXdev {
		var err error
		if root, err = statNode(s.top()); err != nil {
			return -1, err
		}
	}

	queue, dirTarget := components(name)
	// slashed: the name's last component is followed by "/" alone ("a/",
	// not "a/." or "a/..", where a missing "a" is ENOENT).
	base := "/" + strings.TrimRight(name, "/")
	slashed := strings.HasSuffix(name, "/") && !strings.HasSuffix(base, "/.") && !strings.HasSuffix(base, "/..")
	links := 0
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c == ".." {
			if !s.pop() {
				if beneath {
					return -1, unix.EXDEV // a ".." from dirfd itself climbs out of the tree
				}
				// Not beneath (OpenPath): the physical parent of the
				// start, which replaces it as the bottom ("/.." is "/").
				fd, err := unix.Openat(s.top(), "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					return -1, err
				}
				s.replaceBottom(fd)
			}
			continue
		}
		last := len(queue) == 0 && !dirTarget
		// O_PATH|O_NOFOLLOW opens nothing (no FIFO blocks, no device
		// acts) and, for a link, opens the link itself: every decision
		// below is made on this descriptor.
		fd, err := unix.Openat(s.top(), c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if last && errors.Is(err, unix.ENOENT) && flags&unix.O_CREAT != 0 {
			return create(s.top(), c, flags, how.Mode, root, noXdev)
		}
		if len(queue) == 0 && slashed && errors.Is(err, unix.ENOENT) && flags&unix.O_CREAT != 0 {
			return -1, unix.EISDIR // "new/": O_CREAT makes no directory, and no file of a name that asks for one
		}
		if err != nil {
			return -1, err
		}
		n, err := statNode(fd)
		if err != nil {
			unix.Close(fd)
			return -1, err
		}
		if last && flags&(unix.O_CREAT|unix.O_EXCL) == unix.O_CREAT|unix.O_EXCL {
			unix.Close(fd)
			return -1, unix.EEXIST // O_EXCL: any existing name, a link included, is not created over
		}
		if n.isLink() {
			if last && flags&unix.O_NOFOLLOW != 0 {
				if flags&unix.O_PATH != 0 && flags&unix.O_DIRECTORY == 0 {
					return fd, nil // O_PATH|O_NOFOLLOW asks for the link itself
				}
				unix.Close(fd)
				if flags&unix.O_PATH != 0 {
					return -1, unix.ENOTDIR
				}
				return -1, unix.ELOOP // O_NOFOLLOW: a link as the last component is refused, not followed
			}
			target, err := followable(fd, noSymlinks, &links)
			unix.Close(fd)
			if err != nil {
				return -1, err
			}
			// The link's text takes its place, resolved from the
			// directory holding the link, under the same rules.
			more, _ := components(target)
			queue = append(more, queue...)
			continue
		}
		// A mount stacked on an entry (a host directory bind-mounted
		// over a name in the tree) is refused, not entered.
		if noXdev && crossed(root, n) {
			unix.Close(fd)
			return -1, unix.EXDEV
		}
		if last {
			return openLast(s.top(), c, fd, n, flags, how.Mode)
		}
		// A file used as a directory: the kernel's answer.
		if !n.isDir() {
			unix.Close(fd)
			return -1, unix.ENOTDIR
		}
		s.push(fd, true)
	}
	// The name ended in a directory reached by "/", "." or "..": opened
	// through the descriptor the walk holds for it.
	return unix.Openat(s.top(), ".", flags, uint32(how.Mode))
}

// openLast opens the last component c of the walk in parent, whose
// O_PATH descriptor pathfd (described by n) passed every check. An O_PATH
// open is that descriptor; a directory is reopened through it ("."); any
// other is a second open by name, which must find the same inode (dev and
// ino): a name swapped in between is refused with EAGAIN, so what was
// checked is what is returned.
func openLast(parent int, c string, pathfd int, n node, flags int, mode uint64) (int, error) {
	if flags&unix.O_PATH != 0 {
		if flags&unix.O_DIRECTORY != 0 && !n.isDir() {
			unix.Close(pathfd)
			return -1, unix.ENOTDIR
		}
		return pathfd, nil
	}
	defer unix.Close(pathfd)
	if n.isDir() {
		// The directory checked, not whatever holds its name by now; and
		// O_TMPFILE's unnamed file (another inode) is made in it.
		return unix.Openat(pathfd, ".", flags, uint32(mode))
	}
	fd, err := unix.Openat(parent, c, flags, uint32(mode))
	if err != nil {
		return -1, err
	}
	got, err := statNode(fd)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	// The name was replaced between the check and the open (a rename
	// race): what was opened is not what was checked.
	if got.dev != n.dev || got.ino != n.ino {
		unix.Close(fd)
		return -1, unix.EAGAIN
	}
	return fd, nil
}

// create makes the missing last component c in parent with O_CREAT (the
// caller's flags carry O_NOFOLLOW, so a link planted in the meantime is
// refused, not followed). What it opened is checked like any component: a
// file created by someone else in between and found on another mount is
// refused.
func create(parent int, c string, flags int, mode uint64, root node, noXdev bool) (int, error) {
	fd, err := unix.Openat(parent, c, flags, uint32(mode))
	if err != nil || !noXdev {
		return fd, err
	}
	n, err := statNode(fd)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	if crossed(root, n) {
		unix.Close(fd)
		return -1, unix.EXDEV
	}
	return fd, nil
}

// followable returns the text of the link open at fd (O_PATH|O_NOFOLLOW)
// when the rules let the walk follow it.
func followable(fd int, noSymlinks bool, links *int) (string, error) {
	// RESOLVE_NO_SYMLINKS: a link planted in the tree cannot stand in
	// for a file or a directory, whatever it points at.
	if noSymlinks {
		return "", unix.ELOOP
	}
	// RESOLVE_NO_MAGICLINKS: a /proc link (/proc/self/fd/N,
	// /proc/PID/root) jumps to whatever a process holds, not to its text.
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return "", err
	}
	if sfs.Type == unix.PROC_SUPER_MAGIC {
		return "", unix.ELOOP
	}
	// A chain or loop of links would never end.
	if *links++; *links > maxLinks {
		return "", unix.ELOOP
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	target := string(buf[:n])
	if target == "" {
		return "", unix.ENOENT
	}
	// An absolute target leaves the tree at once (RESOLVE_BENEATH; the
	// one resolve set that follows links, FollowInside's, is beneath).
	if strings.HasPrefix(target, "/") {
		return "", unix.EXDEV
	}
	return target, nil
}

// components splits name at "/" into the names to walk, dropping empty
// components and "." as the kernel does ("a//b" and "a/./b" are "a/b").
// dirTarget is true when the name must end in a directory ("a/", "a/.",
// "a/..", "."): its last component is then walked like any other and the
// directory reached is what is opened.
func components(name string) (parts []string, dirTarget bool) {
	all := strings.Split(name, "/")
	for _, c := range all {
		if c != "" && c != "." {
			parts = append(parts, c)
		}
	}
	switch all[len(all)-1] {
	case "", ".", "..":
		dirTarget = true
	}
	return parts, dirTarget
}

// stack holds the descriptors of the directories a walk went through.
type stack struct {
	fds   []int
	owned []bool
}

func (s *stack) push(fd int, owned bool) {
	s.fds = append(s.fds, fd)
	s.owned = append(s.owned, owned)
}

func (s *stack) top() int { return s.fds[len(s.fds)-1] }

// pop goes back one directory; false at the start of the walk.
func (s *stack) pop() bool {
	if len(s.fds) == 1 {
		return false
	}
	i := len(s.fds) - 1
	if s.owned[i] {
		unix.Close(s.fds[i])
	}
	s.fds, s.owned = s.fds[:i], s.owned[:i]
	return true
}

func (s *stack) replaceBottom(fd int) {
	if s.owned[0] {
		unix.Close(s.fds[0])
	}
	s.fds[0], s.owned[0] = fd, true
}

func (s *stack) close() {
	for i, fd := range s.fds {
		if s.owned[i] {
			unix.Close(fd)
		}
	}
}

// node is what the walk decides on, read from a descriptor.
type node struct {
	mode     uint32 // type bits (S_IFMT)
	dev, ino uint64
	mnt      uint64 // the mount id, when known (hasMnt)
	hasMnt   bool
	fsType   int64 // statfs f_type, read only when the mount id is not known
}

func (n node) isLink() bool { return n.mode&unix.S_IFMT == unix.S_IFLNK }
func (n node) isDir() bool  { return n.mode&unix.S_IFMT == unix.S_IFDIR }

// crossed says whether n lies on another mount than root. The mount ids
// decide where the kernel reports both. Without them the device number
// does: another device is another mount, except for a non-directory on
// overlayfs, which reports the device of the layer holding it, not the
// overlay's (Linux and gVisor alike); a file there is taken to be on its
// overlay. So where no mount id is known, a bind mount of a directory of
// the same filesystem, or of a file from another overlay, is not seen.
func crossed(root, n node) bool {
	if root.hasMnt && n.hasMnt {
		return root.mnt != n.mnt
	}
	if root.dev == n.dev {
		return false
	}
	return n.isDir() || n.fsType != unix.OVERLAYFS_SUPER_MAGIC || root.fsType != unix.OVERLAYFS_SUPER_MAGIC
}

// statNode describes the descriptor fd itself (for an O_PATH descriptor
// of a link, the link), with its mount id where the kernel reports one:
// statx's STATX_MNT_ID (Linux 5.8), else name_to_handle_at's.
func statNode(fd int) (node, error) {
	var n node
	var stx unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE|unix.STATX_INO|unix.STATX_MNT_ID, &stx)
	switch {
	case errors.Is(err, unix.ENOSYS): // no statx (before Linux 4.11)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return node{}, err
		}
		n = node{mode: st.Mode, dev: st.Dev, ino: st.Ino}
	case err != nil:
		return node{}, err
	default:
		n = node{mode: uint32(stx.Mode), dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), ino: stx.Ino}
		n.mnt, n.hasMnt = stx.Mnt_id, stx.Mask&unix.STATX_MNT_ID != 0
	}
	if !n.hasMnt {
		n.mnt, n.hasMnt = handleMountID(fd)
	}
	if !n.hasMnt {
		var sfs unix.Statfs_t
		if err := unix.Fstatfs(fd, &sfs); err != nil {
			return node{}, err
		}
		n.fsType = sfs.Type
	}
	return n, nil
}

// handlesWork says once whether name_to_handle_at answers at all here
// (gVisor does not): where it does not, it is not asked per component.
var handlesWork = sync.OnceValue(func() bool {
	_, _, err := unix.NameToHandleAt(unix.AT_FDCWD, "/", 0)
	return err == nil
})

// handleMountID is the mount id name_to_handle_at reports for fd, where
// the filesystem supports file handles.
func handleMountID(fd int) (uint64, bool) {
	if !handlesWork() {
		return 0, false
	}
	_, mnt, err := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		return 0, false
	}
	return uint64(mnt), true
}
