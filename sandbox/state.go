package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/cleanroom-dev/cleanroom/internal/fsx"
	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
	"golang.org/x/sys/unix"
)

// runLockName is the file, in a run's tmpfs, on which the run's owner holds
// an exclusive flock for its whole life: `sandbox gc` treats a run whose
// lock it can take as one whose owner is gone.
const runLockName = ".owner.lock"

// errStateRoot: the state root cannot be used (a symlink in its path, not
// a directory, or its private mount could not be established).
var errStateRoot = errors.New("sandbox state root unusable")

// openStateRoot creates the state root if needed (0710, group
// CandidateUID) and opens it as a
// directory without following any symlink in its path, so that the path
// mountinfo shows and the directory the descriptor holds are the same.
func openStateRoot(dir string, create bool) (int, error) {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return -1, fmt.Errorf("%w: %s: want an absolute, clean path", errStateRoot, dir)
	}
	if create {
		// Parents are 0711 (less the umask): the container's init passes
		// through them; the root itself is 0710 whatever the umask
		// (fchmod below). A symlink met here is
		// refused by the openat2 below, before anything is put in it.
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return -1, fmt.Errorf("%w: %w", errStateRoot, err)
		}
	}
	// No symlink in the path (fsx.OpenPath): a symlinked state root would
	// make mountinfo's paths and gc's removals name something other than
	// what was opened. The path starts at / and crosses mounts by nature.
	fd, err := fsx.OpenPath(dir, unix.O_DIRECTORY|unix.O_RDONLY)
	if err != nil {
		return -1, fmt.Errorf("%w: %s: %w", errStateRoot, dir, err)
	}
	if create {
		// Other users must not reach exec.fifo or a run's rootfs; the
		// container's init, host uid CandidateUID in the candidate's user
		// namespace, must pass through to reach its root: root-owned,
		// group CandidateUID with search permission only (0710).
		if err := unix.Fchown(fd, 0, candidateID()); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("%w: %s: chown: %w", errStateRoot, dir, err)
		}
		if err := unix.Fchmod(fd, 0o710); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("%w: %s: chmod: %w", errStateRoot, dir, err)
		}
		if err := searchableByCandidate(dir); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("%w: %w", errStateRoot, err)
		}
	}
	return fd, nil
}

// searchableByCandidate refuses a state root (or bundle) whose parents the
// container's init (host uid and gid CandidateUID, no capability over host
// files) cannot pass through: libcontainer's init enters the run's root
// by its host path.
func searchableByCandidate(dir string) error {
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		id := uint32(candidateID())
		ok := st.Mode&0o001 != 0 || (st.Gid == id && st.Mode&0o010 != 0) || (st.Uid == id && st.Mode&0o100 != 0)
		if !ok {
			return fmt.Errorf("%s (mode %#o) is not searchable by the candidate's uid %d: the container's init passes through it to reach its root (chmod o+x, or choose another directory)", p, st.Mode&0o7777, id)
		}
		if p == "/" {
			return nil
		}
	}
}

// mountHolding returns the mount dir lies on: the last entry of table whose
// mount point is dir or one of its parents, the longest such mount point
// winning (table order puts an overmount after what it covers).
func mountHolding(table []seal.MountInfo, dir string) (seal.MountInfo, bool) {
	var best seal.MountInfo
	found := false
	for _, m := range table {
		if m.MountPoint != dir && m.MountPoint != "/" && !strings.HasPrefix(dir, m.MountPoint+"/") {
			continue
		}
		if !found || len(m.MountPoint) >= len(best.MountPoint) {
			best, found = m, true
		}
	}
	return best, found
}

// privateStateRoot makes sure that nothing mounted beneath dir propagates
// to another mount namespace: if the mount dir lies on is in a shared peer
// group (systemd makes /run shared), dir is bound onto itself and the bind
// made private, once. A run's tmpfs, mounted beneath it afterwards, is then
// private from its creation: without this, the mount existed in every peer
// namespace until the run made it private, and a peer kept a root-only copy
// for the run's length. fd is the state root, on which the caller holds a
// shared flock; the check and the bind run under an exclusive one, so
// concurrent runs bind once.
func privateStateRoot(dir string, fd int) (err error) {
	shared := func() (bool, error) {
		table, err := seal.ReadMountInfo(0)
		if err != nil {
			return false, fmt.Errorf("%w: %s: %w", errStateRoot, dir, err)
		}
		m, ok := mountHolding(table, dir)
		if !ok {
			return false, fmt.Errorf("%w: %s: no mount holds it in /proc/self/mountinfo", errStateRoot, dir)
		}
		return m.PeerGroup() != "", nil
	}
	if s, err := shared(); err != nil || !s {
		return err
	}
	// Converting the shared lock drops it first: another run may bind in
	// between, so the table is read again under the exclusive lock.
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		return fmt.Errorf("%w: %s: lock: %w", errStateRoot, dir, err)
	}
	defer func() {
		// The caller goes on under the shared lock: a failed downgrade
		// would leave the root unlocked, and gc could see a run half-made.
		if lerr := unix.Flock(fd, unix.LOCK_SH); lerr != nil && err == nil {
			err = fmt.Errorf("%w: %s: lock: %w", errStateRoot, dir, lerr)
		}
	}()
	if s, err := shared(); err != nil || !s {
		return err
	}
	// The bind is stacked on top of whatever holds dir: the propagation of
	// the host's own mounts is never changed.
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("%w: %s: bind onto itself: %w", errStateRoot, dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("%w: %s: private: %w", errStateRoot, dir, err)
	}
	if s, err := shared(); err != nil {
		return err
	} else if s {
		return fmt.Errorf("%w: %s: still in a shared peer group after MS_PRIVATE", errStateRoot, dir)
	}
	return nil
}

