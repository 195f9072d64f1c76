package sandbox

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/cleanroom-dev/cleanroom/internal/deathsig"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func init() {
	// The probe process CheckMode starts (probeRootless).
	if len(os.Args) == 2 && os.Args[1] == ProbeArg {
		rootlessProbe()
	}
}

// Modes of the candidate sandbox (KernelReport.Mode).
const (
	// ModeRoot: set up by host root; the candidate is host uid
	// CandidateUID in a user namespace, limited by cgroups.
	ModeRoot = "root"
	// ModeRootless: set up by an unprivileged user in a user namespace of
	// its own; the candidate is that user's uid on the host, limited by a
	// delegated cgroup v2 subtree or by rlimits.
	ModeRootless = "rootless"
	// ModeUnavailable: neither (KernelReport.Missing says why).
	ModeUnavailable = "unavailable"
)

// How the candidate's resources are limited (KernelReport.Limits).
const (
	LimitsCgroups   = "cgroups"   // host cgroups (root mode)
	LimitsDelegated = "delegated" // a cgroup v2 subtree delegated to the user
	LimitsRlimits   = "rlimits"   // per-process rlimits: no cgroup is writable
)

// errRootless wraps errUnsupported for what a rootless sandbox cannot
// establish (exit 3: isolation impossible in this mode).
var errRootless = fmt.Errorf("%w in rootless mode", errUnsupported)

// rootlessEnv marks the process EnterRootless starts in the user
// namespace it made: the one process whose mount namespace is private to
// it, where Exec may mount what the rootless mode needs.
const rootlessEnv = "CLEANROOM_ROOTLESS_CHILD"

// idMap is one line of /proc/PID/uid_map or gid_map.
type idMap struct{ inside, outside, count uint64 }

// readIDMap parses a uid_map or gid_map.
func readIDMap(path string) ([]idMap, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []idMap
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s: malformed line %q", path, line)
		}
		var m [3]uint64
		for i := range f {
			if m[i], err = strconv.ParseUint(f[i], 10, 32); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
		out = append(out, idMap{m[0], m[1], m[2]})
	}
	return out, nil
}

// outside maps an id of this user namespace to its parent's (the host's,
// one level up); ok is false when the id is not mapped.
func outside(maps []idMap, id uint64) (uint64, bool) {
	for _, m := range maps {
		if id >= m.inside && id-m.inside < m.count {
			return m.outside + id - m.inside, true
		}
	}
	return 0, false
}

// initialUserNS reports whether this process is in the host's initial user
// namespace: its uid_map is the identity over all 2^32-1 ids.
func initialUserNS(maps []idMap) bool {
	return len(maps) == 1 && maps[0] == idMap{0, 0, 4294967295}
}

// rootlessState is what the rootless child knows about itself.
type rootlessState struct {
	on      bool   // this process is EnterRootless's child
	hostUID int    // the host uid its uid 0 stands for (the candidate's)
	limits  string // LimitsDelegated or LimitsRlimits
	cgroup  string // the delegated cgroup v2 directory (LimitsDelegated)
}

// rootless is computed once: a process does not change user namespace.
var rootless = sync.OnceValue(func() rootlessState {
	if os.Getenv(rootlessEnv) != "1" || os.Geteuid() != 0 {
		return rootlessState{}
	}
	maps, err := readIDMap("/proc/self/uid_map")
	if err != nil || initialUserNS(maps) {
		return rootlessState{}
	}
	host, ok := outside(maps, 0)
	if !ok {
		return rootlessState{}
	}
	st := rootlessState{on: true, hostUID: int(host), limits: LimitsRlimits}
	if dir, ok := delegatedCgroup("/sys/fs/cgroup", "/proc/self/cgroup", 0); ok {
		st.limits, st.cgroup = LimitsDelegated, dir
	}
	return st
})

// candidateID is the uid and gid, in this process's user namespace, that
// the candidate's root stands for: CandidateUID for host root, 0 (the
// unprivileged user itself) in the rootless child.
func candidateID() int {
	if rootless().on {
		return 0
	}
	return CandidateUID
}

// delegatedControllers are what a delegated subtree must offer to replace
// host cgroups: memory and pids (cpu is used when present).
var delegatedControllers = []string{"memory", "pids"}

// delegatedCgroup finds a cgroup v2 subtree delegated to uid: the highest
// ancestor of this process's cgroup (from procCgroup, "0::/path") under
// root, a cgroup2 mount, that uid owns along with its cgroup.procs and
// cgroup.subtree_control, and whose subtree_control already enables
// delegatedControllers. The candidate's cgroup is made beneath it, so the
// move of its init (from this process's cgroup, also beneath it) needs
// write access to that subtree only. ok is false on a v1 or hybrid host
// and wherever no such subtree exists.
func delegatedCgroup(root, procCgroup string, uid int) (string, bool) {
	var st unix.Statfs_t
	if unix.Statfs(root, &st) != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return "", false
	}
	b, err := os.ReadFile(procCgroup)
	if err != nil {
		return "", false
	}
	rel, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "0::")
	if !ok || strings.Contains(rel, "\n") || !filepath.IsAbs(rel) {
		return "", false
	}
	return delegatedBelow(root, rel, uid)
}

