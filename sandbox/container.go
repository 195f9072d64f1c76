package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/sandbox/cgprime"
	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
	"github.com/opencontainers/runc/libcontainer"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Sentinels for Exec's refusals; callers branch with errors.Is.
var (
	// errConfig: the Config is unusable (the error names the field).
	errConfig = fault.New(fault.Unusable, "invalid sandbox configuration")
	// ErrIsolation: the mechanism-level isolation check did not pass; the
	// run must be recorded as invalid_infrastructure.
	ErrIsolation = fault.New(fault.Refused, "network isolation check failed")
	// ErrSealProbe: the seal probe or its positive control did not pass;
	// the run must be recorded as invalid_infrastructure.
	ErrSealProbe = fault.New(fault.Refused, "seal probe failed")
	// ErrPackage: the package could not be emitted and sealed (the emit
	// refused it, or the kernel did not confirm the seal).
	ErrPackage = fault.New(fault.Refused, "package view refused")
	// ErrNamespaceChanged: the candidate's process is not in the network
	// namespace that was checked.
	ErrNamespaceChanged = fault.New(fault.Refused, "candidate is not in the checked network namespace")
)

// Endpoint is one allowlisted destination: an IP address and a TCP port.
type Endpoint struct {
	Addr netip.Addr
	Port uint16
}

func (e Endpoint) String() string { return netip.AddrPortFrom(e.Addr, e.Port).String() }

// ParseEndpoint parses "IP:PORT" ("[v6]:PORT" for IPv6). Host names are
// refused: the allowlist is enforced on addresses, and resolving a name is
// itself network access.
func ParseEndpoint(s string) (Endpoint, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return Endpoint{}, fmt.Errorf("%w: endpoint %q: want IP:PORT with a literal address: %w", errConfig, s, err)
	}
	if ap.Port() == 0 {
		return Endpoint{}, fmt.Errorf("%w: endpoint %q: port 0", errConfig, s)
	}
	// A zoned address names an interface of this host, not a destination.
	if ap.Addr().Zone() != "" {
		return Endpoint{}, fmt.Errorf("%w: endpoint %q: not a single unicast address", errConfig, s)
	}
	e := Endpoint{Addr: ap.Addr().Unmap(), Port: ap.Port()}
	// Unspecified, broadcast, multicast, link-local, loopback, the
	// sandbox's own pool: each refused by its rule.
	if err := CheckAllowlist([]Endpoint{e}); err != nil {
		return Endpoint{}, fmt.Errorf("endpoint %q: %w", s, err)
	}
	return e, nil
}

