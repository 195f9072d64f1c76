package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// tamperHook is a createRuntime hook that adds a veth pair to the
// container's network namespace (state on stdin).
func tamperHook() int {
	var st specs.State
	if err := json.NewDecoder(os.Stdin).Decode(&st); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ns, err := netns.GetFromPid(st.Pid)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer h.Close()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "extra0"}, PeerName: "extra1"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// ociRuntime is one OCI runtime the bundle must run under: how to start
// a bundle with it (state kept under root), and what its container shows
// that the others' do not.
type ociRuntime struct {
	name, pkg string
	cmd       func(t *testing.T, bin, root, bundle, id string) *exec.Cmd
	// absent are what the runtime's /proc does not show: gVisor's has no
	// NoNewPrivs line in status, and Debian's runsc 20221219 answers
	// EINVAL to a listing of /proc/self/fd.
	absent []string
}

var ociRuntimes = []ociRuntime{
	{name: "runc", pkg: "runc", cmd: func(_ *testing.T, bin, root, bundle, id string) *exec.Cmd {
		return exec.Command(bin, "--root", root, "run", "--bundle", bundle, id)
	}},
	{name: "crun", pkg: "crun", cmd: crunCommand},
	// The bundle names no network namespace path: runsc then needs
	// --network=none (its netstack with loopback only), the same
	// isolation the bundle asks of runc.
	{name: "runsc", pkg: "runsc", absent: []string{"NoNewPrivs", "fds"}, cmd: func(t *testing.T, bin, root, bundle, id string) *exec.Cmd {
		// The bundle runs the candidate in a user namespace (issue 19);
		// Debian's runsc 20221219 cannot start such a sandbox ("cannot
		// read client sync file: EOF"), while it ran this bundle without
		// one (ociVersion 1.0.2, no rro). Named, not hidden: a newer
		// gVisor runs it.
		if b, err := os.ReadFile(filepath.Join(bundle, "config.json")); err == nil && strings.Contains(strings.ReplaceAll(string(b), " ", ""), `"type":"user"`) {
			if out, _ := exec.Command(bin, "--version").Output(); strings.Contains(string(out), "0.0~20221219") {
				t.Skip("runsc 20221219 (Debian bookworm) cannot start a bundle with a user namespace: cannot read client sync file")
			}
		}
		return exec.Command(bin, "--root", root, "--network=none", "run", "--bundle", bundle, id)
	}},
}

// crunCommand runs crun; on a hybrid cgroup host whose cgroup v2 hierarchy
// holds a controller (crun 1.8 refuses to run there at all) it runs in a
// private mount namespace with cgroup v2 mounted alone and its cgroup
// manager disabled: the bundle, its hooks and its isolation are what is
// tested there, not its cgroup limits.
func crunCommand(t *testing.T, bin, root, bundle, id string) *exec.Cmd {
	b, err := os.ReadFile("/sys/fs/cgroup/unified/cgroup.controllers")
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return exec.Command(bin, "--root", root, "run", "--bundle", bundle, id)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("crun on a hybrid cgroup host needs unshare (Debian package util-linux)")
	}
	t.Logf("hybrid cgroups with v2 controllers %q: crun runs with --cgroup-manager=disabled (limits not tested)", strings.TrimSpace(string(b)))
	return exec.Command(unshare, "--mount", "--propagation", "private", "sh", "-ec",
		`umount -l /sys/fs/cgroup; mount -t cgroup2 none /sys/fs/cgroup; exec "$@"`, "sh",
		bin, "--cgroup-manager=disabled", "--root", root, "run", "--bundle", bundle, id)
}