// delegatedBelow is delegatedCgroup's walk of the cgroup rel's ancestors
// under root.
func delegatedBelow(root, rel string, uid int) (string, bool) {
	owned := func(p string) bool {
		var s unix.Stat_t
		return unix.Lstat(p, &s) == nil && int(s.Uid) == uid
	}
	// From the top down: the first (highest) owned ancestor is the
	// delegation point; beneath it everything is the user's.
	parts := strings.Split(strings.Trim(rel, "/"), "/")
	for i := 1; i <= len(parts); i++ {
		dir := filepath.Join(append([]string{root}, parts[:i]...)...)
		if !owned(dir) || !owned(filepath.Join(dir, "cgroup.procs")) || !owned(filepath.Join(dir, "cgroup.subtree_control")) {
			continue
		}
		ctl, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
		if err != nil {
			return "", false
		}
		have := strings.Fields(string(ctl))
		for _, c := range delegatedControllers {
			if !slices.Contains(have, c) {
				return "", false
			}
		}
		return dir, true
	}
	return "", false
}

// rootlessMounted holds, per state root, the preparation's outcome.
var rootlessMounted sync.Map

// prepareRootlessStateRoot runs once per state root in the rootless
// child, before its first run there: every mount of its namespace becomes
// private (nothing it mounts reaches the host's namespace), and the state
// root gets a tmpfs of its own, so that the runs' directories live in
// memory that disappears with the child's mount namespace: a killed
// rootless run leaves nothing to collect.
func prepareRootlessStateRoot(stateDir string) error {
	v, _ := rootlessMounted.LoadOrStore(stateDir, sync.OnceValue(func() error {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("%w: making the mount namespace private: %w", errStateRoot, err)
		}
		if err := os.MkdirAll(stateDir, 0o700); err != nil {
			return fmt.Errorf("%w: %w", errStateRoot, err)
		}
		var st unix.Stat_t
		// Another user's directory (or a link) in a shared /tmp must not
		// become the place where this user's runs are built.
		if err := unix.Lstat(stateDir, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 {
			return fmt.Errorf("%w: %s: not a directory of this user's (%v)", errStateRoot, stateDir, err)
		}
		if err := unix.Mount("cleanroom-state", stateDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700,size=4m"); err != nil {
			return fmt.Errorf("%w: %s: tmpfs: %w", errStateRoot, stateDir, err)
		}
		return nil
	}))
	return v.(func() error)()
}

// RootlessStateDir is the state root of rootless runs: the user's
// $XDG_RUNTIME_DIR/cleanroom-sandbox, or cleanroom-sandbox-UID in the
// temporary directory. Exec mounts a tmpfs on it in its own mount
// namespace; on the host it stays an empty directory.
func RootlessStateDir(hostUID int) string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return filepath.Join(d, "cleanroom-sandbox")
		}
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("cleanroom-sandbox-%d", hostUID))
}

// InRootlessChild reports whether this process is the one EnterRootless
// started (rootless runs happen there only).
func InRootlessChild() bool { return rootless().on }

// RootlessHostUID is the host uid of the rootless child's user (-1
// outside it).
func RootlessHostUID() int {
	if r := rootless(); r.on {
		return r.hostUID
	}
	return -1
}

// NeedsRootless reports whether a command that runs candidates must go
// through EnterRootless: this process is not host root (not uid 0 in the
// initial user namespace) and is not already the rootless child.
func NeedsRootless() bool {
	if rootless().on {
		return false
	}
	maps, err := readIDMap("/proc/self/uid_map")
	return os.Geteuid() != 0 || err != nil || !initialUserNS(maps)
}

// EnterRootless runs this binary again with args in a new user namespace
// (this user's uid and gid mapped to 0, nothing else: no newuidmap, no
// subordinate ids) and a new mount namespace, with the same standard
// streams, and returns its exit code. Signals this process receives
// (SIGINT, SIGTERM, SIGHUP) are passed on, each once (the child ends at
// once on a second one); the child has its own process group, so a
// terminal's signal reaches it through this process only. If this process dies, the
// kernel kills the child (parent-death signal), and with it its
// containers and its mount namespace. An error means the namespace could
// not be made or the child not run; it wraps errRootless (errUnsupported:
// no isolation here) and names the sysctl that forbids it when one does.
func EnterRootless(args []string) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("%w: rootless re-execution: %w", errRootless, err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Args[0] = os.Args[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), rootlessEnv+"=1")
	cmd.SysProcAttr = userNSAttr(unix.CLONE_NEWNS)
	cmd.SysProcAttr.Setpgid = true
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, unix.SIGTERM, unix.SIGHUP)
	defer signal.Stop(sigs)
	waited, err := deathsig.Start(cmd)
	if err != nil {
		return 0, userNSRefusal(err)
	}
