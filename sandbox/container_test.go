package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cleanroom-dev/cleanroom/sandbox/sandboxinit"
	"github.com/opencontainers/runc/libcontainer"
)

// The test binary is libcontainer's init when it is re-executed as
// `init`, and a bundle's shim: sandboxinit (which this package imports)
// routes both from its init function.
func init() {
	// As cmd/cleanroom/init.go: the main thread never runs a goroutine
	// that enters another namespace, so /proc/self stays ours.
	sandboxinit.Run()
}

func TestMain(m *testing.M) {
	// `attack NAME…` runs the hostile candidate's attempts inside the
	// container (attack_test.go).
	if len(os.Args) > 2 && os.Args[1] == "attack" {
		os.Exit(attackMain(os.Args[2:]))
	}
	// `dial TARGET…` is the network client the tests run inside the
	// container (a copy of this binary in the workspace).
	if len(os.Args) > 1 && os.Args[1] == "dial" {
		os.Exit(dialMain(os.Args[2:]))
	}
	// `sandbox hook --record FILE` is the bundle's createRuntime hook
	// (the cleanroom binary's command, here served by the test binary).
	if len(os.Args) == 5 && os.Args[1] == "sandbox" && os.Args[2] == "hook" && os.Args[3] == "--record" {
		if _, err := RunHook(os.Stdin, os.Args[4]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// `netcheck-own` is `sandbox hook --own-netns` (the check of the
	// namespace it runs in), its verdict one JSON line on stdout.
	if len(os.Args) == 2 && os.Args[1] == "netcheck-own" {
		os.Exit(netcheckOwnMain())
	}
	// `sandbox seal-hook …` is the bundle's seal probe hook.
	if len(os.Args) > 2 && os.Args[1] == "sandbox" && os.Args[2] == "seal-hook" {
		os.Exit(sealHookMain(os.Args[3:]))
	}
	// `sandbox scrub --state-root S --record FILE WORKSPACE` is the
	// bundle's poststop hook.
	if len(os.Args) == 8 && os.Args[1] == "sandbox" && os.Args[2] == "scrub" && os.Args[3] == "--state-root" && os.Args[5] == "--record" {
		rep, err := ScrubWorkspace(os.Args[7], os.Args[4])
		if rep != nil {
			if werr := WriteScrubRecord(os.Args[6], rep); werr != nil {
				err = werr
			}
		}
		if err != nil || rep.Refused {
			fmt.Fprintln(os.Stderr, "scrub:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// `tamper-hook` adds a second link to the container's namespace.
	if len(os.Args) == 2 && os.Args[1] == "tamper-hook" {
		os.Exit(tamperHook())
	}
	// `exec-helper STATEDIR ARG…` runs one container and is killed by
	// TestHarnessDeathKillsContainer.
	if len(os.Args) > 3 && os.Args[1] == "exec-helper" {
		_, err := Exec(context.Background(), Config{StateDir: os.Args[2], Args: os.Args[3:]}, Stdio{})
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	// `exec-stdout STATEDIR ARG…` runs one container with its stdout on
	// this process's, and is killed by TestGC.
	if len(os.Args) > 3 && os.Args[1] == "exec-stdout" {
		_, err := Exec(context.Background(), Config{StateDir: os.Args[2], Args: os.Args[3:]}, Stdio{Stdout: os.Stdout})
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

// needSandbox skips unless this machine can run the candidate container
// (root, the namespaces, the cgroup controllers).
func needSandbox(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the candidate sandbox needs root")
	}
	if _, err := CheckKernel(); err != nil {
		t.Skipf("the candidate sandbox cannot run here: %v", err)
	}
}

// runIn runs a shell script in a container and returns the result and
// the captured output.
func runIn(t *testing.T, cfg Config, script string) (*Result, string, string) {
	t.Helper()
	cfg.Args = []string{"/bin/sh", "-c", script}
	if cfg.StateDir == "" {
		cfg.StateDir = testStateDir(t)
	}
	var stdout, stderr bytes.Buffer
	res, err := Exec(context.Background(), cfg, Stdio{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatalf("Exec: %v\nstderr: %s", err, stderr.String())
	}
	return res, stdout.String(), stderr.String()
}

// keyValues parses "key=value" lines.
func keyValues(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// inheritedFDs prints fds=, the descriptors a child of the shell
// inherited, read by that child itself once it runs (ls, less the
// descriptor of the directory it lists), and fdtargets=, what each is.
// The shell holds extra descriptors while it redirects, and a process
// seen from outside may still be in its dynamic loader or setlocale, each
// holding a file open for a moment: CI once saw "0 1 2 3" when a
// background sleep was listed from outside.
const inheritedFDs = `ls -ln /proc/self/fd | sed -n 's/.* \([0-9][0-9]*\) -> \(.*\)$/\1 \2/p' | grep -v ' /proc/[0-9]*/fd$' > /tmp/fds
echo fds=$(cut -d' ' -f1 /tmp/fds | sort -n | tr '\n' ' ')
echo fdtargets=$(tr '\n' ';' < /tmp/fds)`

func TestContainerInside(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	ws := t.TempDir()
	pkg := t.TempDir()
	content := []byte("frozen specification\n")
	if err := os.WriteFile(filepath.Join(pkg, "SPEC.md"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)

	// An fd the harness holds without O_CLOEXEC (the CVE-2024-21626
	// shape: a directory of the host, and a file) must not reach the
	// candidate.
	leakDir, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(leakDir)
	leakFile, err := unix.Open(filepath.Join(pkg, "SPEC.md"), unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(leakFile)

	script := fmt.Sprintf(`
grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status | tr -d '\t' | sed 's/:/=/'
`+inheritedFDs+`
[ -e /proc/$$/fd/%d ] && echo leakdir=visible || echo leakdir=absent
[ -e /proc/$$/fd/%d ] && echo leakfile=visible || echo leakfile=absent
touch /usr/x 2>/dev/null && echo usr=writable || echo usr=ro
touch /x 2>/dev/null && echo root=writable || echo root=ro
touch /etc/x 2>/dev/null && echo etc=writable || echo etc=ro
echo written > /workspace/out.txt && echo workspace=writable || echo workspace=ro
touch /package/x 2>/dev/null && echo package=writable || echo package=ro
echo package_sha256=$(sha256sum /package/SPEC.md | cut -d' ' -f1)
touch /tmp/x && echo tmp=writable || echo tmp=ro
for p in /root /home /work /var /opt /etc/shadow /etc/ssl/private /sys /run /proc/kcore; do
  if [ -e $p ] && [ "$p" != /proc/kcore ]; then echo "host:$p=present"; else echo "host:$p=absent"; fi
done
[ -s /proc/kcore ] && echo kcore=readable || echo kcore=masked
echo hostname=$(cat /proc/sys/kernel/hostname)
echo links=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')
echo pid=$$
`, leakDir, leakFile)
	res, out, stderr := runIn(t, Config{Workspace: ws, Package: pkg}, script)
	if res.Status != StatusExited || res.ExitCode != 0 {
		t.Fatalf("status %s exit %d, stderr %s", res.Status, res.ExitCode, stderr)
	}
	got := keyValues(out)
	for _, tc := range []struct{ key, want string }{
		{"CapEff", "0000000000000000"},
		{"CapPrm", "0000000000000000"},
		{"CapBnd", "0000000000000000"},
		{"NoNewPrivs", "1"},
		// The keyring filter (sandboxinit).
		{"Seccomp", "2"},
		{"fds", "0 1 2"},
		{"leakdir", "absent"},
		{"leakfile", "absent"},
		{"usr", "ro"},
		{"root", "ro"},
		{"etc", "ro"},
		{"workspace", "writable"},
		{"package", "ro"},
		{"package_sha256", hex.EncodeToString(sum[:])},
		{"tmp", "writable"},
		{"host:/root", "absent"},
		{"host:/home", "absent"},
		{"host:/work", "absent"},
		{"host:/var", "absent"},
		{"host:/opt", "absent"},
		{"host:/etc/shadow", "absent"},
		{"host:/etc/ssl/private", "absent"},
		{"host:/sys", "absent"},
		{"host:/run", "absent"},
		{"kcore", "masked"},
		{"hostname", "candidate"},
		{"links", "lo"},
		{"pid", "1"},
	} {
		if got[tc.key] != tc.want {
			t.Errorf("%s = %q, want %q", tc.key, got[tc.key], tc.want)
		}
	}
	if t.Failed() {
		t.Logf("descriptors inside: %s", got["fdtargets"])
	}
	// The write inside landed in the host's workspace directory.
	if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(b) != "written\n" {
		t.Errorf("workspace file on the host: %q, %v", b, err)
	}
	if res.Isolation == nil || !res.Isolation.Enforced || res.Isolation.IsolationClass != ClassFull {
		t.Errorf("isolation record %+v", res.Isolation)
	}
}

func TestContainerExitStatus(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	for _, tc := range []struct {
		name, script string
		status       string
		code         int
	}{
		{"zero", "exit 0", StatusExited, 0},
		{"seven", "exit 7", StatusExited, 7},
		{"child killed", "sh -c 'kill -TERM $$'", StatusExited, 128 + 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _, stderr := runIn(t, Config{}, tc.script)
			if res.Status != tc.status || res.ExitCode != tc.code {
				t.Errorf("got %s/%d, want %s/%d (stderr %s)", res.Status, res.ExitCode, tc.status, tc.code, stderr)
			}
		})
	}
}

func TestContainerLimitsBite(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	t.Run("pids", func(t *testing.T) {
		// 40 background sleeps cannot fit in 16 tasks: some forks fail.
		res, out, stderr := runIn(t, Config{Pids: 16}, `i=0; ok=0
while [ $i -lt 40 ]; do if sleep 5 & then ok=$((ok+1)); fi; i=$((i+1)); done
echo started=$ok; kill $(jobs -p) 2>/dev/null; exit 0`)
		if res.Status != StatusExited {
			t.Fatalf("status %s", res.Status)
		}
		if !strings.Contains(stderr, "fork") {
			t.Errorf("no fork failure with pids=16: stdout %q stderr %q", out, stderr)
		}
	})
	t.Run("memory", func(t *testing.T) {
		// tail keeps the last 96 MiB of its input in memory: over a
		// 32 MiB limit the OOM killer ends it.
		res, _, stderr := runIn(t, Config{Memory: 32 << 20}, `head -c 200000000 /dev/zero | tail -c 100000000 >/dev/null; echo survived`)
		if res.Status != StatusOOM || res.ExitCode != ExitOOM {
			t.Errorf("got %s/%d, want %s/%d (stderr %s)", res.Status, res.ExitCode, StatusOOM, ExitOOM, stderr)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		ws := t.TempDir()
		// A background task that would write after 3 s: the timeout
		// must kill it together with the shell.
		res, _, _ := runIn(t, Config{Workspace: ws, Timeout: time.Second}, `(sleep 3; echo late > /workspace/late) & sleep 60`)
		if res.Status != StatusTimeout || res.ExitCode != ExitTimeout {
			t.Fatalf("got %s/%d, want %s/%d", res.Status, res.ExitCode, StatusTimeout, ExitTimeout)
		}
		time.Sleep(4 * time.Second)
		if _, err := os.Stat(filepath.Join(ws, "late")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a task outlived the timeout: %v", err)
		}
	})
}

func TestConfigRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  Config
		// says is what the refusal must name (the field or rule), so a
		// case cannot pass on another field's refusal.
		says string
	}{
		{"no command", Config{}, "no command"},
		{"libcontainer env", Config{Args: []string{"/bin/true"}, Env: []string{"_LIBCONTAINER_INITPIPE=3"}}, `"_LIBCONTAINER_INITPIPE=3"`},
		{"env without =", Config{Args: []string{"/bin/true"}, Env: []string{"PATH"}}, `environment entry "PATH"`},
		{"relative workspace", Config{Args: []string{"/bin/true"}, Workspace: "ws"}, `workspace "ws"`},
		{"missing package", Config{Args: []string{"/bin/true"}, Package: "/nonexistent/pkg"}, `package "/nonexistent/pkg" refused (rule not_directory)`},
		{"tiny memory", Config{Args: []string{"/bin/true"}, Memory: 1 << 20}, "memory 1048576 bytes"},
		{"probe without control", Config{Args: []string{"/bin/true"}, Allow: []Endpoint{{Addr: netip.MustParseAddr("10.0.0.1"), Port: 80}}, Seal: ptr(netip.MustParseAddrPort("10.0.0.2:80"))}, "positive control"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Exec(context.Background(), tc.cfg, Stdio{})
			if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("got %v, want errConfig naming %s", err, tc.says)
			}
		})
	}
	// The stat error is wrapped, not flattened: its cause stays visible.
	_, err := Exec(context.Background(), Config{Args: []string{"/bin/true"}, Package: "/nonexistent/pkg"}, Stdio{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing package: %v does not wrap ErrNotExist", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestParseEndpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		ok       bool
		rule     error // the allowlist rule a refusal must name, if one applies
	}{
		{"10.1.2.3:443", "10.1.2.3:443", true, nil},
		{"[2001:db8::1]:80", "[2001:db8::1]:80", true, nil},
		{"[::ffff:10.0.0.1]:80", "10.0.0.1:80", true, nil},
		{"example.com:443", "", false, nil},
		{"10.1.2.3", "", false, nil},
		{"10.1.2.3:0", "", false, nil},
		{"0.0.0.0:80", "", false, errAllowUnspecified},
		{"224.0.0.1:80", "", false, errAllowMulticast},
	} {
		e, err := ParseEndpoint(tc.in)
		if tc.ok != (err == nil) || tc.ok && e.String() != tc.want {
			t.Errorf("ParseEndpoint(%q) = %v, %v", tc.in, e, err)
		}
		if !tc.ok && !errors.Is(err, errConfig) {
			t.Errorf("ParseEndpoint(%q) error %v is not errConfig", tc.in, err)
		}
		if tc.rule != nil && !errors.Is(err, tc.rule) {
			t.Errorf("ParseEndpoint(%q) error %v does not name %v", tc.in, err, tc.rule)
		}
	}
}

// PackageEmit: the package is emitted into a tmpfs sealed at the
// superblock (Seal) and mounted at /package; inside, the super options of
// /package read ro and a write fails.
func TestSealedPackage(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	content := []byte("sealed specification\n")
	sum := sha256.Sum256(content)
	emit := func(dir string) error {
		return os.WriteFile(filepath.Join(dir, "SPEC.md"), content, 0o644)
	}
	res, out, stderr := runIn(t, Config{PackageEmit: emit, PackageBytes: 1 << 20}, `
echo sha=$(sha256sum /package/SPEC.md | cut -d' ' -f1)
touch /package/x 2>/dev/null && echo write=ok || echo write=refused
# mountinfo: field 5 is the mount point, field 6 the per-mount options;
# after " - " come the fs type, the source and the superblock options.
while read -r id parent dev root mp opts rest; do
  if [ "$mp" = /package ]; then
    echo permount=$opts; set -- ${rest#*- }; echo fstype=$1; echo super=$3
  fi
done < /proc/self/mountinfo
`)
	if res.Status != StatusExited || res.ExitCode != 0 {
		t.Fatalf("status %s/%d, stderr %s", res.Status, res.ExitCode, stderr)
	}
	got := keyValues(out)
	if got["sha"] != hex.EncodeToString(sum[:]) || got["write"] != "refused" || got["fstype"] != "tmpfs" ||
		!strings.HasPrefix(got["permount"], "ro,") || !strings.HasPrefix(got["super"], "ro,") {
		t.Errorf("inside: %q", got)
	}
	if res.PackageSeal == nil || res.PackageSeal.ProbeErrno != "EROFS" {
		t.Errorf("package seal record %+v", res.PackageSeal)
	}
	// Nothing of the view is left mounted on the host.
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), res.ID) {
		t.Errorf("a mount of %s is left on the host", res.ID)
	}
}

// If the harness dies (SIGKILL, no chance to clean up), the container
// dies with it: the container's init set PR_SET_PDEATHSIG (sandboxinit).
func TestHarnessDeathKillsContainer(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	marker := fmt.Sprintf("%d", 100000+time.Now().UnixNano()%800000)
	state := testStateDir(t)
	helper := exec.Command("/proc/self/exe", "exec-helper", state, "/bin/sleep", marker)
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = helper.Process.Kill()
	}()
	// Also when the test fails: a candidate that outlived the harness is
	// killed, and its cgroups and bundle mount are not left on the host.
	t.Cleanup(func() { destroyStale(t, state) })
	candidate := func() bool {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err == nil && string(b) == "/bin/sleep\x00"+marker+"\x00" {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(10 * time.Second)
	for !candidate() {
		if time.Now().After(deadline) {
			t.Fatal("the candidate never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for candidate() {
		if time.Now().After(deadline) {
			t.Fatal("the candidate outlived the harness")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// destroyStale destroys every container of the runs under the state root
// (cgroups and state of a harness that was killed; one still running is
// killed first) and unmounts their bundles' tmpfs.
func destroyStale(t *testing.T, stateDir string) {
	bundles, _ := os.ReadDir(stateDir)
	for _, b := range bundles {
		bundle := filepath.Join(stateDir, b.Name())
		root := filepath.Join(bundle, "state")
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			c, err := libcontainer.Load(root, e.Name())
			if err != nil {
				t.Logf("load %s: %v", e.Name(), err)
				continue
			}
			// A candidate still running (the test failed) is killed first.
			if st, err := c.Status(); err == nil && st != libcontainer.Stopped {
				_ = c.Signal(unix.SIGKILL)
				for i := 0; i < 500; i++ {
					if st, err := c.Status(); err != nil || st == libcontainer.Stopped {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			if err := c.Destroy(); err != nil {
				t.Errorf("destroy %s: %v", e.Name(), err)
			}
		}
		if err := unix.Unmount(bundle, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount the stale bundle %s: %v", bundle, err)
		}
	}
}

// The cgroup limits are read back from the kernel's files while the
// container runs (cgroup v1 here, v2 where present).
func TestCgroupLimitsApplied(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	state := testStateDir(t)
	done := make(chan error, 1)
	go func() {
		_, err := Exec(context.Background(), Config{StateDir: state, CPUs: 0.5, Memory: 64 << 20, Pids: 33,
			Args: []string{"/bin/sh", "-c", "sleep 3"}}, Stdio{})
		done <- err
	}()
	var paths map[string]string
	deadline := time.Now().Add(10 * time.Second)
	for paths == nil {
		if time.Now().After(deadline) {
			t.Fatal("the container never showed up")
		}
		roots, _ := filepath.Glob(filepath.Join(state, "*", "state"))
		for _, root := range roots {
			ents, _ := os.ReadDir(root)
			for _, e := range ents {
				if c, err := libcontainer.Load(root, e.Name()); err == nil {
					if st, err := c.State(); err == nil && st.InitProcessPid != 0 {
						paths = st.CgroupPaths
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("%v", err)
		}
		return strings.TrimSpace(string(b))
	}
	want := map[string]string{}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil { // unified (v2)
		p := paths[""]
		want[filepath.Join(p, "cpu.max")] = "50000 100000"
		want[filepath.Join(p, "memory.max")] = "67108864"
		want[filepath.Join(p, "pids.max")] = "33"
	} else {
		want[filepath.Join(paths["cpu"], "cpu.cfs_quota_us")] = "50000"
		want[filepath.Join(paths["cpu"], "cpu.cfs_period_us")] = "100000"
		want[filepath.Join(paths["memory"], "memory.limit_in_bytes")] = "67108864"
		want[filepath.Join(paths["pids"], "pids.max")] = "33"
	}
	for f, v := range want {
		if got := read(f); got != v {
			t.Errorf("%s = %q, want %q", f, got, v)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// testStateDir is a state root for one test. Where the temporary directory
// lies on a shared mount (systemd makes / shared), a run binds the state
// root onto itself to make it private (privateStateRoot) and the last run
// to end releases it; a test that fails or kills a run's owner can leave
// it, and it is detached here before the temporary directory is removed,
// which would otherwise fail with EBUSY.
func testStateDir(tb testing.TB) string {
	tb.Helper()
	state := filepath.Join(tb.TempDir(), "state")
	searchable(tb, filepath.Dir(state))
	tb.Cleanup(func() {
		// EINVAL: nothing is mounted there (the host's / is private).
		for unix.Unmount(state, unix.MNT_DETACH) == nil {
		}
	})
	return state
}

// searchable makes dir and its parents up to the system's temporary
// directory searchable by others (o+x; t.TempDir makes them 0700): the
// candidate's init passes through the state root's parents, and the
// candidate reads a plain --package bind as an unprivileged uid.
func searchable(tb testing.TB, dir string) {
	tb.Helper()
	for p := dir; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.Chmod(p, fi.Mode().Perm()|0o011); err != nil {
			tb.Fatal(err)
		}
	}
}

// Config.Inspect sees every entry of the workspace in the post-run scrub's
// walk, once each, with the set-id bits the scrub stripped already gone,
// and a link as a link (never followed); Result.Walked says the walk
// reached the end.
func TestExecInspect(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	ws := t.TempDir()
	seen := map[string]uint32{}
	calls := 0
	cfg := Config{Workspace: ws, Inspect: func(dirfd int, name, rel string, st *unix.Stat_t) {
		calls++
		var again unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &again, unix.AT_SYMLINK_NOFOLLOW); err != nil || again.Ino != st.Ino {
			t.Errorf("%s: the descriptor and name are not the entry (%v)", rel, err)
		}
		seen[rel] = st.Mode
	}}
	res, _, stderr := runIn(t, cfg, `cd /workspace && mkdir -p d/e && echo x > d/e/f && echo y > s && chmod 4755 s && ln -s / d/root`)
	if res.ExitCode != 0 || !res.Walked {
		t.Fatalf("exit %d, walked %v: %s", res.ExitCode, res.Walked, stderr)
	}
	want := map[string]uint32{"d": unix.S_IFDIR, "d/e": unix.S_IFDIR, "d/e/f": unix.S_IFREG, "s": unix.S_IFREG, "d/root": unix.S_IFLNK}
	if calls != len(want) || len(seen) != len(want) {
		t.Errorf("%d calls for %v, want one for each of %v", calls, seen, want)
	}
	for rel, typ := range want {
		if m, ok := seen[rel]; !ok || m&unix.S_IFMT != typ {
			t.Errorf("%s: mode %#o, want type %#o", rel, m, typ)
		}
	}
	if seen["s"]&(unix.S_ISUID|unix.S_ISGID) != 0 {
		t.Errorf("s is seen with its set-uid bit (%#o): Inspect must see the workspace as scrubbed", seen["s"])
	}
}
