package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/adapter"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sandbox"
)

// The test binary includes init.go, so it is libcontainer's init when
// `sandbox exec` re-executes it.
func TestSandboxCommands(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the candidate sandbox needs root")
	}
	if _, err := sandbox.CheckKernel(); err != nil {
		t.Skipf("the candidate sandbox cannot run here: %v", err)
	}
	// A listener on the host's loopback: the probe from the candidate's
	// vantage reaches only its own lo, so it is sealed (refused there).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ws := "--workspace=" + t.TempDir()
	pkg := t.TempDir()
	if err := os.WriteFile(filepath.Join(pkg, "SPEC.md"), []byte("spec\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tree, err := pkgwalk.Walk(pkg, pkgwalk.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := pkgwalk.NewManifest(tree, "")
	if err != nil {
		t.Fatal(err)
	}
	pkgID, err := m.ID()
	if err != nil {
		t.Fatal(err)
	}
	otherID := "bpkg-" + strings.Repeat("0", 64)
	for _, tc := range []struct {
		name string
		args []string
		code int
		rule string // for a refusal: in stderr
	}{
		{"check", []string{"sandbox", "check"}, 0, ""},
		{"exec status passes through", []string{"sandbox", "exec", ws, "--", "/bin/sh", "-c", "exit 3"}, 3, ""},
		{"exec timeout", []string{"sandbox", "exec", "--timeout", "1s", "--", "/bin/sleep", "30"}, sandbox.ExitTimeout, ""},
		{"exec OOM", []string{"sandbox", "exec", "--memory", "32M", "--", "/bin/sh", "-c", "head -c 200000000 /dev/zero | tail -c 100000000 >/dev/null"}, sandbox.ExitOOM, ""},
		{"exec sealed package", []string{"sandbox", "exec", "--package", pkg, "--package-id", pkgID, "--", "/bin/sh", "-c", "grep -q spec /package/SPEC.md && ! touch /package/x"}, 0, ""},
		{"exec package not the pinned bpkg", []string{"sandbox", "exec", "--package", pkg, "--package-id", otherID, "--", "/bin/true"}, 1, "is not the pinned bpkg"},
		{"exec --package-id without --package", []string{"sandbox", "exec", "--package-id", pkgID, "--", "/bin/true"}, 2, "--package-id needs --package"},
		{"exec bad --net", []string{"sandbox", "exec", "--net", "allow:example.com:443", "--", "/bin/true"}, 2, "want IP:PORT with a literal address"},
		{"exec --workspace /etc", []string{"sandbox", "exec", "--workspace", "/etc", "--", "/bin/true"}, 2, "rule system_tree"},
		{"exec --workspace /", []string{"sandbox", "exec", "--workspace", "/", "--", "/bin/true"}, 2, "rule system_tree"},
		{"exec --workspace /sys/fs/cgroup", []string{"sandbox", "exec", "--workspace", "/sys/fs/cgroup", "--", "/bin/true"}, 2, "rule system_tree"},
		{"exec --workspace not empty", []string{"sandbox", "exec", "--workspace", pkg, "--", "/bin/true"}, 2, "rule not_empty"},
		{"exec --package /etc", []string{"sandbox", "exec", "--package", "/etc", "--", "/bin/true"}, 2, "rule system_tree"},
		{"exec --package the state root", []string{"sandbox", "exec", "--package", sandbox.DefaultStateDir, "--", "/bin/true"}, 2, "rule state_root"},
		{"exec --net metadata address", []string{"sandbox", "exec", "--net", "allow:169.254.169.254:80", "--", "/bin/true"}, 2, "allowlist entry is link-local (cloud metadata lives there)"},
		{"exec --net broadcast", []string{"sandbox", "exec", "--net", "allow:255.255.255.255:80", "--", "/bin/true"}, 2, "allowlist entry is the limited broadcast address"},
		{"exec --net own pool", []string{"sandbox", "exec", "--net", "allow:10.213.0.3:80", "--", "/bin/true"}, 2, "allowlist entry is in the sandbox's own link pool"},
		{"exec --net duplicate", []string{"sandbox", "exec", "--net", "allow:192.0.2.1:80,192.0.2.1:80", "--", "/bin/true"}, 2, "allowlist entry appears twice"},
		{"exec bad --memory", []string{"sandbox", "exec", "--memory", "lots", "--", "/bin/true"}, 2, "invalid size"},
		{"probe sealed", []string{"sandbox", "probe", "--sealed", ln.Addr().String()}, 0, ""},
		{"probe allowlist without control", []string{"sandbox", "probe", "--net", "allow:10.215.255.1:80", "--sealed", ln.Addr().String()}, 2, "needs a positive control"},
		{"probe without --sealed", []string{"sandbox", "probe"}, 2, `required flag(s) "sealed" not set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, errs := runCLI(t, tc.args...)
			if got != tc.code || !strings.Contains(errs, tc.rule) {
				t.Errorf("cleanroom %v: exit %d, want %d (stderr must name %q):\n%s", tc.args, got, tc.code, tc.rule, errs)
			}
		})
	}
}

func TestDemoSandboxStage(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the candidate sandbox needs root")
	}
	if _, err := sandbox.CheckKernel(); err != nil {
		t.Skipf("the candidate sandbox cannot run here: %v", err)
	}
	got, err := demoSandbox(t.Context(), &demoEnv{})
	if err != nil {
		t.Fatal(err)
	}
	want := "isolation full_isolation enforced=true; seal probe sealed ECONNREFUSED; inside: CapEff:0000000000000000 NoNewPrivs:1 lo"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// `sandbox gc` after a SIGKILLed `sandbox exec`: exit 0, the killed run
// named as removed (JSON), its directory gone, and with it an adapter
// staging directory a killed measurement left (revealed challenges in
// it); a second gc finds nothing.
func TestSandboxGCAfterKill(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the candidate sandbox needs root")
	}
	if _, err := sandbox.CheckKernel(); err != nil {
		t.Skipf("the candidate sandbox cannot run here: %v", err)
	}
	bin, _ := cliBinary(t)
	state := filepath.Join(searchableTempDir(t), "state")
	scratch := t.TempDir()
	orphan := filepath.Join(scratch, adapter.StagingPrefix+"candidate-123")
	if err := os.MkdirAll(filepath.Join(orphan, "cleanroom-io"), 0o700); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(bin, "sandbox", "exec", "--state-root", state, "--", "/bin/sh", "-c", "echo ready; exec sleep 1000")
	out, err := run.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("exec never said ready: %q %v", line, err)
	}
	ents, err := os.ReadDir(state)
	if err != nil || len(ents) != 1 {
		t.Fatalf("state root holds %v (%v)", ents, err)
	}
	id := ents[0].Name()
	if code, stdout, errs := runCLI(t, "sandbox", "gc", "--state-root", state, "--scratch", t.TempDir(), "--json"); code != 0 || !strings.Contains(stdout, `"live": [
    "`+id) {
		t.Fatalf("gc during the run: exit %d, want 0 and %s live:\n%s%s", code, id, stdout, errs)
	}
	_ = run.Process.Kill()
	_ = run.Wait()
	// The candidate dies of its parent-death signal; gc refuses (exit 1)
	// while its cgroup still has it, so wait for that to pass.
	var code int
	var stdout, errs string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if code, stdout, errs = runCLI(t, "sandbox", "gc", "--state-root", state, "--scratch", scratch, "--json"); code != 1 {
			break
		}
	}
	var rep sandbox.GCReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("gc: exit %d, %v:\n%s%s", code, err, stdout, errs)
	}
	// The first gc of the loop removed it (the staging directories do not
	// wait for the runs' cgroups).
	if _, err := os.Lstat(orphan); !os.IsNotExist(err) {
		t.Errorf("the orphaned staging directory is still there: %v", err)
	}
	if code != 0 || len(rep.Stale) != 1 || rep.Stale[0].ID != id || !rep.Stale[0].Removed || len(rep.Stale[0].Cgroups) == 0 {
		t.Fatalf("gc: exit %d, %+v\n%s", code, rep, errs)
	}
	if _, err := os.Lstat(filepath.Join(state, id)); !os.IsNotExist(err) {
		t.Errorf("the killed run's directory is still there: %v", err)
	}
	if code, stdout, _ := runCLI(t, "sandbox", "gc", "--state-root", state, "--scratch", scratch); code != 0 || !strings.Contains(stdout, "nothing stale") {
		t.Errorf("second gc: exit %d:\n%s", code, stdout)
	}
	orphan2 := filepath.Join(scratch, adapter.StagingPrefix+"reference-456")
	if err := os.Mkdir(orphan2, 0o700); err != nil {
		t.Fatal(err)
	}
	code, stdout, errs = runCLI(t, "sandbox", "gc", "--state-root", state, "--scratch", scratch, "--json")
	var staging struct {
		Staging adapter.StagingGC `json:"adapter_staging"`
	}
	if err := json.Unmarshal([]byte(stdout), &staging); err != nil || code != 0 || !slices.Equal(staging.Staging.Removed, []string{orphan2}) {
		t.Errorf("gc of a staging directory: exit %d, %v, removed %v, want %s\n%s%s", code, err, staging.Staging.Removed, orphan2, stdout, errs)
	}
}

// searchableTempDir is a temporary directory the candidate's init can pass
// through (t.TempDir's are 0700): a state root must lie beneath one.
func searchableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for p := dir; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// probeC runs inside `sandbox exec`: what a hostile candidate tries with
// its own system calls (a C program, not Go's runtime), printing NAME=RESULT.
const probeC = `#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
static void report(const char *name, long r) {
	printf("%s=%s\n", name, r < 0 ? strerrorname_np(errno) : "OK");
}
int main(void) {
	report("vsock", socket(40 /* AF_VSOCK */, SOCK_STREAM, 0));
	report("packet", socket(17 /* AF_PACKET */, SOCK_RAW, 0));
	char params[120] = {0};
	report("io_uring_setup", syscall(425 /* io_uring_setup */, 8, params));
	report("inet", socket(AF_INET, SOCK_STREAM, 0));
	/* stdin: the caller's "< /" must not be a way into the host's tree. */
	report("stdin_openat", openat(0, "etc/hostname", O_RDONLY));
	report("stdin_proc", open("/proc/self/fd/0/etc/hostname", O_RDONLY));
	printf("uid=%d\n", (int)getuid());
	return 0;
}
`

// A hostile candidate under `cleanroom sandbox exec`: AF_VSOCK, AF_PACKET
// and io_uring_setup are refused by the filter (EPERM; a kernel without
// them would say otherwise), the caller's stdin `< /` gives no way into
// the host's tree, and the set-uid copy of a shell it leaves in the
// workspace is neither root's nor set-uid on the host. The workspace is
// one a first run made its own (owned by the sandbox's uid), which is why
// the second run may find the probe in it.
func TestSandboxExecHostile(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the candidate sandbox needs root")
	}
	if _, err := sandbox.CheckKernel(); err != nil {
		t.Skipf("the candidate sandbox cannot run here: %v", err)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is not installed")
	}
	bin, _ := cliBinary(t)
	state := filepath.Join(searchableTempDir(t), "state")
	ws := t.TempDir()
	src := filepath.Join(t.TempDir(), "probe.c")
	if err := os.WriteFile(src, []byte(probeC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("/bin/sh", "-c", "cd /tmp && exec gcc -O -o \"$1\" \"$2\"", "sh", filepath.Join(filepath.Dir(src), "probe"), src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "sandbox", "exec", "--state-root", state, "--workspace", ws, "--", "/bin/true").CombinedOutput(); err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	probe, err := os.ReadFile(filepath.Join(filepath.Dir(src), "probe"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "probe"), probe, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	run := exec.Command(bin, "sandbox", "exec", "--state-root", state, "--workspace", ws, "--", "/bin/sh", "-c",
		"/workspace/probe && cp /bin/sh /workspace/rootshell && chmod 4755 /workspace/rootshell && stat -c inside_mode=%a /workspace/rootshell")
	run.Stdin = root
	var stderr strings.Builder
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		t.Fatalf("second run: %v\n%s%s", err, out, stderr.String())
	}
	got := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	for k, v := range map[string]string{
		"vsock": "EPERM", "packet": "EPERM", "io_uring_setup": "EPERM", "inet": "OK",
		"stdin_openat": "ENOTDIR", "stdin_proc": "ENOTDIR", "uid": "0", "inside_mode": "4755",
	} {
		if got[k] != v {
			t.Errorf("%s=%q, want %q (output:\n%s)", k, got[k], v, out)
		}
	}
	fi, err := os.Lstat(filepath.Join(ws, "rootshell"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid == 0 || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("on the host the candidate's set-uid shell is uid %d, mode %v: want uid %d, no set-id bit", st.Uid, fi.Mode(), sandbox.CandidateUID)
	}
	if !strings.Contains(stderr.String(), "workspace rootshell (mode 0104755): rule "+sandbox.RuleSetID) {
		t.Errorf("the stripped bit is not named on stderr:\n%s", stderr.String())
	}
}

// `sandbox scrub` (the bundle's post-run scrub, by hand): a set-uid file
// is stripped and named (exit 0); a FIFO refuses the workspace (exit 1,
// the rule named); a system tree is never scrubbed (exit 2, rule
// system_tree: its set-uid binaries are the host's).
func TestSandboxScrub(t *testing.T) {
	ws := t.TempDir()
	bin := filepath.Join(ws, "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "sandbox", "scrub", ws)
	if code != 0 || !strings.Contains(out, "workspace tool (mode 0104755): rule "+sandbox.RuleSetID) {
		t.Errorf("set-uid file: exit %d, want 0 naming it\n%s%s", code, out, errs)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&os.ModeSetuid != 0 {
		t.Errorf("still set-uid: %v %v", fi.Mode(), err)
	}
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runCLI(t, "sandbox", "scrub", ws); code != 1 || !strings.Contains(errs, sandbox.RuleSpecialFile) || !strings.Contains(out, "workspace fifo") {
		t.Errorf("FIFO: exit %d, want 1 naming %s\n%s%s", code, sandbox.RuleSpecialFile, out, errs)
	}
	if code, _, errs := runCLI(t, "sandbox", "scrub", "/etc"); code != 2 || !strings.Contains(errs, sandbox.RuleSystemTree) {
		t.Errorf("/etc: exit %d, want 2 naming %s\n%s", code, sandbox.RuleSystemTree, errs)
	}
}
