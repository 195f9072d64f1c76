package sandbox

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cleanroom-dev/cleanroom/sandbox/sandboxinit"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// maskedPaths hide kernel interfaces that leak host information or allow
// host-wide actions (the list runc's spec generator uses, plus /proc/kcore
// and friends).
var maskedPaths = []string{
	"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
	"/proc/interrupts", "/sys/firmware",
}

// readonlyPaths keep the kernel's tunables out of the candidate's reach.
var readonlyPaths = []string{
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
}

// hostTopDirs are bound read-only when they are real directories on the
// host and recreated as the same symlink when the host has a symlink
// (usr-merged systems).
var hostTopDirs = []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// minimalEtc is the whole /etc the candidate sees: enough for libc's user
// and host lookups, nothing of the host's configuration or secrets.
var minimalEtc = map[string]string{
	"passwd":        "root:x:0:0:root:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
	"group":         "root:x:0:\nnogroup:x:65534:\n",
	"hosts":         "127.0.0.1\tlocalhost\n::1\tlocalhost\n",
	"hostname":      "candidate\n",
	"nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
	"resolv.conf":   "",
}

// The candidate's user namespace maps its uids and gids 0–65535 onto the
// host's CandidateUID … CandidateUID+65535: the candidate's root is host
// uid CandidateUID, never host root.
const (
	CandidateUID = 0x7ffe0000 // 2147352576
	CandidateIDs = 65536
)

// Spec renders the configuration as an OCI runtime spec: the one
// description both Exec (through libcontainer) and an OCI bundle use.
// rootfs is the (empty, prepared) root directory, netnsPath the network
// namespace to join, id names the cgroup. The command is the container's
// first process: Exec's container init sets the parent-death signal
// itself (see sandboxinit), so no shim is needed.
func (c *Config) Spec(rootfs, netnsPath, id string) (*specs.Spec, error) {
	return c.spec(rootfs, netnsPath, id, "")
}

