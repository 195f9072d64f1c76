package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cleanroom-dev/cleanroom/sandbox"
	"golang.org/x/sys/unix"
)

// nobodyID is the unprivileged uid and gid the rootless tests run the
// binary as.
const nobodyID = 65534

// asNobody runs bin with args as uid and gid nobodyID, no supplementary
// groups, and returns its exit code, stdout and stderr.
func asNobody(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command("setpriv", append([]string{"--reuid=" + strconv.Itoa(nobodyID), "--regid=" + strconv.Itoa(nobodyID), "--clear-groups", bin}, args...)...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + os.TempDir()}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// rootlessBinary is the CLI binary where nobodyID can run it, or a skip
// naming why the rootless mode cannot be tested here.
func rootlessBinary(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the rootless tests switch to an unprivileged uid: they run as root")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is not installed")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the candidate's probe is a Python script")
	}
	bin, dir := cliBinary(t)
	// nobody must reach the binary's directory.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := asNobody(t, bin, "sandbox", "check"); code == 3 && strings.Contains(out, "mode:            unavailable") {
		t.Skipf("unprivileged user namespaces are unavailable here: %s", out)
	}
	return bin
}

// The rootless probe the candidate runs: key=value lines.
const rootlessProbe = `
import errno, os, socket, sys
def name(e): return errno.errorcode.get(e.errno, str(e.errno))
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close(); print("connect=OK")
except OSError as e: print("connect=" + name(e))
print("package=" + open("/package/spec.txt").read().strip())
try:
    open("/package/new", "w"); print("package_write=OK")
except OSError as e: print("package_write=" + name(e))
try:
    open("/usr/cleanroom-new", "w"); print("usr_write=OK")
except OSError as e: print("usr_write=" + name(e))
open("/workspace/out", "w").write("written inside\n")
for line in open("/proc/self/limits"):
    for key, label in (("data", "Max data size"), ("nproc", "Max processes"), ("nofile", "Max open files"), ("core", "Max core file size")):
        if line.startswith(label): print(key + "=" + line[len(label):].split()[0])
print("uid_map=" + " ".join(open("/proc/self/uid_map").read().split()))
caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")]
print("capeff=" + caps[0])
`