wait:
	for {
		select {
		case s := <-sigs:
			_ = cmd.Process.Signal(s)
		case err = <-waited:
			break wait
		}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: rootless re-execution: %w", errRootless, err)
	}
	return 0, nil
}

// userNSAttr is a new user namespace mapping this process's euid and egid
// to 0 (setgroups denied, as the kernel requires of an unprivileged
// mapping), plus the namespaces in extra. Started with deathsig.Start,
// the child dies with this process.
func userNSAttr(extra uintptr) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:                 unix.CLONE_NEWUSER | extra,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		GidMappingsEnableSetgroups: false,
	}
}

// The sysctls that forbid unprivileged user namespaces, as files under
// /proc/sys, and the value that forbids.
var userNSSysctls = []struct{ name, file, forbids string }{
	{"kernel.unprivileged_userns_clone", "kernel/unprivileged_userns_clone", "0"},
	{"user.max_user_namespaces", "user/max_user_namespaces", "0"},
	{"kernel.apparmor_restrict_unprivileged_userns", "kernel/apparmor_restrict_unprivileged_userns", "1"},
}

// procSys is where userNSSysctls are read (tests point it elsewhere).
var procSys = "/proc/sys"

// forbiddingSysctls names each sysctl set to the value that forbids an
// unprivileged user namespace.
func forbiddingSysctls() []string {
	var out []string
	for _, s := range userNSSysctls {
		b, err := os.ReadFile(filepath.Join(procSys, s.file))
		if err == nil && strings.TrimSpace(string(b)) == s.forbids {
			out = append(out, s.name+"="+s.forbids)
		}
	}
	return out
}

// userNSRefusal words a failure to make or use an unprivileged user
// namespace: the sysctls that forbid it, if any, else the kernel's error.
func userNSRefusal(err error) error {
	if s := forbiddingSysctls(); len(s) > 0 {
		return fmt.Errorf("%w: unprivileged user namespaces are disabled (%s): %w", errRootless, strings.Join(s, ", "), err)
	}
	return fmt.Errorf("%w: an unprivileged user namespace could not be made: %w", errRootless, err)
}

// ProbeArg is argv[1] of the rootless probe: CheckMode runs this binary
// with it in a new user, mount and network namespace (see rootlessProbe).
const ProbeArg = "sandbox-rootless-probe"

// probeRootless checks, by doing it, that an unprivileged user namespace
// gives what a rootless run needs: a tmpfs mounted and remounted
// read-only at the superblock, and lo brought up in a network namespace of
// its own (AppArmor's restriction lets the namespace be made and then
// refuses exactly these). nil means rootless runs can be set up here.
func probeRootless() error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%w: %w", errRootless, err)
	}
	cmd := exec.Command(exe, ProbeArg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = userNSAttr(unix.CLONE_NEWNS | unix.CLONE_NEWNET)
	waited, err := deathsig.Start(cmd)
	if err != nil {
		return userNSRefusal(err)
	}
	if err := <-waited; err != nil {
		line, _ := bufio.NewReader(io.LimitReader(&stderr, 4096)).ReadString('\n')
		return userNSRefusal(errors.New(cmp.Or(strings.TrimSpace(line), err.Error())))
	}
	return nil
}

// rootlessProbe is the body of the probe process (ProbeArg), in its new
// namespaces: it exits 0 when the tmpfs and lo steps succeed, else 1 with
// the failed step on stderr.
func rootlessProbe() {
	fail := func(step string, err error) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", step, err)
		os.Exit(1)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fail("mount --make-rprivate /", err)
	}
	dir := os.TempDir()
	if err := unix.Mount("cleanroom-probe", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=64k"); err != nil {
		fail("mount tmpfs", err)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		fail("remount tmpfs read-only", err)
	}
	lo, err := netlink.LinkByName("lo")
	if err == nil {
		err = netlink.LinkSetUp(lo)
	}
	if err != nil {
		fail("bring lo up", err)
	}
	os.Exit(0)
}

// rootlessAllows refuses what this process cannot establish: any run
// outside host root unless it is the rootless child (whose mount
// namespace is its own), and in the rootless child an allowlisted egress
// (its veth and filter live in the host's network namespace, which only
// host root can change).
func rootlessAllows(cfg Config) error {
	r := rootless()
	switch {
	case !r.on && NeedsRootless():
		return fmt.Errorf("%w: not host root; rootless runs go through `cleanroom sandbox exec` (EnterRootless)", errRootless)
	case r.on && len(cfg.Allow) > 0:
		return fmt.Errorf("%w: allowlisted egress needs host root (a veth and a filter in the host's network namespace); use --net none", errRootless)
	}
	return nil
}
