package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sandbox"
)

// The test binary includes init.go, so it is libcontainer's init when
// `sandbox exec` re-executes it.
func TestSandboxCommands(t *testing.T) {
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
		{"exec bad --memory", []string{"sandbox", "exec", "--memory", "lots", "--", "/bin/true"}, 2, "invalid size"},
		{"probe sealed", []string{"sandbox", "probe", "--sealed", ln.Addr().String()}, 0, ""},
		{"probe allowlist without control", []string{"sandbox", "probe", "--net", "allow:10.213.255.1:80", "--sealed", ln.Addr().String()}, 2, "needs a positive control"},
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
// named as removed (JSON), its directory gone; a second gc finds nothing.
func TestSandboxGCAfterKill(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the candidate sandbox needs root")
	}
	if _, err := sandbox.CheckKernel(); err != nil {
		t.Skipf("the candidate sandbox cannot run here: %v", err)
	}
	bin, _ := cliBinary(t)
	state := filepath.Join(t.TempDir(), "state")
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
	if code, stdout, errs := runCLI(t, "sandbox", "gc", "--state-root", state, "--json"); code != 0 || !strings.Contains(stdout, `"live": [
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
		if code, stdout, errs = runCLI(t, "sandbox", "gc", "--state-root", state, "--json"); code != 1 {
			break
		}
	}
	var rep sandbox.GCReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("gc: exit %d, %v:\n%s%s", code, err, stdout, errs)
	}
	if code != 0 || len(rep.Stale) != 1 || rep.Stale[0].ID != id || !rep.Stale[0].Removed || len(rep.Stale[0].Cgroups) == 0 {
		t.Fatalf("gc: exit %d, %+v\n%s", code, rep, errs)
	}
	if _, err := os.Lstat(filepath.Join(state, id)); !os.IsNotExist(err) {
		t.Errorf("the killed run's directory is still there: %v", err)
	}
	if code, stdout, _ := runCLI(t, "sandbox", "gc", "--state-root", state); code != 0 || !strings.Contains(stdout, "nothing stale") {
		t.Errorf("second gc: exit %d:\n%s", code, stdout)
	}
}