// Rootless mode, run for real as uid 65534: `sandbox check` says rootless
// and how the limits are applied; `sandbox exec` runs a command that cannot
// reach a listener on the host's loopback (its own lo refuses), reads the
// package and cannot write it, writes the workspace (the file is uid 65534's
// on the host), has the rlimits that stand in for cgroups, no capability,
// and is the user's own uid on the host (the run's record says so).
func TestSandboxRootless(t *testing.T) {
	bin := rootlessBinary(t)
	code, out, errs := asNobody(t, bin, "sandbox", "check", "--json")
	var rep sandbox.KernelReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("check: exit %d, %v\n%s%s", code, err, out, errs)
	}
	if rep.Mode != sandbox.ModeRootless || rep.Root || rep.CandidateUID != nobodyID {
		t.Errorf("check: mode %q root %v candidate uid %d, want rootless, false, %d", rep.Mode, rep.Root, rep.CandidateUID, nobodyID)
	}
	if rep.Limits != sandbox.LimitsRlimits && rep.Limits != sandbox.LimitsDelegated {
		t.Errorf("check: limits %q", rep.Limits)
	}
	if _, text, _ := asNobody(t, bin, "sandbox", "check"); !strings.Contains(text, "mode:            rootless (cgroups: "+rep.Limits+")\n") {
		t.Errorf("check's text does not name the mode:\n%s", text)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	base := searchableTempDir(t)
	ws, pkg := filepath.Join(base, "ws"), filepath.Join(base, "pkg")
	for _, d := range []string{ws, pkg} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(ws, nobodyID, nobodyID); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "spec.txt"), []byte("the package\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = asNobody(t, bin, "sandbox", "exec", "--json", "--workspace", ws, "--package", pkg,
		"--memory", "512M", "--pids", "64", "--sealed", "127.0.0.1:"+port, "--", "python3", "-c", rootlessProbe, port)
	if code != 0 {
		t.Fatalf("exec: exit %d\n%s%s", code, out, errs)
	}
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	for k, v := range map[string]string{
		// Its own loopback answers, not the host's: nothing listens there.
		"connect": "ECONNREFUSED",
		"package": "the package", "package_write": "EROFS", "usr_write": "EROFS",
		"data": "536870912", "nproc": "64", "nofile": "1024", "core": "0",
		// Its root is uid 0 of the rootless child's namespace, which is
		// the user (one id, no range).
		"uid_map": "0 0 1", "capeff": "0000000000000000",
	} {
		if got[k] != v {
			t.Errorf("%s=%q, want %q\n%s", k, got[k], v, out)
		}
	}
	select {
	case <-accepted:
		t.Error("the host's loopback listener accepted a connection from the candidate")
	default:
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(ws, "out"), &st); err != nil || st.Uid != nobodyID {
		t.Errorf("the workspace file: %v, owner %d, want %d", err, st.Uid, nobodyID)
	}
	var rec sandbox.Result
	if i := strings.Index(errs, "{"); i < 0 || json.Unmarshal([]byte(errs[i:]), &rec) != nil {
		t.Fatalf("no run record on stderr:\n%s", errs)
	}
	if rec.HostUID != nobodyID || rec.Isolation == nil || !rec.Isolation.Enforced || rec.SealProbe == nil || rec.SealProbe.Outcome != sandbox.ProbeSealed {
		t.Errorf("record: host uid %d, isolation %+v, probe %+v", rec.HostUID, rec.Isolation, rec.SealProbe)
	}

	// The sealed package (--package-id): emitted into a tmpfs the rootless
	// child mounts and seals read-only at the superblock.
	code, id, errs := runCLI(t, "package", "id", pkg)
	if code != 0 {
		t.Fatalf("package id: %d %s", code, errs)
	}
	code, out, errs = asNobody(t, bin, "sandbox", "exec", "--package", pkg, "--package-id", strings.TrimSpace(id), "--", "/bin/sh", "-c",
		`cat /package/spec.txt; grep ' /package ' /proc/self/mountinfo | sed 's/.* - //'`)
	if code != 0 || !strings.HasPrefix(out, "the package\ntmpfs cleanroom-view ro,") {
		t.Errorf("sealed package: exit %d, want the file and a superblock-read-only tmpfs\n%s%s", code, out, errs)
	}
	// The rlimits bite: 1 GiB cannot be had under --memory 64M, and no
	// more than --pids 8 tasks run (the python process is one of them).
	// They bound the command from its exec only, not the container's own
	// Go init (TestSandboxRootlessSmallMemory).
	code, out, errs = asNobody(t, bin, "sandbox", "exec", "--memory", "64M", "--pids", "8", "--", "python3", "-c", `
import os, time
try:
    bytearray(1 << 30); print("memory=allocated")
except MemoryError: print("memory=MemoryError")
n = 0
for _ in range(20):
    try:
        if os.fork() == 0: time.sleep(5); os._exit(0)
        n += 1
    except OSError: break
print("forks=%d" % n)
`)
	if code != 0 || !strings.Contains(out, "memory=MemoryError\n") {
		t.Errorf("memory rlimit: exit %d\n%s%s", code, out, errs)
	}
	forks := -1
	if _, rest, ok := strings.Cut(out, "forks="); ok {
		_, _ = fmt.Sscanf(rest, "%d", &forks)
	}
	if forks >= 8 || forks < 1 {
		t.Errorf("tasks rlimit: %d forks under --pids 8\n%s%s", forks, out, errs)
	}

	// The mechanism check and the seal probe alone, from the same vantage.
	if code, out, errs := asNobody(t, bin, "sandbox", "probe", "--sealed", "127.0.0.1:"+port); code != 0 || !strings.Contains(out, "probe passed") {
		t.Errorf("probe: exit %d\n%s%s", code, out, errs)
	}
}

