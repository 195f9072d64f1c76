package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestIsolationUnavailableExitsThree runs, as an unprivileged user, what
// the candidate sandbox cannot establish without host root: the demo
// (it runs the sandbox in its own process; only `sandbox exec` and
// `sandbox probe` run rootless) and an allowlisted exec or probe (the
// allowlist's veth and filter need host root). Each must exit 3 and name
// the missing piece — not 2 (usage) and not 1 (refused input), and never a
// stack trace. (Where unprivileged user namespaces are disabled,
// TestSandboxRootlessRefusals has check and exec exit 3.)
func TestIsolationUnavailableExitsThree(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the binary as another user")
	}
	dir, err := os.MkdirTemp("", "cleanroom-exit3-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// nobody must be able to write the demo's output directory, and to
	// reach and run the binary.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin, binDir := cliBinary(t)
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"allowlisted exec", []string{"sandbox", "exec", "--net", "allow:10.9.8.7:80", "--", "/bin/true"}, "allowlisted egress needs host root"},
		{"allowlisted probe", []string{"sandbox", "probe", "--net", "allow:10.9.8.7:80", "--sealed", "10.9.8.8:80", "--control", "10.9.8.7:80"}, "allowlisted egress needs host root"},
		{"demo", []string{"demo", "--out", filepath.Join(dir, "demo")}, "cannot create the isolation it needs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.args...)
			cmd.Dir = dir
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "TMPDIR=" + dir}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 3 {
				t.Fatalf("%v: %v, want exit 3\n%s", tc.args, err, out)
			}
			if !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "goroutine ") {
				t.Errorf("%v: output lacks %q (or has a stack trace):\n%s", tc.args, tc.want, out)
			}
		})
	}
}
