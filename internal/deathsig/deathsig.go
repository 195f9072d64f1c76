package deathsig

import (
	"bytes"
	"os/exec"
	"runtime"
	"syscall"
)

// Start sets cmd's parent-death signal to SIGKILL (keeping the rest of its
// SysProcAttr) and starts it from an OS thread locked until the child is
// reaped. The channel receives cmd.Wait's result, once. cmd must not be
// waited for otherwise.
func Start(cmd *exec.Cmd) (<-chan error, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// The child must not outlive this process (a crash or a SIGKILL gives
	// no chance to clean up).
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	started, waited := make(chan error, 1), make(chan error, 1)
	go func() {
		// The forking thread is this goroutine's until the child is reaped:
		// no other goroutine can run on it, lock it and end it, which would
		// fire the parent-death signal early.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return waited, nil
}

// Run is [Start] and the wait: exec.Cmd.Run for a child that dies with
// this process.
func Run(cmd *exec.Cmd) error {
	waited, err := Start(cmd)
	if err != nil {
		return err
	}
	return <-waited
}

// CombinedOutput is exec.Cmd.CombinedOutput for a child started by
// [Start]: its stdout and stderr, interleaved.
func CombinedOutput(cmd *exec.Cmd) ([]byte, error) {
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := Run(cmd)
	return b.Bytes(), err
}
