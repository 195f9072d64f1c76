package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// sealHookMain serves `sandbox seal-hook --sealed A [--control B] --record F`
// for the test binary (the cleanroom binary's command in production).
func sealHookMain(args []string) int {
	fs := flag.NewFlagSet("seal-hook", flag.ContinueOnError)
	sealed := fs.String("sealed", "", "")
	control := fs.String("control", "", "")
	record := fs.String("record", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg := ProbeConfig{Sealed: netip.MustParseAddrPort(*sealed)}
	if *control != "" {
		c := netip.MustParseAddrPort(*control)
		cfg.Control = &c
	}
	if _, err := RunSealHook(context.Background(), os.Stdin, cfg, *record); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// A bundle with a seal renders the probe as a second createRuntime hook,
// after the mechanism check, naming the sealed target and the control.
func TestSealedBundleHooks(t *testing.T) {
	t.Parallel()
	sealed := netip.MustParseAddrPort("192.0.2.1:443")
	control := netip.MustParseAddrPort("192.0.2.2:80")
	dir := filepath.Join(t.TempDir(), "b")
	searchable(t, filepath.Dir(dir))
	spec, err := WriteBundle(Config{Args: []string{"/bin/true"}, Seal: &sealed, Control: &control}, dir, "/usr/bin/cleanroom")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk struct {
		Hooks struct {
			CreateRuntime []struct {
				Path string   `json:"path"`
				Args []string `json:"args"`
			} `json:"createRuntime"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(b, &onDisk); err != nil {
		t.Fatal(err)
	}
	hooks := onDisk.Hooks.CreateRuntime
	if len(hooks) != 2 || len(spec.Hooks.CreateRuntime) != 2 {
		t.Fatalf("createRuntime hooks %+v", hooks)
	}
	want := []string{"/usr/bin/cleanroom", "sandbox", "seal-hook", "--sealed", "192.0.2.1:443",
		"--record", filepath.Join(dir, SealRecordName), "--control", "192.0.2.2:80"}
	if hooks[1].Path != "/usr/bin/cleanroom" || !slices.Equal(hooks[1].Args, want) {
		t.Errorf("seal hook %+v, want args %v", hooks[1], want)
	}
	if !slices.Equal(hooks[0].Args[1:3], []string{"sandbox", "hook"}) {
		t.Errorf("the mechanism check is not the first hook: %+v", hooks[0])
	}
}

// On Debian runc, crun and runsc: a bundle whose seal holds starts and
// both hooks write their records; a bundle whose positive control is
// unreachable (the probe does not pass) does not start.
func TestSealedBundleOnRuntimes(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	for _, rt := range ociRuntimes {
		t.Run(rt.name, func(t *testing.T) {
			bin, err := exec.LookPath(rt.name)
			if err != nil {
				t.Skipf("%s is not installed (Debian package %s)", rt.name, rt.pkg)
			}
			sealedBundleOn(t, rt, bin)
		})
	}
}

func sealedBundleOn(t *testing.T, rt ociRuntime, bin string) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never routed, and the
	// container has no route at all.
	sealed := netip.MustParseAddrPort("192.0.2.1:443")
	control := netip.MustParseAddrPort("192.0.2.2:80")
	for _, tc := range []struct {
		name    string
		control *netip.AddrPort
		starts  bool
	}{{"sealed", nil, true}, {"control unreachable", &control, false}} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			dir := filepath.Join(t.TempDir(), "bundle")
			searchable(t, filepath.Dir(dir))
			cfg := Config{Args: []string{"/bin/sh", "-c", "echo ran > /workspace/out"}, Workspace: ws, Seal: &sealed, Control: tc.control}
			if _, err := WriteBundle(cfg, dir, exe); err != nil {
				t.Fatal(err)
			}
			id := "cleanroom-seal-" + rt.name + "-" + filepath.Base(filepath.Dir(dir))
			root := filepath.Join(t.TempDir(), rt.name)
			out, err := rt.cmd(t, bin, root, dir, id).CombinedOutput()
			if !tc.starts {
				// A refused start may leave the runtime's state for id.
				// Best effort: nothing of id may exist to delete.
				defer func() { _ = exec.Command(bin, "--root", root, "delete", "--force", id).Run() }()
			}
			var probe ProbeResult
			b, rerr := os.ReadFile(filepath.Join(dir, SealRecordName))
			if rerr != nil {
				t.Fatalf("seal record: %v (%s: %v %s)", rerr, rt.name, err, out)
			}
			if err := json.Unmarshal(b, &probe); err != nil {
				t.Fatal(err)
			}
			if probe.Outcome != ProbeSealed || probe.SealedTarget != "192.0.2.1:443" {
				t.Errorf("probe %+v", probe)
			}
			if _, err := os.Stat(filepath.Join(dir, HookRecordName)); err != nil {
				t.Errorf("mechanism check record: %v", err)
			}
			_, ranErr := os.Stat(filepath.Join(ws, "out"))
			if tc.starts {
				if err != nil || ranErr != nil {
					t.Errorf("%s run: %v %s; command output: %v", rt.name, err, out, ranErr)
				}
				return
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Errorf("%s started a container whose seal probe failed: %v", rt.name, err)
			}
			if probe.PositiveControl == nil || probe.PositiveControl.Outcome != ControlUnreachable {
				t.Errorf("control %+v", probe.PositiveControl)
			}
			if !errors.Is(ranErr, os.ErrNotExist) {
				t.Errorf("the command ran: %v", ranErr)
			}
		})
	}
}