// Config is the one description of a candidate run. Spec renders it as an
// OCI runtime spec; Exec runs that spec through libcontainer, so an OCI
// bundle and a direct run express the same isolation.
type Config struct {
	// Args is the command, resolved inside the container (e.g. /bin/sh).
	Args []string
	// Env is the command's environment; entries starting with
	// _LIBCONTAINER_ are refused.
	Env []string
	// Workspace is a host directory mounted read-write at /workspace; empty
	// means an empty tmpfs there.
	Workspace string
	// Package is a host directory mounted read-only at /package; empty
	// means no /package. A plain bind shows whatever the directory holds
	// at start and is read-only per mount only; prefer PackageEmit.
	Package string
	// PackageEmit, if set, delivers the package into a fresh tmpfs that
	// is then sealed as the clean room seals its view (Seal: read-only at
	// the superblock, asserted from the kernel) and mounted at /package.
	// The caller supplies the emit (e.g. pkgwalk.Emit, which refuses
	// unless the source is the pinned bpkg); Package must be empty.
	PackageEmit func(dir string) error
	// PackageBytes sizes the sealed tmpfs (default 256 MiB).
	PackageBytes int64
	// Allow is the egress allowlist; empty means no network at all (only
	// lo, no routes).
	Allow []Endpoint
	// Memory is the memory limit in bytes (no swap beyond it).
	Memory int64
	// Pids is the maximum number of tasks in the container.
	Pids int64
	// CPUs is the CPU quota in CPUs (1.5 = 150 ms per 100 ms period).
	CPUs float64
	// Timeout is the wall-clock limit; the whole container is killed when
	// it expires.
	Timeout time.Duration
	// Seal, if set, is probed from the candidate's vantage before the
	// command starts; Control is the positive control (required when Allow
	// is not empty and Seal is set).
	Seal    *netip.AddrPort
	Control *netip.AddrPort
	// packageView is the sealed view Exec made of PackageEmit.
	packageView string
	// StateDir holds one directory per run, on which the run mounts a
	// private tmpfs for the container's root and state; default
	// /run/cleanroom-sandbox.
	StateDir string
	// Binds are host paths (a directory or a regular file: an agent's
	// installation, the relay binary) bound read-only, nosuid and nodev
	// at a destination under /opt.
	Binds []Bind
	// Vantage, if set, is called by Exec once the candidate's network
	// namespace has passed its check (and the seal probe), before the
	// command starts, with a function that opens listeners inside that
	// namespace (on its loopback or in its abstract unix socket space:
	// it has no other link). The listeners are the caller's to close; a
	// Vantage error ends the run before the command starts.
	Vantage func(listen ListenFunc) error
	// Inspect, with a Workspace, sees every entry of the workspace in the
	// post-run walk (the scrub's, once every process of the candidate is
	// gone and the entry's set-id bits are stripped), by its parent's
	// descriptor, name, relative path and lstat: a caller that reads the
	// workspace after the run (amber run hashes it and judges what the
	// evaluator would read) walks it no second time. Result.Walked says
	// whether the walk went over every entry.
	Inspect func(dirfd int, name, rel string, st *unix.Stat_t)
}

// Bind is one read-only bind of Config.Binds.
type Bind struct {
	Source      string // absolute, clean host path; a symlink is refused
	Destination string // absolute, clean, under /opt
}

// ListenFunc opens a listener (net.Listen's arguments) inside the
// candidate's network namespace.
type ListenFunc func(network, address string) (net.Listener, error)

// Defaults used by the CLI and filled in by Exec for zero values.
const (
	DefaultMemory   = 2 << 30
	DefaultPids     = 512
	DefaultCPUs     = 1.0
	DefaultTimeout  = 10 * time.Minute
	DefaultStateDir = "/run/cleanroom-sandbox"
)

func (c *Config) withDefaults() Config {
	d := *c
	if d.Memory == 0 {
		d.Memory = DefaultMemory
	}
	if d.Pids == 0 {
		d.Pids = DefaultPids
	}
	if d.CPUs == 0 {
		d.CPUs = DefaultCPUs
	}
	if d.Timeout == 0 {
		d.Timeout = DefaultTimeout
	}
	if d.StateDir == "" {
		d.StateDir = DefaultStateDir
		if r := rootless(); r.on {
			d.StateDir = RootlessStateDir(r.hostUID)
		}
	}
	if d.PackageEmit != nil && d.PackageBytes == 0 {
		d.PackageBytes = 256 << 20
	}
	return d
}