// spec renders the configuration; a non-empty exe (an OCI bundle, run by
// another runtime's init) is bound read-only at shimPath and is the first
// process (see sandboxinit.ShimArg). netnsPath "" means a new network
// namespace.
func (c *Config) spec(rootfs, netnsPath, id, exe string) (*specs.Spec, error) {
	cfg := c.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	const rbindRO = "rro" // recursive read-only (mount_setattr AT_RECURSIVE)
	mounts := []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/usr", Type: "bind", Source: "/usr", Options: []string{"rbind", "ro", rbindRO, "nosuid", "nodev"}},
		{Destination: "/etc", Type: "bind", Source: filepath.Join(filepath.Dir(rootfs), "etc"), Options: []string{"bind", "ro", "nosuid", "nodev", "noexec"}},
		{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=1777", "size=262144k"}},
	}
	for _, d := range hostTopDirs {
		fi, err := os.Lstat(d)
		if err != nil || fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
			continue // absent, or a symlink prepareRootfs recreates
		}
		mounts = append(mounts, specs.Mount{Destination: d, Type: "bind", Source: d, Options: []string{"rbind", "ro", rbindRO, "nosuid", "nodev"}})
	}
	if alt, err := os.Lstat("/etc/alternatives"); err == nil && alt.IsDir() {
		// Debian's alternatives are symlinks into /usr (awk, editor…);
		// without them those commands dangle.
		mounts = append(mounts, specs.Mount{Destination: "/etc/alternatives", Type: "bind", Source: "/etc/alternatives", Options: []string{"rbind", "ro", rbindRO, "nosuid", "nodev", "noexec"}})
	}
	if certs, err := os.Stat("/etc/ssl/certs"); err == nil && certs.IsDir() {
		// Public CA certificates only; /etc/ssl/private stays out.
		mounts = append(mounts, specs.Mount{Destination: "/etc/ssl/certs", Type: "bind", Source: "/etc/ssl/certs", Options: []string{"rbind", "ro", rbindRO, "nosuid", "nodev", "noexec"}})
	}
	args := cfg.Args
	if exe != "" {
		// This binary, read-only, as the container's first process (see
		// sandboxinit.ShimArg).
		mounts = append(mounts, specs.Mount{Destination: shimPath, Type: "bind", Source: exe, Options: []string{"bind", "ro", "nosuid", "nodev"}})
		args = append([]string{shimPath, ShimArg}, cfg.Args...)
	}
	if cfg.Workspace != "" {
		mounts = append(mounts, specs.Mount{Destination: "/workspace", Type: "bind", Source: cfg.Workspace, Options: []string{"bind", "rw", "nosuid", "nodev"}})
	} else {
		mounts = append(mounts, specs.Mount{Destination: "/workspace", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "nodev", "mode=755", "size=262144k"}})
	}
	for _, b := range cfg.Binds {
		mounts = append(mounts, specs.Mount{Destination: b.Destination, Type: "bind", Source: b.Source, Options: []string{"rbind", "ro", rbindRO, "nosuid", "nodev"}})
	}
	if pkg := cmp.Or(cfg.packageView, cfg.Package); pkg != "" {
		mounts = append(mounts, specs.Mount{Destination: "/package", Type: "bind", Source: pkg, Options: []string{"rbind", "ro", rbindRO, "nosuid", "nodev", "noexec"}})
	}

	memory := cfg.Memory
	pids := cfg.Pids
	period := uint64(100000)
	quota := int64(cfg.CPUs * float64(period))
	res := &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &memory},
		Pids:   &specs.LinuxPids{Limit: &pids},
		CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
		// Deny every device except the defaults libcontainer creates
		// (null, zero, full, random, urandom, tty).
		Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
	}
	if swapAccounted() {
		// memory+swap equal to memory: no swap beyond the limit.
		res.Memory.Swap = &memory
	}
	env := append([]string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=/workspace"}, cfg.Env...)
	rlimits := []specs.POSIXRlimit{
		{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024},
		{Type: "RLIMIT_CORE", Hard: 0, Soft: 0},
	}
	idMap := []specs.LinuxIDMapping{{ContainerID: 0, HostID: CandidateUID, Size: CandidateIDs}}
	cgroupsPath := filepath.Join(cgroupParent, id)
	if r := rootless(); r.on {
		// The user's own uid and gid (0 of the rootless child's user
		// namespace) are the only ones it has to give.
		idMap = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 0, Size: 1}}
		// No device rules: a delegated subtree cannot hold them (the
		// candidate's /dev holds only the default nodes, bound from the
		// host's, and it has no CAP_MKNOD).
		res.Devices = nil
		if r.limits == LimitsDelegated {
			cgroupsPath = filepath.Join(strings.TrimPrefix(r.cgroup, "/sys/fs/cgroup"), "cleanroom-"+id)
		} else {
			// No cgroup is writable: per-process rlimits stand in for
			// the memory and task limits (see rlimitsFor), set by the
			// limits stage at the command's exec, not by libcontainer:
			// its rlimits bind the container's own Go init from before
			// the exec, which a small --memory kills.
			cgroupsPath, res = "", nil
			stage := "/proc/self/exe" // the init's sealed copy of this binary
			if exe != "" {
				stage = shimPath
			}
			lim := clampRlimits(rlimitsFor(cfg.Memory, cfg.Pids))
			args = append([]string{stage, sandboxinit.LimitsArg, strconv.FormatUint(lim[0].Hard, 10), strconv.FormatUint(lim[1].Hard, 10)}, args...)
		}
		rlimits = clampRlimits(rlimits)
	}
	return &specs.Spec{
		Version:  specs.Version,
		Hostname: "candidate",
		Root:     &specs.Root{Path: rootfs, Readonly: true},
		Process: &specs.Process{
			Args: args,
			Env:  env,
			Cwd:  "/workspace",
			User: specs.User{UID: 0, GID: 0},
			// Empty sets: no capabilities at all.
			Capabilities:    &specs.LinuxCapabilities{Bounding: []string{}, Effective: []string{}, Permitted: []string{}, Inheritable: []string{}, Ambient: []string{}},
			NoNewPrivileges: true,
			Rlimits:         rlimits,
		},
		Mounts: mounts,
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.MountNamespace}, {Type: specs.PIDNamespace}, {Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace}, {Type: specs.NetworkNamespace, Path: netnsPath},
				{Type: specs.UserNamespace}, {Type: specs.CgroupNamespace},
			},
			UIDMappings:       idMap,
			GIDMappings:       idMap,
			CgroupsPath:       cgroupsPath,
			Resources:         res,
			MaskedPaths:       maskedPaths,
			ReadonlyPaths:     readonlyPaths,
			RootfsPropagation: "private",
		},
	}, nil
}

