package fsx

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestUnderGVisor runs this package's tests again inside gVisor
// (`runsc do`), where Debian's runsc 20221219 answers ENOSYS to openat2:
// there the walk is what Open uses, on gVisor's own file systems (its
// overlay reports a file's layer device, not the overlay's), and every
// case must hold as it does here. (gVisor 20221219 has no
// RENAME_EXCHANGE: the race test skips there; it runs here.)
func TestUnderGVisor(t *testing.T) {
	t.Parallel()
	runsc, err := exec.LookPath("runsc")
	if err != nil {
		t.Skip("runsc is not installed (Debian package runsc): the walk is not tested under gVisor")
	}
	if os.Geteuid() != 0 {
		t.Skip("runsc do needs root")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(runsc, "--root", t.TempDir(), "--network=none", "do", exe,
		"-test.run", "^(TestOpen|TestCrossed)", "-test.v", "-test.count=1")
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tests under runsc: %v\n%s", err, out)
	}
	for _, want := range []string{"--- PASS: TestOpen/walk", "--- PASS: TestOpenLands/walk", "--- PASS: TestOpenFile/walk", "--- PASS: TestOpenFollowInside/walk", "\nPASS\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the tests under runsc did not say %q:\n%s", strings.TrimSpace(want), out)
		}
	}
	// Debian's runsc has no openat2: say so when the openat2 half was
	// skipped for it, so a log shows which path was tested.
	if strings.Contains(string(out), "openat2 answers ENOSYS") {
		t.Log("runsc answered ENOSYS to openat2: the walk alone ran inside it")
	}
}
