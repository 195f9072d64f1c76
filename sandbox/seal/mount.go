package seal

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The rules a sealed view can break. Each is a sentinel wrapped in a
// *SealError that names the mount point, so errors.Is(err, errSuperblockRW)
// (in this package's tests) reports which rule failed, and the error's text
// names it for everyone else.
var (
	// errNotMounted: the path is not a mount point in this namespace, so a
	// "sealed view" there would be the host's own directory.
	errNotMounted = errors.New("no mount at the view's path")
	// errStacked: more than one mount sits at the path; the last one wins,
	// and an earlier writable one could be uncovered later.
	errStacked = errors.New("more than one mount stacked at the view's path")
	// errNotTmpfs: only a fresh tmpfs guarantees new inodes with one link
	// each and no older descriptor into them.
	errNotTmpfs = errors.New("view is not a tmpfs")
	// errMountRW: the per-mount flag is rw, so this mount point accepts writes.
	errMountRW = errors.New("per-mount flag is not ro")
	// errSuperblockRW: the superblock is rw; a read-only bind leaves the
	// objects underneath writable through every other mount of them.
	errSuperblockRW = errors.New("superblock is not ro")
	// errMountFlags: nosuid, nodev and noexec must hold on the view (a raw
	// remount clears them unless they are passed again).
	errMountFlags = errors.New("view lacks nosuid, nodev or noexec")
	// errPeerGroup: a shared: peer group propagates mount events between
	// the view and the host, so the host could see or change it.
	errPeerGroup = errors.New("view is in a shared peer group")
	// errStatfsRW: statfs does not report ST_RDONLY (necessary, not sufficient).
	errStatfsRW = errors.New("statfs does not report ST_RDONLY")
	// errDeviceMismatch: the directory's st_dev is not the mount's device,
	// so the path resolved to something other than the asserted mount.
	errDeviceMismatch = errors.New("view's st_dev differs from the mount's device")
	// errNotMountRoot: statx says the descriptor is on another mount than
	// the asserted entry (mount ID), or below that mount's root, so what
	// would be read through it is not the mount the table vouches for.
	errNotMountRoot = errors.New("view's descriptor is not the root of the asserted mount")
	// errNotFreshMount: the mount shows a subtree of its file system (a
	// bind of a directory of some other read-only tmpfs), not the root
	// of a tmpfs of its own, so files outside the view may share its
	// superblock.
	errNotFreshMount = errors.New("view's mount is a bind of a subtree, not a tmpfs's root")
	// errWriteProbe: creating a file in the view did not fail with EROFS.
	errWriteProbe = errors.New("write probe did not fail with EROFS")
)

// SealError is a failed assertion about the view mounted at Dir.
type SealError struct {
	Dir    string
	Rule   error
	Detail string
}

func (e *SealError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("sealed view %s: %v", e.Dir, e.Rule)
	}
	return fmt.Sprintf("sealed view %s: %v (%s)", e.Dir, e.Rule, e.Detail)
}

func (e *SealError) Unwrap() error { return e.Rule }

// MountInfo is one line of /proc/<pid>/mountinfo (proc(5)).
type MountInfo struct {
	ID, Parent   int
	Major, Minor uint32
	Root         string
	MountPoint   string
	// Options are the per-mount options (field 6: ro|rw, nosuid, …).
	Options []string
	// Optional holds the optional fields (shared:N, master:N, …).
	Optional []string
	FSType   string
	Source   string
	// SuperOptions are the superblock options (after "- fstype source").
	SuperOptions []string
	// Line is the line as the kernel wrote it.
	Line string
}

// ParseMountInfo reads mountinfo lines. A malformed line is an error naming
// its number: a table we cannot read is not a table we can assert from.
func ParseMountInfo(r io.Reader) ([]MountInfo, error) {
	var out []MountInfo
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 {
			return nil, fmt.Errorf("mountinfo line %d: malformed: %q", n, line)
		}
		var m MountInfo
		var err error
		if m.ID, err = strconv.Atoi(f[0]); err != nil {
			return nil, fmt.Errorf("mountinfo line %d: mount id: %w", n, err)
		}
		if m.Parent, err = strconv.Atoi(f[1]); err != nil {
			return nil, fmt.Errorf("mountinfo line %d: parent id: %w", n, err)
		}
		maj, min, ok := strings.Cut(f[2], ":")
		if !ok {
			return nil, fmt.Errorf("mountinfo line %d: device %q", n, f[2])
		}
		ma, err1 := strconv.ParseUint(maj, 10, 32)
		mi, err2 := strconv.ParseUint(min, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("mountinfo line %d: device %q", n, f[2])
		}
		m.Major, m.Minor = uint32(ma), uint32(mi)
		m.Root = unescapeMountInfo(f[3])
		m.MountPoint = unescapeMountInfo(f[4])
		m.Options = strings.Split(f[5], ",")
		m.Optional = slices.Clone(f[6:sep])
		m.FSType = f[sep+1]
		m.Source = unescapeMountInfo(f[sep+2])
		m.SuperOptions = strings.Split(f[sep+3], ",")
		m.Line = line
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return out, nil
}