// startRun creates the run's directory under the state root, mounts its
// private tmpfs (mountBundle) and takes the run's owner lock in it. The
// state root is held with a shared flock until the lock is taken, so `sandbox
// gc` (which holds it exclusively) never sees a run half-made. end unmounts
// the tmpfs, removes the directory and then releases the lock; it may be
// called more than once and acts only the first time.
func startRun(stateDir, id string) (bundle string, end func(), err error) {
	if rootless().on {
		if err := prepareRootlessStateRoot(stateDir); err != nil {
			return "", nil, err
		}
	}
	root, err := openStateRoot(stateDir, true)
	if err != nil {
		return "", nil, err
	}
	defer unix.Close(root)
	if err := unix.Flock(root, unix.LOCK_SH); err != nil {
		return "", nil, fmt.Errorf("%w: %s: lock: %w", errStateRoot, stateDir, err)
	}
	if err := privateStateRoot(stateDir, root); err != nil {
		return "", nil, err
	}
	bundle = filepath.Join(stateDir, id)
	if err := unix.Mkdirat(root, id, 0o700); err != nil {
		return "", nil, fmt.Errorf("sandbox bundle dir %s: %w", bundle, err)
	}
	unmount, err := mountBundle(bundle)
	if err != nil {
		_ = unix.Unlinkat(root, id, unix.AT_REMOVEDIR)
		return "", nil, err
	}
	lock, err := unix.Open(filepath.Join(bundle, runLockName), unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err == nil {
		if err = unix.Flock(lock, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Close(lock)
		}
	}
	if err != nil {
		unmount()
		_ = unix.Unlinkat(root, id, unix.AT_REMOVEDIR)
		return "", nil, fmt.Errorf("sandbox run lock %s: %w", filepath.Join(bundle, runLockName), err)
	}
	// Once only: lock is a bare descriptor number, and a second close
	// would close whatever another goroutine has opened under that number
	// since (a parallel run's config file, a runtime's pipe).
	return bundle, sync.OnceFunc(func() {
		unmount()
		// By now the bundle is an empty mount point.
		_ = unix.Rmdir(bundle)
		unix.Close(lock)
		releaseStateRoot(stateDir)
	}), nil
}

// releaseStateRoot undoes privateStateRoot's bind when the run that ends
// was the last one, so that a normal exit leaves no mount behind (a state
// root under a temporary directory could not even be removed with a bind
// left on it). It does nothing unless it gets the state root's lock at once
// (a run starting or gc running will see to it), no run directory is left
// (a live or a stale one still needs the private root), and the mount at
// the state root is a bind of the state root onto itself: the same device
// as the mount beneath it, showing the state root's own subtree, so a file
// system mounted there by an administrator is never touched.
func releaseStateRoot(stateDir string) {
	root, err := openStateRoot(stateDir, false)
	if err != nil {
		return
	}
	defer unix.Close(root)
	if unix.Flock(root, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return
	}
	names, err := readDirNames(root, stateDir)
	if err != nil {
		return
	}
	for _, name := range names {
		if runIDPattern.MatchString(name) {
			return
		}
	}
	table, err := seal.ReadMountInfo(0)
	if err != nil {
		return
	}
	if selfBind(table, stateDir) {
		_ = unix.Unmount(stateDir, unix.MNT_DETACH)
	}
}

// selfBind reports whether the topmost mount at dir is a bind of dir onto
// itself: mounted exactly at dir, on the device of the mount that holds
// dir's parent, with dir's own subtree of that file system as its root.
func selfBind(table []seal.MountInfo, dir string) bool {
	at := seal.MountsAt(table, dir)
	if len(at) == 0 || at[len(at)-1].Root == "/" {
		return false
	}
	top := at[len(at)-1]
	rest := slices.DeleteFunc(slices.Clone(table), func(m seal.MountInfo) bool { return m.ID == top.ID })
	below, ok := mountHolding(rest, dir)
	if !ok || below.Major != top.Major || below.Minor != top.Minor {
		return false
	}
	return top.Root == filepath.Join(below.Root, strings.TrimPrefix(dir, below.MountPoint))
}
