package durable

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// A held staging directory survives RemoveStaleStages; once its holder is
// gone (the lock released, as the kernel does for a killed process) it is
// removed. Nothing else beside the target is touched: another name's
// stage, a plain StageDir, a link named like a held stage.
func TestRemoveStaleStages(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dest := filepath.Join(base, "out")
	live, releaseLive, err := StageDirHeld(dest)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseLive()
	if _, err := HoldDir(live); !errors.Is(err, ErrHeld) {
		t.Fatalf("HoldDir of a held directory: %v, want %v", err, ErrHeld)
	}
	dead, releaseDead, err := StageDirHeld(dest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, "partial"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	releaseDead()
	other, releaseOther, err := StageDirHeld(filepath.Join(base, "other"))
	if err != nil {
		t.Fatal(err)
	}
	releaseOther()
	plain, err := StageDir(dest)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, TempPrefix+"out"+heldInfix+"link")
	target := t.TempDir()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}

	removed, err := RemoveStaleStages(dest)
	if err != nil || !slices.Equal(removed, []string{dead}) {
		t.Fatalf("RemoveStaleStages: %v %v, want [%s]", removed, err, dead)
	}
	for _, p := range []string{live, other, plain, link, target} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v (must be left alone)", p, err)
		}
	}
}

// RemoveTemps removes the temporary files of interrupted writes and
// nothing else (a directory with the prefix, other files).
func TestRemoveTemps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tmp := filepath.Join(dir, TempPrefix+"checkpoint.0011")
	if err := os.WriteFile(tmp, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoint"), []byte("whole"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, TempPrefix+"stage"), 0o755); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveTemps(dir)
	if err != nil || !slices.Equal(removed, []string{filepath.Base(tmp)}) {
		t.Fatalf("RemoveTemps: %v %v", removed, err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{TempPrefix + "stage", "checkpoint"}; !slices.Equal(names, want) {
		t.Errorf("left %v, want %v", names, want)
	}
}

// release lets the lock go at once and may be called again without
// closing a descriptor that took its number since.
func TestHoldDirRelease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	release, err := HoldDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	release()
	again, err := HoldDir(dir)
	if err != nil {
		t.Fatalf("HoldDir after release: %v", err)
	}
	defer again()
	testshared.ClosesNothingElse(t, release)
	if _, err := HoldDir(dir); !errors.Is(err, ErrHeld) {
		t.Errorf("HoldDir while held again: %v, want ErrHeld", err)
	}
}