// unescapeMountInfo undoes the kernel's octal escapes (\040 for space, …).
func unescapeMountInfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ReadMountInfo parses /proc/<pid>/mountinfo; pid 0 means this process.
func ReadMountInfo(pid int) ([]MountInfo, error) {
	p := "/proc/self/mountinfo"
	if pid != 0 {
		p = fmt.Sprintf("/proc/%d/mountinfo", pid)
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("reading mount table: %w", err)
	}
	defer f.Close()
	return ParseMountInfo(f)
}

// MountsAt returns every entry of table whose mount point is dir, in table
// order (the last one is the visible mount).
func MountsAt(table []MountInfo, dir string) []MountInfo {
	var out []MountInfo
	for _, m := range table {
		if m.MountPoint == dir {
			out = append(out, m)
		}
	}
	return out
}

// HasOption reports whether opts contains o exactly.
func HasOption(opts []string, o string) bool { return slices.Contains(opts, o) }

// PeerGroup returns the shared:N optional field, or "" when the mount is in
// no peer group.
func (m MountInfo) PeerGroup() string {
	for _, o := range m.Optional {
		if strings.HasPrefix(o, "shared:") {
			return o
		}
	}
	return ""
}

// CheckSealedEntry checks one mountinfo entry against the seal's rules: a
// tmpfs, ro per mount and ro at the superblock, nosuid/nodev/noexec, and no
// shared peer group. It is the table half of AssertSealedAt, usable on another
// process's table (/proc/<pid>/mountinfo).
func CheckSealedEntry(dir string, entries []MountInfo) (MountInfo, error) {
	if len(entries) == 0 {
		return MountInfo{}, &SealError{Dir: dir, Rule: errNotMounted}
	}
	if len(entries) > 1 {
		return MountInfo{}, &SealError{Dir: dir, Rule: errStacked, Detail: fmt.Sprintf("%d mounts", len(entries))}
	}
	m := entries[0]
	switch {
	case m.FSType != "tmpfs":
		return m, &SealError{Dir: dir, Rule: errNotTmpfs, Detail: m.FSType}
	case m.Root != "/":
		return m, &SealError{Dir: dir, Rule: errNotFreshMount, Detail: "mount root " + m.Root}
	case !HasOption(m.Options, "ro"):
		return m, &SealError{Dir: dir, Rule: errMountRW, Detail: m.Line}
	case !HasOption(m.SuperOptions, "ro"):
		return m, &SealError{Dir: dir, Rule: errSuperblockRW, Detail: m.Line}
	case !HasOption(m.Options, "nosuid") || !HasOption(m.Options, "nodev") || !HasOption(m.Options, "noexec"):
		return m, &SealError{Dir: dir, Rule: errMountFlags, Detail: m.Line}
	case m.PeerGroup() != "":
		return m, &SealError{Dir: dir, Rule: errPeerGroup, Detail: m.PeerGroup()}
	}
	return m, nil
}

// MountView mounts a fresh tmpfs at dir: size-limited, mode 0755, nosuid,
// nodev, noexec. dir must be absolute and already exist; the caller must be
// in a private mount namespace (see MakeRootPrivate), or the mount would
// propagate to the host.
func MountView(dir string, sizeBytes int64) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("mounting the view: %q is not a clean absolute path", dir)
	}
	if sizeBytes <= 0 {
		return fmt.Errorf("mounting the view: size %d must be positive", sizeBytes)
	}
	data := fmt.Sprintf("size=%d,mode=0755", sizeBytes)
	if err := unix.Mount("cleanroom-view", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, data); err != nil {
		return fmt.Errorf("mounting tmpfs at %s: %w", dir, err)
	}
	return nil
}

// RemountReadOnly makes the view read-only twice over: first the
// superblock (MS_REMOUNT|MS_RDONLY without MS_BIND), which makes the objects
// themselves immutable through every name, then the mount point
// (MS_REMOUNT|MS_BIND|MS_RDONLY). Both pass nosuid/nodev/noexec again
// because a raw remount replaces the per-mount flags. The superblock remount
// fails with EBUSY while any descriptor is open for writing into the view,
// so its success also proves no writable descriptor exists.
func RemountReadOnly(dir string) error {
	const keep = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|keep, ""); err != nil {
		return fmt.Errorf("remounting %s read-only at the superblock: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|keep, ""); err != nil {
		return fmt.Errorf("remounting %s read-only at the mount point: %w", dir, err)
	}
	return nil
}

// Assertion is what AssertSealedAt read back from the kernel.
type Assertion struct {
	Dir string `json:"dir"`
	// MountInfo is the view's line of /proc/self/mountinfo.
	MountInfo string `json:"mountinfo"`
	// StatfsFlags is statfs(2)'s f_flags for the view.
	StatfsFlags int64 `json:"statfs_flags"`
	// ProbeErrno is the error the write probe got (always EROFS on success).
	ProbeErrno string `json:"probe_errno"`
}