// swapAccounted reports whether the memory controller accounts swap
// (v1 memory.memsw.* present, or v2).
func swapAccounted() bool {
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"); err == nil {
		return true
	}
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// prepareRootfs builds the empty root under bundle: mountpoints, the
// symlinks of a usr-merged host, the minimal /etc (bound read-only) and,
// withShim, the mount point of the bundle's shim, and those of binds. It
// returns the rootfs path.
func prepareRootfs(bundle string, withPackage, withShim bool, binds []Bind) (string, error) {
	rootfs := filepath.Join(bundle, "rootfs")
	etc := filepath.Join(bundle, "etc")
	for _, d := range []string{rootfs, etc} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", fmt.Errorf("rootfs: %w", err)
		}
	}
	dirs := []string{"usr", "proc", "dev", "tmp", "etc", "workspace"}
	if withPackage {
		dirs = append(dirs, "package")
	}
	for _, d := range dirs {
		if err := os.Mkdir(filepath.Join(rootfs, d), 0o755); err != nil {
			return "", fmt.Errorf("rootfs: %w", err)
		}
	}
	if withShim {
		if err := os.Mkdir(filepath.Join(rootfs, filepath.Dir(shimPath)), 0o755); err != nil {
			return "", fmt.Errorf("rootfs: %w", err)
		}
		if err := os.WriteFile(filepath.Join(rootfs, shimPath), nil, 0o755); err != nil {
			return "", fmt.Errorf("rootfs: %w", err)
		}
	}
	for _, b := range binds {
		mp := filepath.Join(rootfs, b.Destination)
		if err := os.MkdirAll(filepath.Dir(mp), 0o755); err != nil {
			return "", fmt.Errorf("rootfs: %w", err)
		}
		fi, err := os.Stat(b.Source)
		if err != nil {
			return "", fmt.Errorf("rootfs: bind: %w", err)
		}
		if fi.IsDir() {
			err = os.Mkdir(mp, 0o755)
		} else {
			err = os.WriteFile(mp, nil, 0o755)
		}
		if err != nil {
			return "", fmt.Errorf("rootfs: bind mount point: %w", err)
		}
	}
	for _, d := range hostTopDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(d)
			if err != nil {
				return "", fmt.Errorf("rootfs: %w", err)
			}
			if err := os.Symlink(target, filepath.Join(rootfs, d)); err != nil {
				return "", fmt.Errorf("rootfs: %w", err)
			}
		} else if fi.IsDir() {
			if err := os.Mkdir(filepath.Join(rootfs, d), 0o755); err != nil {
				return "", fmt.Errorf("rootfs: %w", err)
			}
		}
	}
	for name, content := range minimalEtc {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(content), 0o644); err != nil {
			return "", fmt.Errorf("rootfs /etc: %w", err)
		}
	}
	for _, d := range []string{"ssl/certs", "alternatives"} {
		if err := os.MkdirAll(filepath.Join(etc, d), 0o755); err != nil {
			return "", fmt.Errorf("rootfs /etc: %w", err)
		}
	}
	return rootfs, nil
}

// toLibcontainer converts the spec with runc's own converter, so the
// container is exactly what `runc run` would make of the same config.json.
func toLibcontainer(spec *specs.Spec, id string) (*configs.Config, error) {
	// In the rootless child no host cgroup is writable: libcontainer
	// skips the hierarchies it cannot join when no path is set (rlimits;
	// the name only keeps it from taking this process's own cgroup for
	// the container's), and fails on any limit it cannot set where one is
	// (delegated).
	lc, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{Spec: spec, NoNewKeyring: true, RootlessCgroups: rootless().on, CgroupName: "cleanroom-" + id})
	if err != nil {
		return nil, fmt.Errorf("converting the sandbox spec: %w", err)
	}
	return lc, nil
}

var rlimitTypes = map[string]int{
	"RLIMIT_NOFILE": unix.RLIMIT_NOFILE,
	"RLIMIT_CORE":   unix.RLIMIT_CORE,
	"RLIMIT_NPROC":  unix.RLIMIT_NPROC,
	"RLIMIT_FSIZE":  unix.RLIMIT_FSIZE,
	"RLIMIT_DATA":   unix.RLIMIT_DATA,
}

// rlimitsFor is what stands in for the memory and pids cgroup limits when
// no cgroup can be used (rootless, rlimits): RLIMIT_DATA bounds each
// process's private writable memory (heap, anonymous mappings; unlike
// RLIMIT_AS it leaves runtimes that reserve address space up front, such
// as V8 and Go, alone), RLIMIT_NPROC the tasks of the candidate's uid in
// its own user namespace. Both are per process (NPROC per uid), not a
// total over the container: N tasks may each use memory bytes.
func rlimitsFor(memory, pids int64) []specs.POSIXRlimit {
	return []specs.POSIXRlimit{
		{Type: "RLIMIT_DATA", Hard: uint64(memory), Soft: uint64(memory)},
		{Type: "RLIMIT_NPROC", Hard: uint64(pids), Soft: uint64(pids)},
	}
}

// clampRlimits lowers each limit to this process's own hard limit: an
// unprivileged user cannot raise one (the container's init would fail to
// set it), and a lower limit only narrows.
func clampRlimits(in []specs.POSIXRlimit) []specs.POSIXRlimit {
	out := make([]specs.POSIXRlimit, len(in))
	for i, r := range in {
		var cur unix.Rlimit
		if t, ok := rlimitTypes[r.Type]; ok && unix.Getrlimit(t, &cur) == nil {
			r.Hard = min(r.Hard, cur.Max)
			r.Soft = min(r.Soft, r.Hard)
		}
		out[i] = r
	}
	return out
}

// processFor builds the container's first process from spec.Process.
func processFor(spec *specs.Spec) *libcontainer.Process {
	sp := spec.Process
	nnp := sp.NoNewPrivileges
	p := &libcontainer.Process{
		Args:            sp.Args,
		Env:             sp.Env,
		Cwd:             sp.Cwd,
		UID:             int(sp.User.UID),
		GID:             int(sp.User.GID),
		NoNewPrivileges: &nnp,
		Init:            true,
	}
	for _, r := range sp.Rlimits {
		if t, ok := rlimitTypes[r.Type]; ok {
			p.Rlimits = append(p.Rlimits, configs.Rlimit{Type: t, Hard: r.Hard, Soft: r.Soft})
		}
	}
	return p
}
