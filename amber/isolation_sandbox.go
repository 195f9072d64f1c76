package amber

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/cleanroom-dev/cleanroom/sandbox"
)

// SandboxIsolation runs containers with package sandbox (libcontainer): the
// mechanism-level isolation check and the seal probe run inside
// sandbox.Exec before the command starts, from the candidate's own network
// namespace. The binary must be libcontainer's init when re-executed as
// `init` (cmd/cleanroom does this).
type SandboxIsolation struct {
	StateDir string // default: the sandbox's
}

// Available reports whether the sandbox can run on this machine.
func (s *SandboxIsolation) Available() error {
	if _, err := sandbox.CheckKernel(); err != nil {
		return fmt.Errorf("%w: %w", errSandboxUnavailable, err)
	}
	return nil
}

// Run implements Isolation.
func (s *SandboxIsolation) Run(ctx context.Context, spec ContainerSpec, stdout, stderr io.Writer) (*ContainerOutcome, error) {
	cfg := sandbox.Config{
		Args: spec.Args, Env: spec.Env, Workspace: spec.Workspace, PackageEmit: spec.PackageEmit,
		Timeout: spec.Timeout, Seal: spec.Sealed, Control: spec.Control, StateDir: s.StateDir,
		Inspect: spec.Inspect,
	}
	for _, a := range spec.Allow {
		ep, err := sandbox.ParseEndpoint(a)
		if err != nil {
			// The sandbox enforces addresses: a host name in the manifest
			// cannot be enforced, so the run cannot start.
			return &ContainerOutcome{PreStart: fmt.Sprintf("allowlist entry %q cannot be enforced: %v", a, err)}, nil
		}
		cfg.Allow = append(cfg.Allow, ep)
	}
	res, err := sandbox.Exec(ctx, cfg, sandbox.Stdio{Stdout: stdout, Stderr: stderr})
	out := &ContainerOutcome{}
	if res != nil {
		if res.Isolation != nil {
			out.IsolationCheck, _ = json.Marshal(res.Isolation)
		}
		if res.SealProbe != nil {
			out.SealProbe, _ = json.Marshal(res.SealProbe)
		}
		out.Status, out.ExitCode = res.Status, res.ExitCode
		out.Walked = res.Walked && spec.Inspect != nil
		for _, f := range res.Workspace {
			if f.Rule == sandbox.RuleUnwalked {
				out.Unwalked = f.Detail
			}
		}
	}
	switch {
	case errors.Is(err, sandbox.ErrIsolation), errors.Is(err, sandbox.ErrSealProbe), errors.Is(err, sandbox.ErrNamespaceChanged), errors.Is(err, sandbox.ErrPackage):
		out.PreStart = err.Error()
		return out, nil
	case err != nil:
		return out, err
	}
	return out, nil
}
