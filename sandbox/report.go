package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// errUnsupported is wrapped by CheckKernel's error when this machine cannot
// establish the candidate sandbox; the error text names every missing piece.
var errUnsupported = fault.New(fault.NoIsolation, "the kernel cannot establish the candidate sandbox")

// KernelReport is what `cleanroom sandbox check` prints: what the kernel
// offers for the candidate sandbox, and what is missing.
type KernelReport struct {
	// Root is true when this process is host root (uid 0 in the initial
	// user namespace).
	Root bool `json:"root"`
	// Mode is how this machine runs candidates for this user: ModeRoot
	// (set up by host root, the candidate host uid CandidateUID in a user
	// namespace, cgroup limits), ModeRootless (set up by this unprivileged
	// user in a user namespace of its own, the candidate this user's uid,
	// limits per Limits), or ModeUnavailable (Missing says why).
	Mode string `json:"mode"`
	// Limits is how the candidate's memory, tasks and CPU are limited:
	// LimitsCgroups (root), LimitsDelegated or LimitsRlimits (rootless);
	// empty when unavailable.
	Limits string `json:"limits,omitempty"`
	// Why says in words why this mode (and these limits) and not another.
	Why string `json:"why"`
	// CandidateUID is the host uid the candidate runs as (its root inside
	// its user namespace): CandidateUID (uids and gids CandidateUID …
	// +65535 are the sandbox's) as root, this user's uid rootless.
	CandidateUID int `json:"candidate_uid"`
	// Namespaces maps each namespace kind to whether /proc/self/ns shows it.
	Namespaces map[string]bool `json:"namespaces"`
	// UserNamespaces reports whether user namespaces can be created
	// (max_user_namespaces > 0): required, the candidate runs in one.
	UserNamespaces bool `json:"user_namespaces"`
	// CgroupVersion is 1 (legacy or hybrid) or 2 (unified).
	CgroupVersion int `json:"cgroup_version"`
	// Controllers lists the cgroup controllers usable by the sandbox: for
	// v1 the mounted hierarchies, for v2 the root's cgroup.controllers.
	Controllers []string `json:"controllers"`
	// EgressFilter reports whether nf_tables answers (needed only for
	// allowlisted egress; full isolation does not use it).
	EgressFilter bool `json:"egress_filter"`
	// Missing names each required piece that is absent; empty when the
	// sandbox can run here.
	Missing []string `json:"missing"`
}

// requiredNamespaces are the namespaces every candidate container gets.
var requiredNamespaces = []string{"mnt", "pid", "ipc", "uts", "net", "user", "cgroup"}

// reportedNamespaces are listed in the report; the extras are informational.
var reportedNamespaces = []string{"cgroup", "ipc", "mnt", "net", "pid", "time", "user", "uts"}

// requiredControllers are the cgroup controllers the limits need. On v1,
// libcontainer also refuses to start without the devices controller: its
// absence would leave device access unrestricted.
var requiredControllers = map[int][]string{
	1: {"cpu", "devices", "memory", "pids"},
	2: {"cpu", "memory", "pids"},
}

// CheckKernel is CheckMode for a caller that runs Exec in its own process
// (amber run, run complete, room agent, the demo): besides what CheckMode
// refuses, it refuses a user who is not root outside the rootless child
// (errRootless): only `sandbox exec` and `sandbox probe` run themselves
// again rootless (EnterRootless).
func CheckKernel() (*KernelReport, error) {
	r, err := CheckMode()
	if err == nil && r.Mode == ModeRootless && !rootless().on {
		return r, fmt.Errorf("%w: this command runs the sandbox in its own process, which needs host root (only `cleanroom sandbox exec` and `sandbox probe` run rootless)", errRootless)
	}
	return r, err
}

