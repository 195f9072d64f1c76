package seal

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// The seal's process-level rules, as sentinels.
var (
	// errNotIsolated: the sealing process shares its mount or network
	// namespace with its parent, so a mount would be visible to the host.
	errNotIsolated = errors.New("not in a fresh mount and network namespace")
	// errNetworkUp: an interface is up in the sealed network namespace.
	errNetworkUp = errors.New("a network interface is up in the sealed namespace")
	// errPrivileged: a capability set is not empty or no_new_privs is unset.
	errPrivileged = errors.New("process still holds privileges")
)

// SealedCommand returns a command that runs exe with args in new mount and
// network namespaces, created at clone time by the kernel (Cloneflags), so
// that the fresh Go runtime in the child starts with every thread inside
// them. (unshare(2) from a running Go program would move one thread only.)
// When the caller is not root a user namespace maps its uid and gid to 0, so
// the child may mount where the kernel allows unprivileged user namespaces.
//
// The child gets no environment beyond env: the sealed server must not
// inherit the caller's secrets (an API key in the relay's environment).
// Stdin, stdout and stderr are left for the caller to set.
//
// Start it with internal/deathsig (Start, Run, CombinedOutput), which adds
// the parent-death signal: the sealed server must not outlive the process
// that relays to it, and the signal must not fire before (it follows the
// forking thread, which deathsig keeps locked until the child is reaped).
func SealedCommand(exe string, args []string, env []string) *exec.Cmd {
	cmd := exec.Command(exe, args...)
	cmd.Env = append([]string{}, env...)
	attr := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET,
	}
	if os.Geteuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	cmd.SysProcAttr = attr
	return cmd
}

// CloseInheritedFDs marks every descriptor ≥ 3 close-on-exec. It must be the
// first act of a sealed stage: descriptors inherited from whatever started
// the harness (a CI runner, a shell) would otherwise reach the next exec, and
// one open into the view would make the read-only remount fail or, worse,
// outlive it. Marking rather than closing leaves the Go runtime's own
// descriptors working until the exec.
func CloseInheritedFDs() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("close_range: %w", err)
	}
	// Kernels before 5.11 lack CLOSE_RANGE_CLOEXEC: walk /proc/self/fd.
	ents, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("listing descriptors: %w", rerr)
	}
	for _, e := range ents {
		var fd int
		if _, err := fmt.Sscan(e.Name(), &fd); err != nil || fd < 3 {
			continue
		}
		unix.CloseOnExec(fd)
	}
	return nil
}

// MakeRootPrivate marks every mount of this namespace private, recursively,
// before anything is mounted: with Cloneflags (unlike Unshareflags) Go does
// not do it, and on a systemd host "/" is shared, so the view would
// propagate to the host's namespace.
func MakeRootPrivate() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	return nil
}

// AssertIsolatedFrom checks that this process's mount and network
// namespaces differ from those of process pid (its parent).
func AssertIsolatedFrom(pid int) error {
	for _, ns := range []string{"mnt", "net"} {
		mine, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			return fmt.Errorf("reading own %s namespace: %w", ns, err)
		}
		theirs, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
		if err != nil {
			// Without permission to read the parent's namespace (a user
			// namespace child), the inode cannot be compared; a fresh
			// namespace is then shown by the checks that follow.
			if errors.Is(err, os.ErrPermission) {
				continue
			}
			return fmt.Errorf("reading parent's %s namespace: %w", ns, err)
		}
		if mine == theirs {
			return fmt.Errorf("%w: %s namespace %s is the parent's", errNotIsolated, ns, mine)
		}
	}
	return nil
}

// AssertNoNetwork checks that no interface is up in this network namespace
// (not even lo): nothing can be reached, not even a local port.
func AssertNoNetwork() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return fmt.Errorf("listing interfaces: %w", err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp != 0 {
			return fmt.Errorf("%w: %s", errNetworkUp, i.Name)
		}
	}
	return nil
}

// Seal establishes the view at dir, in order, failing closed at each step:
// mount a fresh tmpfs of sizeBytes, let emit write the package into it,
// remount it read-only at the superblock and the mount point, and assert
// the result from the kernel. emit must close every descriptor it opened
// into dir (the remount fails with EBUSY otherwise). The caller must have
// called MakeRootPrivate in a fresh mount namespace.
func Seal(dir string, sizeBytes int64, emit func(dir string) error) (*Assertion, error) {
	if err := MountView(dir, sizeBytes); err != nil {
		return nil, err
	}
	if err := emit(dir); err != nil {
		return nil, fmt.Errorf("emitting into the view: %w", err)
	}
	if err := RemountReadOnly(dir); err != nil {
		return nil, err
	}
	f, a, err := OpenSealed(dir)
	if err != nil {
		return nil, err
	}
	f.Close()
	return a, nil
}
