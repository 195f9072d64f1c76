package sandbox

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// HookRecordName is the file, in the bundle directory, where the
// createRuntime hook writes its isolation record.
const HookRecordName = "isolation_check.json"

// WriteBundle writes an OCI runtime bundle for cfg into dir (which must
// not exist): config.json rendered by the same Config.Spec that Exec
// runs, and the rootfs layout (mount points, the minimal /etc). The
// network namespace is created by the runtime; the mechanism check runs
// as a createRuntime hook (`<this binary> sandbox hook`), so a runtime
// that honours hooks does not start a container whose namespace fails the
// check. exe is the cleanroom binary the hook and the shim run (its
// absolute path is recorded). With cfg.Seal the seal probe runs as a
// second createRuntime hook (`<this binary> sandbox seal-hook`, see
// RunSealHook). Only full isolation can be rendered: the allowlisted
// egress needs the host-side setup Exec performs. The bundle runs under
// runc, crun and runsc (see portableMounts and BundleOCIVersion); runsc
// must be given --network=none (the bundle names no network namespace
// path, and gVisor's own netstack is then loopback only). With a
// workspace, a poststop hook (`<this binary> sandbox scrub`) scrubs it
// once the container is deleted and writes ScrubRecordName: a reader of
// the workspace must find that record with refused false (or run
// `cleanroom sandbox scrub` itself) first.
func WriteBundle(cfg Config, dir, exe string) (*specs.Spec, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(cfg.Allow) > 0 {
		return nil, fmt.Errorf("%w: an OCI bundle can express only full isolation (--net none)", errConfig)
	}
	if cfg.PackageEmit != nil {
		return nil, fmt.Errorf("%w: the sealed package view is established by exec, not by a bundle", errConfig)
	}
	if !filepath.IsAbs(exe) {
		return nil, fmt.Errorf("%w: binary path %q is not absolute", errConfig, exe)
	}
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return nil, fmt.Errorf("%w: bundle dir %q: want an absolute, clean path", errConfig, dir)
	}
	// Create-exclusive: never write into an existing bundle. Root's, and
	// the candidate's init may only pass through (0710, its group).
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("bundle dir: %w", err)
	}
	// The runtime's init runs as the candidate's uid (CandidateUID on the
	// host) and enters the rootfs by its path: the bundle's parents must
	// let it pass.
	if err := searchableByCandidate(dir); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("%w: bundle dir: %w", errConfig, err)
	}
	if err := os.Chown(dir, 0, CandidateUID); err != nil {
		return nil, fmt.Errorf("bundle dir: %w", err)
	}
	if err := os.Chmod(dir, 0o710); err != nil {
		return nil, fmt.Errorf("bundle dir: %w", err)
	}
	id, err := newID()
	if err != nil {
		return nil, err
	}
	rootfs, err := prepareRootfs(dir, cfg.Package != "", true, cfg.Binds)
	if err != nil {
		return nil, err
	}
	spec, err := cfg.spec(rootfs, "", id, exe)
	if err != nil {
		return nil, err
	}
	if cfg.Workspace != "" {
		// The candidate writes it as CandidateUID. The post-run scrub
		// (set-id bits, special files) is the poststop hook below.
		if err := giveWorkspace(cfg.Workspace); err != nil {
			return nil, err
		}
	}
	spec.Root.Path = "rootfs" // relative to the bundle, as runtimes expect
	// One bundle for runc, crun and runsc: an ociVersion and mount options
	// all three accept, recursive read-only kept by explicit binds.
	if err := portableMounts(spec); err != nil {
		return nil, err
	}
	spec.Hooks = &specs.Hooks{CreateRuntime: []specs.Hook{{
		Path: exe,
		Args: []string{exe, "sandbox", "hook", "--record", filepath.Join(dir, HookRecordName)},
	}}}
	if cfg.Seal != nil {
		spec.Hooks.CreateRuntime = append(spec.Hooks.CreateRuntime, sealHook(exe, dir, *cfg.Seal, cfg.Control))
	}
	if cfg.Workspace != "" {
		// Once the container is deleted (every process of it gone), the
		// workspace gets Exec's post-run scrub; its record tells the
		// reader whether the workspace may be read. A runtime only warns
		// when a poststop hook fails, so the record, not the runtime's
		// status, is the verdict (ScrubWorkspace).
		spec.Hooks.Poststop = []specs.Hook{{
			Path: exe,
			Args: []string{exe, "sandbox", "scrub", "--state-root", cfg.StateDir, "--record", filepath.Join(dir, ScrubRecordName), cfg.Workspace},
		}}
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	// Crash-safe and create-exclusive: a runtime never reads a torn
	// config.json, and an existing one is never replaced.
	if err := durable.Create(dir, "config.json", append(b, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	return spec, nil
}

// RunHook is the createRuntime hook of a bundle: it reads the OCI state
// from r, runs the mechanism check on the container's network namespace
// (/proc/<pid>/ns/net), writes the record to record (create-exclusive)
// and returns ErrIsolation unless the isolation is enforced — a non-zero
// hook exit makes the runtime abort the start.
func RunHook(r io.Reader, record string) (*IsolationCheck, error) {
	ns, err := containerNetNS(r)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	rec, err := CheckIsolation(ns, Expectation{})
	return hookVerdict(rec, err, record)
}

// RunOwnHook is RunHook for a process that checks the network namespace
// it runs in (CheckOwnIsolation): a Kubernetes Job's command before it
// starts the candidate, where no runtime hook of cleanroom's runs.
func RunOwnHook(record string) (*IsolationCheck, error) {
	rec, err := CheckOwnIsolation(Expectation{})
	return hookVerdict(rec, err, record)
}

// hookVerdict writes the record of a completed check and turns anything
// short of enforced isolation into ErrIsolation.
func hookVerdict(rec *IsolationCheck, err error, record string) (*IsolationCheck, error) {
	if err != nil {
		return nil, err
	}
	if record != "" {
		if err := writeRecordExclusive(record, rec); err != nil {
			return rec, err
		}
	}
	if !rec.Enforced {
		return rec, fmt.Errorf("%w: %v", ErrIsolation, rec.Problems)
	}
	return rec, nil
}