// CheckMode inspects this machine and returns the report: the mode this
// process's user gets and why. The error wraps errUnsupported and names
// the missing pieces when the sandbox cannot run here in any mode.
func CheckMode() (*KernelReport, error) {
	// Host root: NeedsRootless already requires euid 0 in the initial
	// user namespace of any process but the rootless child.
	r := &KernelReport{Root: !NeedsRootless() && !rootless().on, Namespaces: map[string]bool{}, Controllers: []string{}, Missing: []string{}}
	for _, ns := range reportedNamespaces {
		_, err := os.Lstat(filepath.Join("/proc/self/ns", ns))
		r.Namespaces[ns] = err == nil
	}
	for _, ns := range requiredNamespaces {
		if !r.Namespaces[ns] {
			r.Missing = append(r.Missing, "namespace "+ns)
		}
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil {
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		r.UserNamespaces = n > 0 && r.Namespaces["user"]
	}
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		r.Missing = append(r.Missing, fmt.Sprintf("cgroup filesystem at /sys/fs/cgroup (%v)", err))
	} else if st.Type == unix.CGROUP2_SUPER_MAGIC {
		r.CgroupVersion = 2
		b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers")
		if err != nil {
			r.Missing = append(r.Missing, fmt.Sprintf("cgroup v2 controllers (%v)", err))
		}
		r.Controllers = append(r.Controllers, strings.Fields(string(b))...)
	} else {
		r.CgroupVersion = 1
		r.Controllers = append(r.Controllers, v1Controllers()...)
	}
	if !r.UserNamespaces {
		r.Missing = append(r.Missing, "user namespaces (user.max_user_namespaces is 0): the candidate runs in one")
	}
	switch {
	case r.Root:
		have := map[string]bool{}
		for _, c := range r.Controllers {
			have[c] = true
		}
		for _, c := range requiredControllers[r.CgroupVersion] {
			if !have[c] {
				r.Missing = append(r.Missing, fmt.Sprintf("cgroup v%d controller %s", r.CgroupVersion, c))
			}
		}
		if c, err := nftables.New(); err == nil {
			_, err = c.ListTables()
			r.EgressFilter = err == nil
		}
		r.CandidateUID, r.Limits = CandidateUID, LimitsCgroups
		r.Why = "host root: the candidate runs in a user namespace as host uid " + fmt.Sprint(CandidateUID) + ", limited by cgroups"
	case rootless().on:
		// The rootless child: its user namespace exists, the probe is
		// what it is doing.
		rs := rootless()
		r.CandidateUID, r.Limits = rs.hostUID, rs.limits
		r.Why = rootlessWhy(rs.hostUID, rs.limits, rs.cgroup)
	case !r.UserNamespaces:
		// Missing names user.max_user_namespaces already.
	default:
		if err := probeRootless(); err != nil {
			r.Missing = append(r.Missing, strings.TrimPrefix(err.Error(), errRootless.Error()+": "))
			break
		}
		r.CandidateUID, r.Limits = os.Geteuid(), LimitsRlimits
		dir, ok := delegatedCgroup("/sys/fs/cgroup", "/proc/self/cgroup", os.Geteuid())
		if ok {
			r.Limits = LimitsDelegated
		}
		r.Why = rootlessWhy(os.Geteuid(), r.Limits, dir)
	}
	if len(r.Missing) > 0 {
		r.Mode, r.Limits = ModeUnavailable, ""
		r.Why = r.Missing[0]
		return r, fmt.Errorf("%w: missing %s", errUnsupported, strings.Join(r.Missing, "; "))
	}
	r.Mode = ModeRootless
	if r.Root {
		r.Mode = ModeRoot
	}
	return r, nil
}

// rootlessWhy says why a rootless sandbox limits the way it does.
func rootlessWhy(uid int, limits, cgroup string) string {
	s := fmt.Sprintf("not host root: unprivileged user namespaces work here; the candidate runs as this user's uid %d, ", uid)
	if limits == LimitsDelegated {
		return s + "limited by the delegated cgroup v2 subtree " + cgroup
	}
	return s + "limited by rlimits (no cgroup v2 subtree with memory and pids is delegated to this user)"
}

// v1Controllers returns the controllers mounted as cgroup v1 hierarchies:
// the superblock options of each "cgroup" mount in this process's mount
// table that /proc/cgroups lists as enabled.
func v1Controllers() []string {
	table, err := seal.ReadMountInfo(0)
	if err != nil {
		return nil
	}
	procCgroups, _ := os.ReadFile("/proc/cgroups")
	return controllersV1(table, procCgroups)
}

// controllersV1 is v1Controllers over a parsed mount table and the bytes of
// /proc/cgroups.
func controllersV1(table []seal.MountInfo, procCgroups []byte) []string {
	known := map[string]bool{}
	for _, line := range strings.Split(string(procCgroups), "\n") {
		fs := strings.Fields(line)
		if len(fs) == 4 && !strings.HasPrefix(fs[0], "#") && fs[3] == "1" {
			known[fs[0]] = true
		}
	}
	set := map[string]bool{}
	for _, m := range table {
		if m.FSType != "cgroup" {
			continue
		}
		for _, o := range m.SuperOptions {
			if known[o] {
				set[o] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}
