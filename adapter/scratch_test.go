package adapter

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestGCStaging: a staging directory whose measurement is gone (its lock
// released, its removal never run, as after a kill) is removed; a live one
// (lock held) is listed and kept; a link named like one is not followed,
// and nothing else in the scratch directory is touched.
func TestGCStaging(t *testing.T) {
	t.Parallel()
	scratch := t.TempDir()
	live, releaseLive, err := newStagingDir(scratch, "reference")
	if err != nil {
		t.Fatal(err)
	}
	defer releaseLive()
	orphan, releaseOrphan, err := newStagingDir(scratch, "candidate")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(orphan, "cleanroom-io"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(orphan, "cleanroom-io", "challenges.json"), []byte("[]"), 0o444); err != nil {
		t.Fatal(err)
	}
	releaseOrphan() // the process died: its descriptor, and the lock, are gone
	target := filepath.Join(t.TempDir(), "kept")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(scratch, StagingPrefix+"link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(scratch, "other-dir")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}

	for _, dry := range []bool{true, false} {
		rep, err := GCStaging(scratch, dry)
		if err != nil {
			t.Fatalf("GCStaging(dry=%v): %v", dry, err)
		}
		if !slices.Equal(rep.Removed, []string{orphan}) || !slices.Equal(rep.Live, []string{live}) {
			t.Errorf("GCStaging(dry=%v): removed %v live %v, want %v and %v", dry, rep.Removed, rep.Live, orphan, live)
		}
		if _, err := os.Lstat(orphan); dry != (err == nil) {
			t.Errorf("GCStaging(dry=%v): orphan present: %v", dry, err == nil)
		}
	}
	for _, p := range []string{live, link, target, other} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v (must be left alone)", p, err)
		}
	}
}
