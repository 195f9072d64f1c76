package adapter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cleanroom-dev/cleanroom/internal/deathsig"
)

// Invocation is one adapter run, ready to execute.
type Invocation struct {
	// Dir is the staged view on the host: the frozen files at their
	// world-relative paths plus the challenge file. It is the process's
	// working directory (/workspace inside the sandbox) and the only
	// directory it may write.
	Dir string
	// Args is the command after placeholder substitution. Args[0] is an
	// interpreter name when Interpreted (one the world permits, checked by
	// CommandProblem, resolved by the runner in interpreterDirs, never
	// through the caller's PATH), else a path relative to Dir (the frozen
	// binary); every other path is relative to Dir.
	Args []string
	// Interpreted: Args[0] names an interpreter, not the frozen binary.
	Interpreted bool
	// Timeout is the wall-clock limit; Memory the memory limit in bytes
	// (honoured by the sandbox; the unsandboxed runner cannot limit memory).
	Timeout time.Duration
	Memory  int64
}

// Outcome is how the process ended.
type Outcome struct {
	// Status is "exited", "signaled", "timeout" or "oom".
	Status   string
	ExitCode int
	// Stderr is the last few KiB the process wrote to standard error.
	Stderr string
}

// Runner executes an invocation. Implementations must not return before
// the process and everything it started are gone.
type Runner interface {
	// Name identifies the runner in the measurement record.
	Name() string
	// Sandboxed reports whether the runner isolates the process (no
	// network, limits, only the staged view visible).
	Sandboxed() bool
	Run(ctx context.Context, inv Invocation) (Outcome, error)
}

// Outcome statuses.
const (
	StatusExited   = "exited"
	StatusSignaled = "signaled"
	StatusTimeout  = "timeout"
	StatusOOM      = "oom"
)

// interpreterDirs are where an interpreter name is looked for: fixed system locations,
// never the caller's PATH (a PATH entry the operator did not choose would
// pick the interpreter the measurement runs on).
var interpreterDirs = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// ResolveInterpreter returns the absolute path of an interpreter name.
func ResolveInterpreter(name string) (string, error) {
	// A bare name only: a path would pick a program outside the fixed
	// directories (the world's declaration refuses one already).
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return "", fmt.Errorf("interpreter %q is not a bare program name", name)
	}
	for _, d := range interpreterDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("interpreter %q not found in %v", name, interpreterDirs)
}

// minimalEnv is the whole environment an adapter receives: nothing of the
// operator's (tokens, proxies, HOME) leaks into a measured process.
func minimalEnv() []string {
	return []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/nonexistent"}
}

// stderrLimit bounds the standard error kept per run.
const stderrLimit = 4096

// tailBuffer keeps the last stderrLimit bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > stderrLimit {
		t.b = append(t.b[:0:0], t.b[len(t.b)-stderrLimit:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(bytes.ToValidUTF8(t.b, []byte("?"))) }

// UnsandboxedRunner runs the adapter as a plain child process of cleanroom:
// working directory = the staged view, minimal environment, its own process
// group killed on timeout. It does NOT isolate the network, the file system
// or memory; it is for machines without the sandbox, chosen explicitly, and
// its measurements record Sandboxed=false.
type UnsandboxedRunner struct{}

// Name implements Runner.
func (UnsandboxedRunner) Name() string { return "unsandboxed" }

// Sandboxed implements Runner: false.
func (UnsandboxedRunner) Sandboxed() bool { return false }

// Run implements Runner.
func (UnsandboxedRunner) Run(ctx context.Context, inv Invocation) (Outcome, error) {
	if len(inv.Args) == 0 {
		return Outcome{}, errors.New("adapter: empty command")
	}
	argv0 := inv.Args[0]
	if inv.Interpreted {
		p, err := ResolveInterpreter(argv0)
		if err != nil {
			return Outcome{}, err
		}
		argv0 = p
	} else {
		argv0 = filepath.Join(inv.Dir, filepath.FromSlash(argv0))
	}
	timeout := inv.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.Command(argv0, inv.Args[1:]...)
	cmd.Dir = inv.Dir
	cmd.Env = minimalEnv()
	var stderr tailBuffer
	cmd.Stderr = &stderr
	// Its own process group, so the timeout kills everything it started;
	// deathsig, so it dies with this process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	done, err := deathsig.Start(cmd)
	if err != nil {
		return Outcome{}, fmt.Errorf("starting adapter: %w", err)
	}
	timedOut := false
	select {
	case err = <-done:
	case <-cctx.Done():
		timedOut = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
	}
	// Whatever the leader did, nothing of the group may outlive the run.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	out := Outcome{Stderr: stderr.String()}
	switch {
	case timedOut && ctx.Err() != nil:
		// The caller cancelled: that is not the adapter's timeout, and no
		// measurement may record it as one.
		return out, fmt.Errorf("adapter run cancelled: %w", ctx.Err())
	case timedOut:
		out.Status = StatusTimeout
		out.ExitCode = -1
	case err == nil:
		out.Status = StatusExited
	default:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return out, fmt.Errorf("waiting for adapter: %w", err)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			out.Status = StatusSignaled
			out.ExitCode = -1
		} else {
			out.Status = StatusExited
			out.ExitCode = ee.ExitCode()
		}
	}
	return out, nil
}

// DefaultTimeout bounds one adapter run when the caller sets none.
const DefaultTimeout = 5 * time.Minute