func (c *Config) validate() error {
	if len(c.Args) == 0 || c.Args[0] == "" {
		return fmt.Errorf("%w: no command", errConfig)
	}
	for _, e := range c.Env {
		// runc#4340: libcontainer's init reads _LIBCONTAINER_* from its
		// environment; a candidate-supplied one could steer the init.
		if strings.HasPrefix(e, "_LIBCONTAINER_") || !strings.Contains(e, "=") {
			return fmt.Errorf("%w: environment entry %q refused", errConfig, e)
		}
	}
	stateDir, err := filepath.Abs(c.StateDir)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errStateRoot, c.StateDir, err)
	}
	// The paths to bind are the checked ones, with their parents' links
	// resolved (CheckHostDir).
	for _, dir := range []*string{&c.Workspace, &c.Package} {
		if *dir == "" {
			continue
		}
		role := "workspace"
		if dir == &c.Package {
			role = "package"
		}
		if *dir, err = CheckHostDir(role, *dir, stateDir); err != nil {
			return err
		}
	}
	if c.Memory < 16<<20 {
		return fmt.Errorf("%w: memory %d bytes: below 16 MiB", errConfig, c.Memory)
	}
	if c.Pids < 1 {
		return fmt.Errorf("%w: pids %d: want at least 1", errConfig, c.Pids)
	}
	if c.CPUs < 0.01 {
		return fmt.Errorf("%w: cpus %v: want at least 0.01", errConfig, c.CPUs)
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("%w: timeout %v: want a positive duration", errConfig, c.Timeout)
	}
	if c.PackageEmit != nil && c.Package != "" {
		return fmt.Errorf("%w: package and package emit are exclusive", errConfig)
	}
	seen := map[string]bool{}
	for _, b := range c.Binds {
		// Only under /opt: a bind over /usr, /etc or /proc would replace
		// what the isolation relies on.
		if !filepath.IsAbs(b.Source) || filepath.Clean(b.Source) != b.Source || !strings.HasPrefix(b.Destination, "/opt/") ||
			filepath.Clean(b.Destination) != b.Destination || seen[b.Destination] {
			return fmt.Errorf("%w: bind %q to %q: want an absolute clean source and a distinct clean destination under /opt", errConfig, b.Source, b.Destination)
		}
		seen[b.Destination] = true
		fi, err := os.Lstat(b.Source)
		if err != nil {
			return fmt.Errorf("%w: bind: %w", errConfig, err)
		}
		// A symlink would be followed by the bind mount.
		if !fi.IsDir() && !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: bind %q: not a directory or regular file (symlinks are refused)", errConfig, b.Source)
		}
	}
	if c.Seal != nil && len(c.Allow) > 0 && c.Control == nil {
		return fmt.Errorf("%w: an allowlisted run with a seal probe needs a positive control", errConfig)
	}
	return nil
}

// Stdio connects the command's standard streams. A nil Stdin reads from
// /dev/null; nil writers discard. Whatever they are (an *os.File too), the
// candidate gets pipes this process copies (see streams): at most Limit
// bytes of each output (0: DefaultOutputLimit), with terminal control
// sequences neutralised when the writer is a terminal.
type Stdio struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Limit  int64
}

// Status values of a Result.
const (
	StatusExited   = "exited"   // the command exited; ExitCode is its status
	StatusSignaled = "signaled" // killed by a signal (not the timeout, not OOM)
	StatusTimeout  = "timeout"  // the wall-clock limit killed the container
	StatusOOM      = "oom"      // the memory limit's OOM killer killed a task
)

// Result is the outcome of one Exec.
type Result struct {
	ID        string          `json:"id"`
	Status    string          `json:"status"`
	ExitCode  int             `json:"exit_code"`
	Signal    string          `json:"signal,omitempty"`
	Isolation *IsolationCheck `json:"isolation_check"`
	SealProbe *ProbeResult    `json:"seal_probe,omitempty"`
	// PackageSeal is the kernel's word on the sealed /package (with
	// PackageEmit only).
	PackageSeal *seal.Assertion `json:"package_seal,omitempty"`
	// HostUID is the candidate's uid as the host sees it (read from
	// /proc/PID/status of its first process before the command started):
	// CandidateUID (rootless: the user's own uid), never 0.
	HostUID int `json:"host_uid"`
	// Workspace lists what the post-run walk of the workspace found: set-id
	// bits it stripped, FIFOs, sockets and devices the caller must refuse.
	Workspace []WorkspaceFinding `json:"workspace_findings,omitempty"`
	// Walked: the post-run walk went over every entry of the workspace
	// (Config.Inspect saw each).
	Walked bool `json:"-"`
	// Truncated names the output streams cut at Stdio.Limit.
	Truncated []string `json:"truncated,omitempty"`
}

