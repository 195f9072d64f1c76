package sandbox

import (
	"errors"
	"os"
	"testing"
)

func TestCheckKernelReport(t *testing.T) {
	rep, err := CheckKernel()
	if err != nil && !errors.Is(err, ErrUnsupported) {
		t.Fatalf("CheckKernel error %v does not wrap ErrUnsupported", err)
	}
	if (err == nil) != (len(rep.Missing) == 0) {
		t.Fatalf("error %v disagrees with missing %q", err, rep.Missing)
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
