package deathsig

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// childEnv selects what this test binary does when started as a child.
const childEnv = "DEATHSIG_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "pdeathsig":
		// The signal the kernel will send this process when its parent's
		// forking thread ends.
		var sig int32
		if err := unix.Prctl(unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(sig)
		os.Exit(0)
	case "wait":
		// Lives until its stdin ends.
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "parent":
		// Starts a "wait" grandchild, says its pid, and waits for it (until
		// the test kills this process).
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), childEnv+"=wait")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			os.Exit(2)
		}
		defer stdin.Close()
		waited, err := Start(cmd)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println(cmd.Process.Pid)
		if err := <-waited; err != nil {
			fmt.Fprintln(os.Stderr, err) // said, not judged: the test reads only the pid
		}
		os.Exit(0)
	}
	os.Exit(2)
}

func child(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	return cmd
}

// The child is started with SIGKILL as its parent-death signal, whatever
// else its SysProcAttr says.
func TestStartSetsDeathSignal(t *testing.T) {
	t.Parallel()
	cmd := child("pdeathsig")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := CombinedOutput(cmd)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "9" {
		t.Errorf("the child's parent-death signal is %q, want 9 (SIGKILL)", got)
	}
	if !cmd.SysProcAttr.Setpgid {
		t.Error("Start dropped the caller's Setpgid")
	}
}

// Threads ending (goroutines that exit locked to theirs) do not kill a
// child started by Start: the thread that forked it is not among them.
func TestChildOutlivesOtherThreads(t *testing.T) {
	t.Parallel()
	cmd := child("wait")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	waited, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	for range 64 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // never unlocked: Go ends this thread
		}()
		<-done
	}
	stdin.Close()
	if err := <-waited; err != nil {
		t.Errorf("the child did not end by itself: %v", err)
	}
}

// When the process that started the child dies, the kernel kills the
// child: this test is the grandchild's subreaper and reaps it.
func TestChildDiesWithParent(t *testing.T) {
	// Not parallel: it makes this process a subreaper, and waits for a
	// pid that only it may reap.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a subreaper: %v", err)
	}
	defer func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) }() // best effort: the test is over
	parent := child("parent")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = parent.Process.Kill()
		_ = parent.Wait()
		t.Fatalf("the parent said no pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = parent.Wait()
	var ws unix.WaitStatus
	for {
		_, err = unix.Wait4(pid, &ws, 0, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		t.Fatalf("reaping the grandchild %d: %v", pid, err)
	}
	if !ws.Signaled() || ws.Signal() != unix.SIGKILL {
		t.Errorf("the grandchild ended with %v, want killed by SIGKILL", ws)
	}
}

// A command that cannot start is an error from Start, and no channel.
func TestStartError(t *testing.T) {
	t.Parallel()
	waited, err := Start(exec.Command("/nonexistent/deathsig-test"))
	if !errors.Is(err, os.ErrNotExist) || waited != nil {
		t.Errorf("got %v, %v; want ErrNotExist and no channel", waited, err)
	}
}
