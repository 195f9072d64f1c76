package adapter

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/cleanroom-dev/cleanroom/sandbox"
)

// SandboxRunner runs the adapter in the candidate sandbox (sandbox.Exec):
// fresh namespaces, no network at all (no Allow entries), memory, pid and
// wall-clock limits, a read-only root of host /usr binds, and the staged
// view bind-mounted read-write at /workspace, which is the working
// directory. An interpreter (node, or one the world declares) is the
// host's in /usr/bin or /usr/local/bin (bound read-only from /usr).
type SandboxRunner struct {
	// StateDir is passed to sandbox.Config (empty: its default).
	StateDir string
}

// Name implements Runner.
func (SandboxRunner) Name() string { return "sandbox" }

// Sandboxed implements Runner: true.
func (SandboxRunner) Sandboxed() bool { return true }

// workspace is where the sandbox mounts the staged view.
const workspace = "/workspace"

// Run implements Runner.
func (r SandboxRunner) Run(ctx context.Context, inv Invocation) (Outcome, error) {
	if len(inv.Args) == 0 {
		return Outcome{}, errors.New("adapter: empty command")
	}
	args := append([]string(nil), inv.Args...)
	if inv.Interpreted {
		p, err := ResolveInterpreter(args[0])
		if err != nil {
			return Outcome{}, err
		}
		// The interpreter must be the host's /usr one, which the sandbox
		// binds read-only at the same path (so /usr/local/bin/node too);
		// p is a clean join of a fixed directory and the name.
		if !strings.HasPrefix(p, "/usr/") {
			return Outcome{}, fmt.Errorf("interpreter %s is outside /usr, which is all the sandbox binds", p)
		}
		args[0] = p
	} else {
		args[0] = path.Join(workspace, args[0])
	}
	timeout := inv.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var stderr tailBuffer
	cfg := sandbox.Config{
		Args:      args,
		Env:       minimalEnv(),
		Workspace: inv.Dir,
		Memory:    inv.Memory,
		Timeout:   timeout,
		StateDir:  r.StateDir,
	}
	res, err := sandbox.Exec(ctx, cfg, sandbox.Stdio{Stderr: &stderr})
	if err != nil {
		return Outcome{Stderr: stderr.String()}, fmt.Errorf("sandbox: %w", err)
	}
	out := Outcome{Status: res.Status, ExitCode: res.ExitCode, Stderr: stderr.String()}
	switch res.Status {
	case sandbox.StatusExited:
		out.Status = StatusExited
	case sandbox.StatusTimeout:
		out.Status = StatusTimeout
	case sandbox.StatusOOM:
		out.Status = StatusOOM
	default:
		out.Status = StatusSignaled
	}
	return out, nil
}
