package experiment

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

const lockHolderEnv = "CLEANROOM_LOCK_HOLDER_WORLD"

// TestLockHolderChild is not a test: re-executed by
// TestLockAcrossProcesses, it takes the state lock, says so, and sleeps
// until it is killed.
func TestLockHolderChild(t *testing.T) {
	dir := os.Getenv(lockHolderEnv)
	if dir == "" {
		t.Skip("helper process for TestLockAcrossProcesses")
	}
	w, err := OpenWorld(dir)
	if err != nil {
		os.Exit(3)
	}
	if _, err := w.lockState(context.Background()); err != nil {
		fmt.Println("FATAL", err)
		os.Exit(3)
	}
	fmt.Println("LOCKED")
	time.Sleep(time.Minute)
	os.Exit(0)
}

// Another process holding the state lock blocks a transition (ErrLocked,
// nothing written); when that process is killed the kernel releases the
// lock, so a crashed operator never wedges the world.
func TestLockAcrossProcesses(t *testing.T) {
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
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("abort while another process holds the lock: %v", err)
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