// Exec runs cfg.Args in a fresh candidate container and waits for it. The
// network namespace is created and verified (and the seal probed, if
// cfg.Seal is set) before the command starts; a failed check returns
// ErrIsolation or ErrSealProbe with the Result holding the record, and the
// command never runs. Cancelling ctx kills the container.
func Exec(ctx context.Context, cfg Config, stdio Stdio) (_ *Result, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := rootlessAllows(cfg); err != nil {
		return nil, err
	}
	id, err := newID()
	if err != nil {
		return nil, err
	}
	res := &Result{ID: id}
	// Until the container's init is in its cgroups: the kernel's grace
	// period for the attach is spent while the namespace is built and
	// checked (see package cgprime).
	stopPriming := cgprime.Start()
	defer stopPriming()
	stateDir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errStateRoot, cfg.StateDir, err)
	}
	bundle, endRun, err := startRun(stateDir, id)
	if err != nil {
		return nil, err
	}
	defer endRun()

	ns, cleanup, err := prepareVantage(ctx, id, cfg.Allow, cfg.Seal, cfg.Control, &res.Isolation, &res.SealProbe)
	if cleanup != nil {
		defer cleanup()
	}
	if err != nil {
		return res, err
	}

	if cfg.Vantage != nil {
		listen := func(network, address string) (l net.Listener, err error) {
			err = inNetNS(ns, func() error { l, err = net.Listen(network, address); return err })
			return l, err
		}
		if err := cfg.Vantage(listen); err != nil {
			return res, fmt.Errorf("in the candidate's network namespace: %w", err)
		}
	}

	rootfs, err := prepareRootfs(bundle, cfg.Package != "" || cfg.PackageEmit != nil, false, cfg.Binds)
	if err != nil {
		return nil, err
	}
	if cfg.PackageEmit != nil {
		view, unmount, err := sealPackage(bundle, cfg.PackageBytes, cfg.PackageEmit, &res.PackageSeal)
		if unmount != nil {
			defer unmount()
		}
		if err != nil {
			return res, err
		}
		// The view lies in the state root: it is cleanroom's, not a host
		// directory the path rules judge.
		cfg.packageView, cfg.PackageEmit = view, nil
	}
	nsPath := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(ns))
	spec, err := cfg.Spec(rootfs, nsPath, id)
	if err != nil {
		return nil, err
	}
	lc, err := toLibcontainer(spec, id)
	if err != nil {
		return nil, err
	}
	// If this process dies, the kernel kills the container's init (and
	// with it the whole PID namespace). PDEATHSIG follows the OS thread
	// that forked the init, not the process: keep this goroutine on one
	// thread from the start until Exec returns, so no thread exit fires
	// it early.
	lc.ParentDeathSignal = int(unix.SIGKILL)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// libcontainer's state (state.json, exec.fifo) lives in the bundle's
	// tmpfs too: one run, one directory, nothing shared between runs.
	if cfg.Workspace != "" {
		// The candidate is CandidateUID on the host: the workspace must be
		// its to write.
		if err := giveWorkspace(cfg.Workspace); err != nil {
			return nil, err
		}
		// Runs after the container is destroyed (deferred before it):
		// every process of the candidate is gone by then.
		defer func() {
			found, err := scrubWorkspace(cfg.Workspace, cfg.Inspect)
			res.Workspace, res.Walked = found, err == nil
			if err != nil {
				fmt.Fprintf(orDiscard(stdio.Stderr), "cleanroom sandbox: %v\n", err)
			}
		}()
	}
	sio, err := newStreams(stdio)
	if err != nil {
		return nil, err
	}
	// After the container is destroyed: the copies end when its last
	// process does.
	defer func() { res.Truncated = sio.wait() }()
	c, err := libcontainer.Create(filepath.Join(bundle, "state"), id, lc)
	if err != nil {
		return nil, fmt.Errorf("creating container: %w", err)
	}
	defer func() {
		// A container not destroyed keeps its processes and cgroup: the
		// run must not read as ended cleanly.
		if derr := c.Destroy(); derr != nil && err == nil {
			err = fmt.Errorf("destroying container: %w", derr)
		}
	}()

	p := processFor(spec)
	p.Stdout, p.Stderr = sio.stdout, sio.stderr
	if sio.stdin != nil {
		p.Stdin = sio.stdin // else nil: exec.Cmd opens /dev/null
	}
	// Start leaves the container's init waiting on exec.fifo: the
	// command has not started yet while its namespace is compared.
	err = c.Start(p)
	sio.started()
	// The container's init is in its cgroups (or Start failed).
	stopPriming()
	if code, msg, ok := commandStatus(err); ok {
		// The sandbox stood; the command could not be run. That is the
		// command's outcome (a shell's 127 or 126), not an infrastructure
		// failure: a candidate whose entry point is missing has failed.
		fmt.Fprintf(orDiscard(stdio.Stderr), "cleanroom sandbox: %s\n", msg)
		res.Status, res.ExitCode = StatusExited, code
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("starting container: %w", err)
	}
	killed := make(chan struct{})
	var killOnce sync.Once
	kill := func() { killOnce.Do(func() { close(killed); _ = c.Signal(unix.SIGKILL) }) }
	// The network namespace the candidate runs in must be the one checked
	// (and probed): compare the namespace inodes. Its uid, as the host
	// sees it, must be the candidate's, never root.
	if st, err := c.State(); err != nil {
		kill()
		_, _ = p.Wait()
		return nil, fmt.Errorf("container state: %w", err)
	} else if err := sameNetNS(ns, st.InitProcessPid); err != nil {
		kill()
		_, _ = p.Wait()
		return res, err
	} else if res.HostUID, err = hostUID(st.InitProcessPid); err != nil {
		kill()
		_, _ = p.Wait()
		return res, err
	}
	if err := c.Exec(); err != nil {
		kill()
		_, _ = p.Wait()
		return nil, fmt.Errorf("starting the command: %w", err)
	}
	cgPaths := func() map[string]string {
		if st, err := c.State(); err == nil {
			return st.CgroupPaths
		}
		return nil
	}()

	tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	done := make(chan struct{})
	timedOut := false
	go func() {
		select {
		case <-tctx.Done():
			// With a private PID namespace, killing init kills every task.
			kill()
		case <-done:
		}
	}()
	ps, werr := p.Wait()
	close(done)
	select {
	case <-killed:
		timedOut = true
	default:
	}
	oom := oomKilled(cgPaths)
	switch {
	case timedOut && ctx.Err() != nil:
		// The caller cancelled (not our timeout): report it as an error.
		res.Status, res.ExitCode, res.Signal = StatusSignaled, 128+int(unix.SIGKILL), "SIGKILL"
		return res, ctx.Err()
	case timedOut:
		res.Status, res.ExitCode, res.Signal = StatusTimeout, ExitTimeout, "SIGKILL"
	case oom:
		res.Status, res.ExitCode = StatusOOM, ExitOOM
	case ps == nil:
		return nil, fmt.Errorf("waiting for container: %w", werr)
	default:
		ws, _ := ps.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			res.Status, res.ExitCode, res.Signal = StatusSignaled, 128+int(ws.Signal()), unix.SignalName(ws.Signal())
		} else {
			res.Status, res.ExitCode = StatusExited, ws.ExitStatus()
		}
	}
	return res, nil
}

