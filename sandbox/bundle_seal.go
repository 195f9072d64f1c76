package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/vishvananda/netns"
)

// SealRecordName is the file, in the bundle directory, where the seal
// probe's createRuntime hook writes its seal_probe record.
const SealRecordName = "seal_probe.json"

// sealHook is the bundle's second createRuntime hook: the seal probe from
// the container's network namespace (`<exe> sandbox seal-hook`). It runs
// after the mechanism check, in the runtime's namespace, entering the
// container's network namespace as exec's probe does: the vantage is the
// candidate's, and the runtime aborts the start if it fails.
func sealHook(exe, dir string, seal netip.AddrPort, control *netip.AddrPort) specs.Hook {
	args := []string{exe, "sandbox", "seal-hook", "--sealed", seal.String(), "--record", filepath.Join(dir, SealRecordName)}
	if control != nil {
		args = append(args, "--control", control.String())
	}
	return specs.Hook{Path: exe, Args: args}
}

// containerNetNS reads the OCI state a hook gets on stdin and opens the
// container's network namespace (/proc/<pid>/ns/net).
func containerNetNS(r io.Reader) (netns.NsHandle, error) {
	var st specs.State
	if err := json.NewDecoder(io.LimitReader(r, 1<<20)).Decode(&st); err != nil {
		return 0, fmt.Errorf("%w: reading the OCI state: %w", errConfig, err)
	}
	if st.Pid <= 0 {
		return 0, fmt.Errorf("%w: the OCI state has no pid", errConfig)
	}
	ns, err := netns.GetFromPid(st.Pid)
	if err != nil {
		return 0, fmt.Errorf("the container's network namespace: %w", err)
	}
	return ns, nil
}

// RunSealHook is the seal probe of a bundle: it reads the OCI state from
// r, probes cfg.Sealed (and the positive control) from the container's
// network namespace, writes the record to record (create-exclusive) and
// returns ErrSealProbe unless the probe passed — a non-zero hook exit
// makes the runtime abort the start, so the candidate never runs behind a
// seal that answered.
func RunSealHook(ctx context.Context, r io.Reader, cfg ProbeConfig, record string) (*ProbeResult, error) {
	ns, err := containerNetNS(r)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	res := Probe(ctx, ns, cfg)
	if record != "" {
		if err := writeRecordExclusive(record, res); err != nil {
			return res, err
		}
	}
	if res.TerminalState() != "" {
		return res, fmt.Errorf("%w: %s %s %s", ErrSealProbe, res.Outcome, res.Errno, res.Detail)
	}
	return res, nil
}

// writeRecordExclusive writes v as JSON to path, which must not exist: a
// hook never overwrites an earlier record.
func writeRecordExclusive(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("hook record %s: %w", path, err)
	}
	if err := durable.CreateFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("hook record: %w", err)
	}
	return nil
}
