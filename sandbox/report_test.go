package sandbox

import (
	"errors"
	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
	"os"
	"strings"
	"testing"
)

func TestCheckKernelReport(t *testing.T) {
	t.Parallel()
	rep, err := CheckKernel()
	if err != nil && !errors.Is(err, errUnsupported) {
		t.Fatalf("CheckKernel error %v does not wrap errUnsupported", err)
	}
	if (err == nil) != (len(rep.Missing) == 0) {
		t.Fatalf("error %v disagrees with missing %q", err, rep.Missing)
	}
	// The mode: root (the only one there is) when nothing is missing.
	if wantMode := map[bool]string{true: "root", false: "unavailable"}[err == nil]; rep.Mode != wantMode || rep.CandidateUID != 2147352576 {
		t.Errorf("mode %q, candidate uid %d; want %q, 2147352576", rep.Mode, rep.CandidateUID, wantMode)
	}
	// The cgroup version is cross-checked with a different signal than the
	// one CheckKernel uses (statfs magic): the unified root has
	// cgroup.controllers, a v1 or hybrid root does not.
	want := 1
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		want = 2
	}
	if rep.CgroupVersion != want {
		t.Errorf("cgroup version %d, want %d", rep.CgroupVersion, want)
	}
	for _, ns := range []string{"mnt", "net", "pid"} {
		_, statErr := os.Stat("/proc/self/ns/" + ns)
		if rep.Namespaces[ns] != (statErr == nil) {
			t.Errorf("namespace %s reported %v, /proc says %v", ns, rep.Namespaces[ns], statErr)
		}
	}
	if os.Geteuid() != 0 {
		found := false
		for _, m := range rep.Missing {
			found = found || m == "root (the sandbox is not rootless: run as uid 0)"
		}
		if !found {
			t.Errorf("not root, but missing does not say so: %q", rep.Missing)
		}
	}
}

// On a cgroup v1 host the controllers are the enabled ones mounted as
// "cgroup" hierarchies (a v2 mount or a disabled controller does not count).
func TestControllersV1(t *testing.T) {
	t.Parallel()
	table, err := seal.ParseMountInfo(strings.NewReader(`30 25 0:26 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
32 25 0:28 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
33 25 0:29 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
34 25 0:30 / /tmp rw - tmpfs tmpfs rw,memory
`))
	if err != nil {
		t.Fatal(err)
	}
	procCgroups := []byte("#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t2\t1\t1\ncpuacct\t2\t1\t1\nmemory\t3\t1\t1\npids\t4\t1\t0\n")
	got := strings.Join(controllersV1(table, procCgroups), ",")
	if got != "cpu,cpuacct,memory" {
		t.Errorf("controllers %s, want cpu,cpuacct,memory", got)
	}
}