// sealPackage emits the package into a sealed tmpfs under bundle and
// returns its path. The bundle lies under the private state root
// (privateStateRoot), so the view never propagates into other mount
// namespaces sharing the host's /run. unmount (non-nil once anything may be
// mounted) detaches the view.
func sealPackage(bundle string, size int64, emit func(string) error, rec **seal.Assertion) (string, func(), error) {
	view := filepath.Join(bundle, "package-view")
	if err := os.Mkdir(view, 0o755); err != nil {
		return "", nil, fmt.Errorf("package view: %w", err)
	}
	a, err := seal.Seal(view, size, emit)
	unmount := func() { _ = unix.Unmount(view, unix.MNT_DETACH) }
	if err != nil {
		return "", unmount, fmt.Errorf("%w: %w", ErrPackage, err)
	}
	*rec = a
	return view, unmount, nil
}

// prepareVantage creates the candidate's network namespace (lo only, or
// the allowlisted egress), runs the mechanism check and, if seal is set,
// the seal probe from it. The records are stored through iso and probe as
// soon as they exist, so a refusal still returns them. cleanup (non-nil
// once anything was created) removes the namespace and the egress.
func prepareVantage(ctx context.Context, id string, allow []Endpoint, seal, control *netip.AddrPort, iso **IsolationCheck, probe **ProbeResult) (netns.NsHandle, func(), error) {
	ns, err := newNetNS()
	if err != nil {
		return 0, nil, err
	}
	var eg *egress
	cleanup := func() {
		if eg != nil {
			eg.teardown()
		}
		ns.Close()
	}
	if len(allow) > 0 {
		if eg, err = setupEgress(id, ns, allow); err != nil {
			return 0, cleanup, err
		}
	} else if err := loopbackUp(ns); err != nil {
		return 0, cleanup, err
	}
	if *iso, err = CheckIsolation(ns, expectFor(allow, eg)); err != nil {
		return 0, cleanup, err
	}
	if !(*iso).Enforced {
		return 0, cleanup, fmt.Errorf("%w: %s", ErrIsolation, strings.Join((*iso).Problems, "; "))
	}
	// Both callers (Config.validate, ProbeVantage) have refused an
	// allowlisted probe without a positive control.
	if seal != nil {
		*probe = Probe(ctx, ns, ProbeConfig{Sealed: *seal, Control: control})
		if (*probe).TerminalState() != "" {
			return 0, cleanup, fmt.Errorf("%w: %s", ErrSealProbe, (*probe).Detail)
		}
	}
	return ns, cleanup, nil
}

