package testshared

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runsc is the gVisor runtime's path; it skips the test, naming why,
// where runsc is not installed or the test is not root.
func runsc(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("runsc")
	if err != nil {
		t.Skip("runsc is not installed (Debian package runsc): not tested under gVisor")
	}
	if os.Geteuid() != 0 {
		t.Skip("runsc needs root: not tested under gVisor")
	}
	return bin
}

// UnderGVisor runs this test binary again inside gVisor (runsc, loopback
// only) with -test.run pattern and -test.v, twice, and returns what each
// printed by name:
//   - "overlay": `runsc do`, the host's root behind gVisor's own overlay
//     (files in the sandbox's memory; overlayfs gives a file its layer's
//     device number, not the overlay's);
//   - "bind": [InGVisor], the host's root read-only (the test binary with
//     it) and TMPDIR a host directory bind-mounted read-write, as a pod's
//     volumes are (on such a mount runsc 20221219 answers EINVAL to
//     renameat2 flags).
//
// It skips the test where runsc cannot run; the tests failing inside
// gVisor fail the test. For code with a gVisor-specific path (Debian's
// runsc 20221219 also answers ENOSYS to openat2): the same tests, on the
// runtime that takes that path.
func UnderGVisor(t *testing.T, pattern string) map[string]string {
	t.Helper()
	bin := runsc(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	testArgs := []string{exe, "-test.run", pattern, "-test.v", "-test.count=1"}
	outs := map[string]string{}
	do := exec.Command(bin, append([]string{"--root", t.TempDir(), "--network=none", "do"}, testArgs...)...)
	do.Dir = t.TempDir()
	out, err := do.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests %s under runsc do: %v\n%s", pattern, err, out)
	}
	outs["overlay"] = string(out)
	tmp := t.TempDir()
	out, err = InGVisor(t, GVisorRun{Args: testArgs, Env: []string{"TMPDIR=" + tmp}, Cwd: tmp, Binds: []Bind{{Host: tmp, Dest: tmp, Writable: true}}})
	if err != nil {
		t.Fatalf("the tests %s in a runsc bundle: %v\n%s", pattern, err, out)
	}
	outs["bind"] = string(out)
	return outs
}

// GVisorRun is a process for [InGVisor].
type GVisorRun struct {
	Args []string
	Env  []string // a PATH of the usual directories unless it sets one
	Cwd  string
	// UID runs the process as UID:UID with no capability and
	// no_new_privs, as a Kubernetes pod's restricted security context
	// does; 0 runs it as root.
	UID   int
	Binds []Bind
	// Tmp mounts a tmpfs at /tmp.
	Tmp bool
}

// Bind is a host path bind-mounted into the sandbox.
type Bind struct {
	Host, Dest string
	Writable   bool
}

// InGVisor runs r in an OCI bundle with `runsc --network=none run`: the
// host's root as the sandbox's root, read-only, with /proc, a /dev of
// gVisor's own, and r's bind mounts. It returns what the process printed
// (stdout and stderr in order) and runsc's error (the process's exit
// status). It skips the test where runsc cannot run.
func InGVisor(t *testing.T, r GVisorRun) ([]byte, error) {
	t.Helper()
	bin := runsc(t)
	mounts := []map[string]any{
		{"destination": "/proc", "type": "proc", "source": "proc"},
		{"destination": "/dev", "type": "tmpfs", "source": "tmpfs"},
	}
	if r.Tmp {
		mounts = append(mounts, map[string]any{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"})
	}
	for _, b := range r.Binds {
		opt := "ro"
		if b.Writable {
			opt = "rw"
		}
		mounts = append(mounts, map[string]any{"destination": b.Dest, "type": "bind", "source": b.Host, "options": []string{"rbind", opt}})
	}
	process := map[string]any{
		"user": map[string]any{"uid": r.UID, "gid": r.UID},
		"args": r.Args,
		"env":  withPath(r.Env),
		"cwd":  r.Cwd,
	}
	if r.UID != 0 {
		process["noNewPrivileges"] = true
		process["capabilities"] = map[string]any{"bounding": []string{}, "effective": []string{}, "permitted": []string{}, "inheritable": []string{}, "ambient": []string{}}
	}
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process":    process,
		"root":       map[string]any{"path": "/", "readonly": true},
		"hostname":   "ingvisor",
		"mounts":     mounts,
		"linux":      map[string]any{"namespaces": []map[string]any{{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network"}}},
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	bundle := t.TempDir()
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	id := fmt.Sprintf("ingvisor-%d-%s", os.Getpid(), filepath.Base(bundle))
	out, err := exec.Command(bin, "--root", state, "--network=none", "run", "--bundle", bundle, id).CombinedOutput()
	_ = exec.Command(bin, "--root", state, "delete", "-force", id).Run()
	return out, err
}

// withPath is env with a PATH of the usual directories where it has none.
func withPath(env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return env
		}
	}
	return append([]string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}, env...)
}
