package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/internal/testshared/runworld"
)

// podCommand is the fleet Job's in-pod command as e2e/k8s/run.sh plans it
// (its INPOD='…'): read from there, so this test runs what the Job runs.
func podCommand(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testshared.RepoRoot(t), "e2e", "k8s", "run.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\nINPOD='([^']*)'\n`).FindSubmatch(b)
	if m == nil {
		t.Fatal("e2e/k8s/run.sh has no INPOD='…' line: the pod's command moved")
	}
	return string(m[1])
}

// TestJobCommandUnderGVisor runs a fleet Job's pod command on a revealed
// synthetic world inside gVisor (runsc, as the RuntimeClass gvisor does),
// as the Job's pod runs it: uid 65534, no capability, no_new_privs, the
// image read-only, the world on a bind-mounted volume at /results, no
// network. Debian's runsc 20221219 answers ENOSYS to openat2 (fsx walks
// instead) and EINVAL to renameat2 RENAME_NOREPLACE on such a volume
// (durable links instead); the run must complete there, be bound to its
// plan entry, and verify COMPLETE outside.
func TestJobCommandUnderGVisor(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed (Debian package nodejs): the synthetic world's adapters are JavaScript")
	}
	bin, binDir := cliBinary(t)
	cmd := podCommand(t)
	world := filepath.Join(t.TempDir(), "world")
	runworld.Revealed(t, world)
	ws := t.TempDir()
	for _, root := range []string{world, ws} {
		err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, 65534, 65534)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The binaries' directory is made searchable for uid 65534.
	if err := os.Chmod(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	zero := strings.Repeat("0", 64)
	out, err := testshared.InGVisor(t, testshared.GVisorRun{
		Args: []string{"/bin/sh", "-c", cmd},
		Env: []string{"PATH=/opt/cleanroom:/usr/local/bin:/usr/bin:/bin", "CLEANROOM_RUN=blind-gvisor-1", "CLEANROOM_RESULTS=/results",
			"CLEANROOM_KIND=blind", "CLEANROOM_RUN_SHA256=" + zero, "CLEANROOM_PLAN_SHA256=" + zero},
		Cwd: "/workspace",
		UID: 65534,
		Tmp: true,
		Binds: []testshared.Bind{
			{Host: world, Dest: "/results", Writable: true},
			{Host: ws, Dest: "/workspace", Writable: true},
			{Host: binDir, Dest: "/opt/cleanroom"},
		},
	})
	if err != nil {
		t.Fatalf("the pod command under runsc: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`(?m)^COMPLETE brun-`).Match(out) || !strings.Contains(string(out), "bound /results to run blind-gvisor-1") {
		t.Errorf("the pod command under runsc did not complete and bind the run:\n%s", out)
	}
	v, err := exec.Command(bin, "run", "verify", "--world", world).CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^VERIFIED$`).Match(v) || !regexp.MustCompile(`(?m)^run +brun-\S+ COMPLETE$`).Match(v) {
		t.Errorf("run verify of the world completed under runsc (%v):\n%s", err, v)
	}
}