// VantageReport is what `cleanroom sandbox probe` prints: the mechanism
// check and the seal probe from a candidate's vantage, and the terminal
// state they imply ("" when both passed).
type VantageReport struct {
	IsolationCheck *IsolationCheck `json:"isolation_check"`
	SealProbe      *ProbeResult    `json:"seal_probe"`
	TerminalState  string          `json:"terminal_state"`
}

// ProbeVantage sets up a candidate's network vantage exactly as Exec does
// (no container is started), checks it and probes sealed (and control)
// from it. The error wraps ErrIsolation or ErrSealProbe when the run would
// be invalid_infrastructure; the report is returned either way.
func ProbeVantage(ctx context.Context, allow []Endpoint, sealed netip.AddrPort, control *netip.AddrPort) (*VantageReport, error) {
	if len(allow) > 0 && control == nil {
		return nil, fmt.Errorf("%w: an allowlisted vantage needs a positive control", errConfig)
	}
	if err := rootlessAllows(Config{Allow: allow}); err != nil {
		return nil, err
	}
	id, err := newID()
	if err != nil {
		return nil, err
	}
	rep := &VantageReport{}
	_, cleanup, err := prepareVantage(ctx, id, allow, &sealed, control, &rep.IsolationCheck, &rep.SealProbe)
	if cleanup != nil {
		cleanup()
	}
	if errors.Is(err, ErrIsolation) || errors.Is(err, ErrSealProbe) {
		rep.TerminalState = TerminalInvalidInfrastructure
	}
	return rep, err
}

// Exit statuses `cleanroom sandbox exec` uses for the two outcomes that
// are not the command's own status.
const (
	ExitTimeout = 124 // as timeout(1)
	ExitOOM     = 125
)

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