// The bundle is the same configuration exec runs; the Debian packages
// runc, crun and runsc run it here, the same in-container assertions hold,
// the hook's record is written, and a bundle whose hook fails does not
// start. After the run, the poststop hook has scrubbed the workspace as
// Exec does: the set-uid copy of sh the candidate left is stripped, its
// FIFO named, the record refuses the workspace. A runtime that is not
// installed is skipped by name.
func TestBundleOnRuntimes(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := `grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status | tr -d '\t' | sed 's/:/=/'
` + inheritedFDs + `
echo links=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')
echo routes=$(tail -n +2 /proc/net/route | wc -l)
touch /usr/x 2>/dev/null && echo usr=writable || echo usr=ro
echo w > /workspace/out && echo workspace=writable
[ -e /work ] && echo host=present || echo host=absent
cp /bin/sh /workspace/sh && chmod 4755 /workspace/sh && mkfifo /workspace/fifo && echo setid=$(stat -c %a /workspace/sh)`
	for _, rt := range ociRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			bin, err := exec.LookPath(rt.name)
			if err != nil {
				t.Skipf("%s is not installed (Debian package %s)", rt.name, rt.pkg)
			}
			for _, tc := range []struct {
				name   string
				tamper bool
			}{{"honest", false}, {"hook fails", true}} {
				t.Run(tc.name, func(t *testing.T) {
					ws := t.TempDir()
					dir := filepath.Join(t.TempDir(), "bundle")
					searchable(t, filepath.Dir(dir))
					spec, err := WriteBundle(Config{Args: []string{"/bin/sh", "-c", script}, Workspace: ws}, dir, exe)
					if err != nil {
						t.Fatal(err)
					}
					if tc.tamper {
						// The tampering hook runs first; the check must see it.
						spec.Hooks.CreateRuntime = append([]specs.Hook{{Path: exe, Args: []string{exe, "tamper-hook"}}}, spec.Hooks.CreateRuntime...)
						b, _ := json.Marshal(spec)
						if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
							t.Fatal(err)
						}
					}
					id := "cleanroom-test-" + rt.name + "-" + filepath.Base(filepath.Dir(dir))
					root := filepath.Join(t.TempDir(), rt.name)
					cmd := rt.cmd(t, bin, root, dir, id)
					var stderr strings.Builder
					cmd.Stderr = &stderr
					out, err := cmd.Output()
					var rec IsolationCheck
					b, rerr := os.ReadFile(filepath.Join(dir, HookRecordName))
					if rerr != nil {
						t.Fatalf("hook record: %v (%s: %v\n%s)", rerr, rt.name, err, stderr.String())
					}
					if err := json.Unmarshal(b, &rec); err != nil {
						t.Fatal(err)
					}
					if tc.tamper {
						var ee *exec.ExitError
						if !errors.As(err, &ee) {
							t.Errorf("%s started a container whose hook failed: %v", rt.name, err)
						}
						if rec.Enforced || len(rec.Links) != 3 {
							t.Errorf("record %+v", rec)
						}
						if _, err := os.Stat(filepath.Join(ws, "out")); !errors.Is(err, os.ErrNotExist) {
							t.Errorf("the command ran: %v", err)
						}
						// A refused start may leave the runtime's state for id.
						_ = exec.Command(bin, "--root", root, "delete", "--force", id).Run()
						return
					}
					if err != nil {
						t.Fatalf("%s run: %v\n%s%s", rt.name, err, out, stderr.String())
					}
					if !rec.Enforced {
						t.Errorf("record %+v", rec)
					}
					got := keyValues(string(out))
					for _, kv := range []struct{ k, v string }{
						{"CapEff", "0000000000000000"}, {"NoNewPrivs", "1"}, {"Seccomp", "2"}, {"fds", "0 1 2"}, {"links", "lo"},
						{"routes", "0"}, {"usr", "ro"}, {"workspace", "writable"}, {"host", "absent"}, {"setid", "4755"},
					} {
						if slices.Contains(rt.absent, kv.k) {
							continue
						}
						if got[kv.k] != kv.v {
							t.Errorf("%s = %q, want %q", kv.k, got[kv.k], kv.v)
						}
					}
					var scrub ScrubReport
					if b, err := os.ReadFile(filepath.Join(dir, ScrubRecordName)); err != nil || json.Unmarshal(b, &scrub) != nil {
						t.Fatalf("no scrub record after %s's run: %v", rt.name, err)
					}
					rules := map[string]string{}
					for _, f := range scrub.Findings {
						rules[f.Path] = f.Rule
					}
					if !scrub.Refused || rules["sh"] != RuleSetID || rules["fifo"] != RuleSpecialFile || len(rules) != 2 {
						t.Errorf("scrub record %+v", scrub)
					}
					var st unix.Stat_t
					if err := unix.Lstat(filepath.Join(ws, "sh"), &st); err != nil || st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
						t.Errorf("after %s's run the candidate's sh is still set-id: %v %#o", rt.name, err, st.Mode)
					}
				})
			}
		})
	}
}

