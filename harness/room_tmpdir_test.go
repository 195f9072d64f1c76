package harness

import (
	"os"
	"path/filepath"
	"testing"
)

// TestServeTmpdirThroughSymlink: the view's mount point is created under
// $TMPDIR; when that path passes through a symbolic link (a /tmp that
// links elsewhere), the kernel mounts on the link's target and mountinfo
// names the target, so a seal asserted by the name as created found no
// mount there and the room exited 3 (no isolation) on a machine that has
// it. The mount point is named by its resolved path.
func TestServeTmpdirThroughSymlink(t *testing.T) {
	needSeal(t)
	pkg, id := writePackage(t, testFiles())
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "tmp-link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", link)
	code, stderr := serveExit(t, ServeOptions{PackageDir: pkg, Expect: id, Workspace: filepath.Join(t.TempDir(), "ws")})
	if code != 0 {
		t.Fatalf("exit %d, want 0 (served, then stdin ended); stderr:\n%s", code, stderr)
	}
	if ents, err := os.ReadDir(real); err != nil || len(ents) != 0 {
		t.Errorf("left in $TMPDIR: %v %v", ents, err)
	}
}
