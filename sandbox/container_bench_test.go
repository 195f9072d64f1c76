package sandbox

import (
	"context"
	"os/exec"
	"sort"
	"testing"
	"time"
)

// BenchmarkExecTrue is `sandbox exec -- /bin/true`: network namespace,
// mechanism check, rootfs, cgroups, container start (user namespace, the
// full system-call filter), wait and teardown.
// It reports the median as median-ms.
func BenchmarkExecTrue(b *testing.B) {
	needSandbox(b)
	state := testStateDir(b)
	var d []time.Duration
	for b.Loop() {
		t0 := time.Now()
		res, err := Exec(context.Background(), Config{Args: []string{"/bin/true"}, StateDir: state}, Stdio{})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, res)
		}
		d = append(d, time.Since(t0))
	}
	reportMedian(b, d)
}

// BenchmarkBwrapTrue runs the comparison the issue asks for, when
// bubblewrap is installed: bwrap with every namespace unshared and /usr
// bound read-only (no cgroups, no check).
func BenchmarkBwrapTrue(b *testing.B) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Skip("bwrap is not installed (Debian package bubblewrap)")
	}
	args := []string{"--unshare-all", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "/bin/true"}
	var d []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if out, err := exec.Command(bwrap, args...).CombinedOutput(); err != nil {
			b.Fatalf("bwrap: %v %s", err, out)
		}
		d = append(d, time.Since(t0))
	}
	reportMedian(b, d)
}

func reportMedian(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "median-ms")
}