// The bundle declares a version and mount options every runtime accepts:
// no "rro" (runsc refuses it), and each mount below a read-only rbind
// source gets its own read-only bind.
func TestBundlePortableMounts(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "b")
	searchable(t, filepath.Dir(dir))
	spec, err := WriteBundle(Config{Args: []string{"/bin/true"}}, dir, "/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Version != "1.0.2" {
		t.Errorf("ociVersion %q, want 1.0.2", spec.Version)
	}
	var usr bool
	for _, m := range spec.Mounts {
		if slices.Contains(m.Options, "rro") {
			t.Errorf("mount %s keeps rro: %v", m.Destination, m.Options)
		}
		usr = usr || (m.Destination == "/usr" && slices.Contains(m.Options, "ro"))
	}
	if !usr {
		t.Error("no read-only /usr bind")
	}
	// A mount below a read-only source: a tmpfs on a directory of a
	// scratch tree bound like /usr.
	needSandbox(t)
	src := t.TempDir()
	sub := filepath.Join(src, "a", "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(sub, unix.MNT_DETACH) })
	// A submount whose name starts with ".." is inside the source too.
	dots := filepath.Join(src, "..x")
	if err := os.Mkdir(dots, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dots, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dots, unix.MNT_DETACH) })
	s := &specs.Spec{Mounts: []specs.Mount{
		{Destination: "/opt/x", Type: "bind", Source: src, Options: []string{"rbind", "ro", "rro", "nosuid", "nodev"}},
		{Destination: "/w", Type: "bind", Source: "/tmp", Options: []string{"bind", "rw"}},
	}}
	if err := portableMounts(s); err != nil {
		t.Fatal(err)
	}
	want := []specs.Mount{
		{Destination: "/opt/x", Type: "bind", Source: src, Options: []string{"rbind", "ro", "nosuid", "nodev"}},
		{Destination: "/opt/x/..x", Type: "bind", Source: dots, Options: []string{"bind", "ro", "nosuid", "nodev"}},
		{Destination: "/opt/x/a/sub", Type: "bind", Source: sub, Options: []string{"bind", "ro", "nosuid", "nodev"}},
		{Destination: "/w", Type: "bind", Source: "/tmp", Options: []string{"bind", "rw"}},
	}
	if len(s.Mounts) != len(want) {
		t.Fatalf("mounts %+v, want %+v", s.Mounts, want)
	}
	for i := range want {
		if s.Mounts[i].Destination != want[i].Destination || s.Mounts[i].Source != want[i].Source || !slices.Equal(s.Mounts[i].Options, want[i].Options) {
			t.Errorf("mount %d: %+v, want %+v", i, s.Mounts[i], want[i])
		}
	}
}

func TestBundleRefusals(t *testing.T) {
	t.Parallel()
	sealed := ptr(netipMust("127.0.0.1:9"))
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"allowlist", Config{Args: []string{"/bin/true"}, Allow: []Endpoint{{Addr: sealed.Addr(), Port: 80}}}},
		{"sealed package", Config{Args: []string{"/bin/true"}, PackageEmit: func(string) error { return nil }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			if _, err := WriteBundle(tc.cfg, dir, "/bin/true"); !errors.Is(err, errConfig) {
				t.Errorf("got %v, want errConfig", err)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused bundle left %s behind", dir)
			}
		})
	}
	// An existing directory is never written into.
	dir := t.TempDir()
	if _, err := WriteBundle(Config{Args: []string{"/bin/true"}}, dir, "/bin/true"); !errors.Is(err, os.ErrExist) {
		t.Errorf("existing dir: %v, want ErrExist", err)
	}
}

func netipMust(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