// Rootless mode keeps the post-run scrub: a set-uid file the candidate
// made is stripped, a FIFO it left refuses the run (exit 1, the rule
// named).
func TestSandboxRootlessScrub(t *testing.T) {
	bin := rootlessBinary(t)
	ws := filepath.Join(searchableTempDir(t), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(ws, nobodyID, nobodyID); err != nil {
		t.Fatal(err)
	}
	code, out, errs := asNobody(t, bin, "sandbox", "exec", "--workspace", ws, "--", "/bin/sh", "-c",
		"cp /bin/sh /workspace/sh && chmod 4755 /workspace/sh && mkfifo /workspace/fifo && stat -c inside=%a /workspace/sh")
	if code != 1 || !strings.Contains(errs, sandbox.RuleSpecialFile) || !strings.Contains(out, "inside=4755") {
		t.Fatalf("exec: exit %d, want 1 naming %s\n%s%s", code, sandbox.RuleSpecialFile, out, errs)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(ws, "sh"), &st); err != nil || st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 || st.Uid != nobodyID {
		t.Errorf("the candidate's copy of sh: %v, mode %#o, owner %d", err, st.Mode, st.Uid)
	}
}

// What rootless mode cannot establish is refused with exit 3 and named:
// an allowlisted egress (its veth and filter need host root; the probe's
// too in TestIsolationUnavailableExitsThree), and every run where
// unprivileged user namespaces are disabled — here by
// user.max_user_namespaces=0 in a user namespace the test makes, so the
// host's own setting is untouched.
func TestSandboxRootlessRefusals(t *testing.T) {
	bin := rootlessBinary(t)
	code, _, errs := asNobody(t, bin, "sandbox", "exec", "--net", "allow:10.9.8.7:80", "--", "/bin/true")
	if code != 3 || !strings.Contains(errs, "allowlisted egress needs host root") {
		t.Errorf("allowlisted exec: exit %d, want 3 naming the egress\n%s", code, errs)
	}
	for _, args := range [][]string{{"sandbox", "check"}, {"sandbox", "exec", "--", "/bin/true"}} {
		cmd := exec.Command("/bin/sh", append([]string{"-c",
			`echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --reuid=65534 --regid=65534 --clear-groups "$0" "$@"`, bin}, args...)...)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  unix.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}},
			// setpriv --clear-groups calls setgroups.
			GidMappingsEnableSetgroups: true,
		}
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 3 || !strings.Contains(string(out), "user.max_user_namespaces") {
			t.Errorf("%s with user.max_user_namespaces=0: %v, want exit 3 naming the sysctl\n%s", strings.Join(args, " "), err, out)
		}
		if args[1] == "check" && !strings.Contains(string(out), "mode:            unavailable: ") {
			t.Errorf("check does not say unavailable:\n%s", out)
		}
	}
}

// Rootless rlimits bound the candidate only, from its exec: a --memory far
// below what the container's own Go init maps (its heap and every thread
// stack count against RLIMIT_DATA) still runs the command, which has
// exactly the limits asked for; the init is never under them.
func TestSandboxRootlessSmallMemory(t *testing.T) {
	bin := rootlessBinary(t)
	if code, out, _ := asNobody(t, bin, "sandbox", "check", "--json"); code != 0 || !strings.Contains(out, `"limits": "`+sandbox.LimitsRlimits+`"`) {
		t.Skipf("the limits are not rlimits here (a delegated cgroup subtree): %s", out)
	}
	for _, memory := range []string{"16M", "24M"} {
		code, out, errs := asNobody(t, bin, "sandbox", "exec", "--memory", memory, "--pids", "8", "--", "/bin/sh", "-c",
			`echo data=$(ulimit -d) nproc=$(ulimit -p) nofile=$(ulimit -n)`)
		kib, _ := strconv.ParseInt(strings.TrimSuffix(memory, "M"), 10, 64)
		if want := fmt.Sprintf("data=%d nproc=8 nofile=1024\n", kib<<10); code != 0 || out != want {
			t.Errorf("--memory %s: exit %d, stdout %q, want 0 and %q\n%s", memory, code, out, want, errs)
		}
	}
}
