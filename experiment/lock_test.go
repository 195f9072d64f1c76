package experiment

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

const lockHolderEnv = "CLEANROOM_LOCK_HOLDER_WORLD"

// TestLockHolderChild is not a test: re-executed by
// TestLockAcrossProcesses, it takes the state lock, says so, and sleeps
// until it is killed.
func TestLockHolderChild(t *testing.T) {
	t.Parallel()
	dir := os.Getenv(lockHolderEnv)
	if dir == "" {
		t.Skip("helper process for TestLockAcrossProcesses")
	}
	w, err := OpenWorld(dir)
	if err != nil {
		os.Exit(3)
	}
	if _, err := w.lockState(context.Background(), true); err != nil {
		fmt.Println("FATAL", err)
		os.Exit(3)
	}
	fmt.Println("LOCKED")
	time.Sleep(time.Minute)
	os.Exit(0)
}

// Another process holding the state lock blocks a transition (errLocked,
// nothing written); when that process is killed the kernel releases the
// lock, so a crashed operator never wedges the world.
func TestLockAcrossProcesses(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	mustPin(t, w)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestLockHolderChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+w.Root)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || sc.Text() != "LOCKED" {
		t.Fatalf("holder did not take the lock: %q", sc.Text())
	}
	before := stateSnapshot(t, w)
	c, cancel := context.WithTimeout(bg, 200*time.Millisecond)
	_, err = Abort(c, w, "while locked", TransitionOptions{})
	cancel()
	if !errors.Is(err, errLocked) {
		t.Fatalf("abort while another process holds the lock: %v", err)
	}
	// The cause stays in the chain: the caller can tell its own deadline.
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("errLocked does not carry the context's error: %v", err)
	}
	sameStateSnapshot(t, before, stateSnapshot(t, w))
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	c, cancel = context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if _, err := Abort(c, w, "holder died", TransitionOptions{}); err != nil {
		t.Fatalf("abort after the holder died: %v", err)
	}
}

// A receipts/ replaced by a symlink cannot make a transition's clean-up
// delete (or verify list) temporary-named files of another directory.
func TestLeftoversNotFollowedThroughSymlink(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	elsewhere := t.TempDir()
	victim := filepath.Join(elsewhere, tempPrefix+"victim")
	if err := os.WriteFile(victim, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(w.StateDir(), tempPrefix+"own")
	if err := os.WriteFile(own, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(w.ReceiptsDir()); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, w.ReceiptsDir()); err != nil {
		t.Fatal(err)
	}
	if got := w.leftovers(); len(got) != 1 || got[0] != tempPrefix+"own" {
		t.Errorf("leftovers = %v, want only the state root's own", got)
	}
	w.removeLeftovers()
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("a file behind the symlinked receipts/ was touched: %v", err)
	}
	if _, err := os.Lstat(own); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the state root's own leftover survives: %v", err)
	}
}

// A transition of a world with no state root refuses (no run is pinned)
// and leaves none behind: only a pin starts one.
func TestTransitionWithoutStateRootLeavesNone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := OpenWorld(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, transition := range map[string]func() error{
		"abort":  func() error { _, err := Abort(ctx, w, "x", TransitionOptions{}); return err },
		"freeze": func() error { _, err := Freeze(ctx, w, FreezeOptions{}); return err },
		"reveal": func() error { _, err := Reveal(ctx, w, RevealOptions{}); return err },
	} {
		if err := transition(); !errors.Is(err, errNoRecord) {
			t.Errorf("%s: %v, want %v", name, err, errNoRecord)
		}
		if _, err := os.Lstat(w.StateDir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left a state root: %v", name, err)
		}
	}
}
