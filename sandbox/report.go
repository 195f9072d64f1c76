package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// ErrUnsupported is wrapped by CheckKernel's error when this machine cannot
// establish the candidate sandbox; the error text names every missing piece.
var ErrUnsupported = errors.New("the kernel cannot establish the candidate sandbox")

// KernelReport is what `cleanroom sandbox check` prints: what the kernel
// offers for the candidate sandbox, and what is missing.
type KernelReport struct {
	// Root is true when the effective uid is 0: the sandbox needs host
	// root to set up (cgroups, the network namespace's check, the
	// bind mounts); the candidate itself runs in a user namespace as host
	// uid CandidateUID.
	Root bool `json:"root"`
	// Mode is how this machine runs candidates: "root" (set up by host
	// root, the candidate unprivileged in a user namespace), or
	// "unavailable". There is no rootless mode (set up without host root,
	// rlimits for cgroups) yet.
	Mode string `json:"mode"`
	// CandidateUID is the host uid the candidate runs as (its root inside
	// its user namespace); uids and gids CandidateUID … +65535 are the
	// sandbox's.
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

// CheckKernel inspects this machine and returns the report. The error wraps
// ErrUnsupported and names the missing pieces when the sandbox cannot run.
func CheckKernel() (*KernelReport, error) {
	r := &KernelReport{Root: os.Geteuid() == 0, Namespaces: map[string]bool{}, Controllers: []string{}, Missing: []string{}}
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
	if !r.Root {
		r.Missing = append(r.Missing, "root (the sandbox is not rootless: run as uid 0)")
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
	if !r.UserNamespaces {
		r.Missing = append(r.Missing, "user namespaces (max_user_namespaces is 0): the candidate runs in one")
	}
	r.CandidateUID = CandidateUID
	if len(r.Missing) > 0 {
		r.Mode = "unavailable"
		return r, fmt.Errorf("%w: missing %s", ErrUnsupported, strings.Join(r.Missing, "; "))
	}
	r.Mode = "root"
	return r, nil
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