// OpenSealed opens the view's mount point dir once (O_DIRECTORY|O_NOFOLLOW|
// O_CLOEXEC; dir is a clean absolute path the caller chose) and asserts the
// seal on that descriptor (AssertSealedAt). The caller reads the view
// through the returned descriptor and never by dir again, so what it reads
// is the mount that was asserted, whatever dir names later. It closes it.
func OpenSealed(dir string) (*os.File, *Assertion, error) {
	// A relative or unclean path could name another directory than the
	// mountinfo entry looked up (a trailing "/" would follow a final symlink).
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return nil, nil, fmt.Errorf("opening the view: %q is not a clean absolute path", dir)
	}
	// O_NOFOLLOW: a symlink at the mount point is refused, never followed.
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the view %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	a, err := AssertSealedAt(f, dir)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, a, nil
}

// AssertSealedAt asks the kernel, in independent ways, whether the
// directory open at d is the sealed view mounted at dir, and fails closed on
// any doubt: the mountinfo entry at dir (exactly one mount, tmpfs, per-mount
// ro, superblock ro, nosuid/nodev/noexec, no shared peer group); then, on
// the descriptor itself, fstatfs ST_RDONLY, fstat st_dev equal to the
// entry's device, statx's mount ID equal to the entry's and the mount-root
// attribute set (where the kernel reports them: Linux 5.8), and a create
// beneath it that must fail with EROFS. The last four tie the descriptor to
// the entry: a descriptor of another directory (another file system, the
// directory under the mount, a detached earlier mount, a bind of the view
// elsewhere, a subdirectory) is refused naming the rule.
func AssertSealedAt(d *os.File, dir string) (*Assertion, error) {
	table, err := ReadMountInfo(0)
	if err != nil {
		return nil, err
	}
	m, err := CheckSealedEntry(dir, MountsAt(table, dir))
	if err != nil {
		return nil, err
	}
	dfd := int(d.Fd())
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(dfd, &sfs); err != nil {
		return nil, fmt.Errorf("fstatfs %s: %w", dir, err)
	}
	// statfs cannot tell a per-mount ro from a superblock ro; it is checked
	// as a necessary condition only, the mountinfo check above is the proof.
	if sfs.Flags&unix.ST_RDONLY == 0 {
		return nil, &SealError{Dir: dir, Rule: errStatfsRW, Detail: fmt.Sprintf("f_flags=%#x", sfs.Flags)}
	}
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return nil, fmt.Errorf("fstat %s: %w", dir, err)
	}
	// The descriptor must be on the asserted file system, not on something
	// the path resolved to meanwhile.
	if unix.Major(st.Dev) != m.Major || unix.Minor(st.Dev) != m.Minor {
		return nil, &SealError{Dir: dir, Rule: errDeviceMismatch, Detail: fmt.Sprintf("st_dev %d:%d, mount %d:%d", unix.Major(st.Dev), unix.Minor(st.Dev), m.Major, m.Minor)}
	}
	if err := checkMountRoot(dfd, dir, m); err != nil {
		return nil, err
	}
	const probe = ".cleanroom-write-probe"
	pfd, perr := unix.Openat(dfd, probe, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if perr == nil {
		unix.Close(pfd)
		_ = unix.Unlinkat(dfd, probe, 0)
		return nil, &SealError{Dir: dir, Rule: errWriteProbe, Detail: "the create succeeded"}
	}
	if !errors.Is(perr, unix.EROFS) {
		return nil, &SealError{Dir: dir, Rule: errWriteProbe, Detail: perr.Error()}
	}
	return &Assertion{Dir: dir, MountInfo: m.Line, StatfsFlags: int64(sfs.Flags), ProbeErrno: "EROFS"}, nil
}

// checkMountRoot is the strongest tie between the descriptor and the
// mountinfo entry m: statx's mount ID must be the entry's (st_dev alone
// does not tell two mounts of one superblock apart, such as a bind of the
// view elsewhere or a detached earlier mount of it) and the descriptor must
// be that mount's root (a subdirectory would be a part of the view). A
// kernel without statx, or one that does not report a field, leaves that
// check to st_dev and the mountinfo entry.
func checkMountRoot(dfd int, dir string, m MountInfo) error {
	var stx unix.Statx_t
	err := unix.Statx(dfd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &stx)
	if errors.Is(err, unix.ENOSYS) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("statx %s: %w", dir, err)
	}
	if stx.Mask&unix.STATX_MNT_ID != 0 && stx.Mnt_id != uint64(m.ID) {
		return &SealError{Dir: dir, Rule: errNotMountRoot, Detail: fmt.Sprintf("mount ID %d, mountinfo entry %d", stx.Mnt_id, m.ID)}
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return &SealError{Dir: dir, Rule: errNotMountRoot, Detail: "not the mount's root directory"}
	}
	return nil
}
