package testshared

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// UnderGVisor runs this test binary again inside gVisor (runsc, loopback
// only) with -test.run pattern and -test.v, twice, and returns what each
// printed by name:
//   - "overlay": `runsc do`, the host's root behind gVisor's own overlay
//     (files in the sandbox's memory; overlayfs gives a file its layer's
//     device number, not the overlay's);
//   - "bind": an OCI bundle run by `runsc run`, the host's root read-only
//     (the test binary with it) and TMPDIR a host directory bind-mounted
//     read-write, as a pod's volumes are (on such a mount runsc 20221219
//     answers EINVAL to renameat2 flags).
//
// It skips the test, naming why, where runsc is not installed or the test
// is not root; the tests failing inside gVisor fail the test. For code
// with a gVisor-specific path (Debian's runsc 20221219 also answers ENOSYS
// to openat2): the same tests, on the runtime that takes that path.
func UnderGVisor(t *testing.T, pattern string) map[string]string {
	t.Helper()
	runsc, err := exec.LookPath("runsc")
	if err != nil {
		t.Skip("runsc is not installed (Debian package runsc): not tested under gVisor")
	}
	if os.Geteuid() != 0 {
		t.Skip("runsc needs root: not tested under gVisor")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	testArgs := []string{exe, "-test.run", pattern, "-test.v", "-test.count=1"}
	outs := map[string]string{}

	do := exec.Command(runsc, append([]string{"--root", t.TempDir(), "--network=none", "do"}, testArgs...)...)
	do.Dir = t.TempDir()
	out, err := do.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests %s under runsc do: %v\n%s", pattern, err, out)
	}
	outs["overlay"] = string(out)

	bundle, tmp := t.TempDir(), t.TempDir()
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"user": map[string]any{"uid": 0, "gid": 0},
			"args": testArgs,
			"env":  []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "TMPDIR=" + tmp},
			"cwd":  tmp,
		},
		"root":     map[string]any{"path": "/", "readonly": true},
		"hostname": "undergvisor",
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs"},
			{"destination": tmp, "type": "bind", "source": tmp, "options": []string{"rbind", "rw"}},
		},
		"linux": map[string]any{"namespaces": []map[string]any{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network"}}},
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	id := fmt.Sprintf("undergvisor-%d", os.Getpid())
	run := exec.Command(runsc, "--root", state, "--network=none", "run", "--bundle", bundle, id)
	out, err = run.CombinedOutput()
	_ = exec.Command(runsc, "--root", state, "delete", "-force", id).Run()
	if err != nil {
		t.Fatalf("the tests %s in a runsc bundle: %v\n%s", pattern, err, out)
	}
	outs["bind"] = string(out)
	return outs
}