func newID() (string, error) {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("container id: %w", err)
	}
	return "cr" + hex.EncodeToString(b), nil
}

// sameNetNS fails unless pid's network namespace is ns (same device and
// inode of the nsfs object).
func sameNetNS(ns netns.NsHandle, pid int) error {
	var a, b unix.Stat_t
	if err := unix.Fstat(int(ns), &a); err != nil {
		return fmt.Errorf("%w: %w", ErrNamespaceChanged, err)
	}
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/net", &b); err != nil {
		return fmt.Errorf("%w: %w", ErrNamespaceChanged, err)
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		return fmt.Errorf("%w: checked %d:%d, candidate in %d:%d", ErrNamespaceChanged, a.Dev, a.Ino, b.Dev, b.Ino)
	}
	return nil
}

// errHostRoot: the candidate's first process is not the sandbox's
// unprivileged uid on the host (the user namespace did not take).
var errHostRoot = errors.New("candidate is not the sandbox's unprivileged uid on the host")

// hostUID reads the real, effective, saved and file-system uids of pid
// from /proc, maps each through this process's own uid_map to the host's
// (the identity for host root; one level up in the rootless child), and
// requires all four to be the candidate's host uid — CandidateUID, or in
// rootless mode the user's own — and never 0.
func hostUID(pid int) (int, error) {
	want, self := CandidateUID, "/proc/self/uid_map"
	if r := rootless(); r.on {
		want = r.hostUID
	}
	maps, err := readIDMap(self)
	if err != nil {
		return -1, fmt.Errorf("%w: %w", errHostRoot, err)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1, fmt.Errorf("%w: %w", errHostRoot, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		for _, v := range f {
			id, err := strconv.ParseUint(v, 10, 32)
			host, mapped := outside(maps, id)
			// Host root is never the candidate, whatever the mode.
			if err != nil || !mapped || host != uint64(want) || host == 0 {
				return -1, fmt.Errorf("%w: uids %s (want host uid %d)", errHostRoot, strings.Join(f, " "), want)
			}
		}
		if len(f) == 4 {
			return want, nil
		}
	}
	return -1, fmt.Errorf("%w: no Uid line in /proc/%d/status", errHostRoot, pid)
}

// oomKilled reads the kernel's OOM-kill counter of the container's memory
// cgroup (v1 memory.oom_control, v2 memory.events).
func oomKilled(paths map[string]string) bool {
	for _, f := range []string{
		filepath.Join(paths["memory"], "memory.oom_control"),
		filepath.Join(paths[""], "memory.events"),
	} {
		if !filepath.IsAbs(f) {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok && k == "oom_kill" && strings.TrimSpace(v) != "0" {
				return true
			}
		}
	}
	return false
}

// initFailure is how libcontainer words a failure of the container's init;
// the init reports it to the parent as text only (no error type survives
// the sync pipe), so the command's own failures are recognised by form.
const initFailure = "error during container init: "

// commandStatus maps a container start that failed because the command
// could not be run to the status a shell gives: 127 when the init's
// os/exec.LookPath did not find it (`exec: "NAME": …` with ENOENT or
// exec.ErrNotFound), 126 when it was found but could not be executed (a
// LookPath permission error, or the execve's own `exec PATH: ERRNO`). It
// returns the init's message for the caller's stderr.
func commandStatus(err error) (code int, msg string, ok bool) {
	if err == nil {
		return 0, "", false
	}
	s := err.Error()
	i := strings.LastIndex(s, initFailure)
	if i < 0 {
		return 0, "", false
	}
	msg = s[i+len(initFailure):]
	switch {
	case strings.HasPrefix(msg, "exec: ") && (strings.HasSuffix(msg, unix.ENOENT.Error()) || strings.HasSuffix(msg, exec.ErrNotFound.Error())):
		return 127, msg, true
	case strings.HasPrefix(msg, "exec: "), strings.HasPrefix(msg, "exec /"):
		return 126, msg, true
	}
	return 0, "", false
}
