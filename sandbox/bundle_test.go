package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
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

// The bundle is the same configuration exec runs; the Debian package runc
// runs it here, the same in-container assertions hold, the hook's record
// is written, and a bundle whose hook fails does not start.
func TestBundleOnRunc(t *testing.T) {
	needSandbox(t)
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Skip("runc is not installed (Debian package runc)")
	}
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
[ -e /work ] && echo host=present || echo host=absent`
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
			id := "cleanroom-test-" + filepath.Base(filepath.Dir(dir))
			cmd := exec.Command(runc, "--root", filepath.Join(t.TempDir(), "runc"), "run", "--bundle", dir, id)
			out, err := cmd.Output()
			var rec IsolationCheck
			b, rerr := os.ReadFile(filepath.Join(dir, HookRecordName))
			if rerr != nil {
				t.Fatalf("hook record: %v (runc: %v)", rerr, err)
			}
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatal(err)
			}
			if tc.tamper {
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Errorf("runc started a container whose hook failed: %v", err)
				}
				if rec.Enforced || len(rec.Links) != 3 {
					t.Errorf("record %+v", rec)
				}
				if _, err := os.Stat(filepath.Join(ws, "out")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the command ran: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("runc run: %v\n%s", err, out)
			}
			if !rec.Enforced {
				t.Errorf("record %+v", rec)
			}
			got := keyValues(string(out))
			for _, kv := range []struct{ k, v string }{
				{"CapEff", "0000000000000000"}, {"NoNewPrivs", "1"}, {"Seccomp", "2"}, {"fds", "0 1 2"}, {"links", "lo"},
				{"routes", "0"}, {"usr", "ro"}, {"workspace", "writable"}, {"host", "absent"},
			} {
				if got[kv.k] != kv.v {
					t.Errorf("%s = %q, want %q", kv.k, got[kv.k], kv.v)
				}
			}
		})
	}
}

func TestBundleRefusals(t *testing.T) {
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
			if _, err := WriteBundle(tc.cfg, dir, "/bin/true"); !errors.Is(err, ErrConfig) {
				t.Errorf("got %v, want ErrConfig", err)
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
