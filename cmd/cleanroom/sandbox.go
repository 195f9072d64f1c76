package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	// Its initialiser starts the cgroup attach priming early for
	// `sandbox exec` (see the package).
	_ "github.com/cleanroom-dev/cleanroom/cmd/cleanroom/internal/earlyprime"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sandbox"
	units "github.com/docker/go-units"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

func newSandboxCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "sandbox",
		Short: "The candidate sandbox: kernel check, isolated exec, network mechanism check, seal probe",
	}
	return c
}

func newSandboxCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Report what the kernel offers for the candidate sandbox (namespaces, cgroups) and what is missing",
		Long: `check reports the namespaces, user namespaces, cgroup version and cgroup
controllers of this machine, so an operator knows before a run whether the
candidate sandbox can be established, and in which mode for the user who
runs it: "root (cgroups)" for host root; "rootless (cgroups: delegated)" or
"rootless (cgroups: rlimits)" for another user where unprivileged user
namespaces work (tried, not assumed: a user, mount and network namespace
is made, a tmpfs sealed and lo brought up in it); "unavailable: REASON"
otherwise, naming the sysctl that forbids it (user.max_user_namespaces,
kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns).
It exits 3 and names every missing piece when it cannot.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := sandbox.CheckMode()
			if perr := printResult(cmd, rep, func(w io.Writer) { printKernelReport(w, rep) }); perr != nil {
				return perr
			}
			return err
		},
	}
}

func printKernelReport(w io.Writer, r *sandbox.KernelReport) {
	var ns []string
	for _, n := range []string{"mnt", "pid", "ipc", "uts", "net", "user", "cgroup", "time"} {
		mark := "yes"
		if !r.Namespaces[n] {
			mark = "no"
		}
		ns = append(ns, n+"="+mark)
	}
	fmt.Fprintf(w, "root:            %v\n", r.Root)
	switch r.Mode {
	case sandbox.ModeRoot:
		fmt.Fprintf(w, "mode:            root (cgroups)\n")
	case sandbox.ModeRootless:
		fmt.Fprintf(w, "mode:            rootless (cgroups: %s)\n", r.Limits)
	default:
		fmt.Fprintf(w, "mode:            %s: %s\n", r.Mode, r.Why)
	}
	if r.Mode != sandbox.ModeUnavailable {
		fmt.Fprintf(w, "why:             %s\n", r.Why)
	}
	fmt.Fprintf(w, "namespaces:      %s\n", strings.Join(ns, " "))
	fmt.Fprintf(w, "user namespaces: %v\n", r.UserNamespaces)
	fmt.Fprintf(w, "cgroup version:  %d\n", r.CgroupVersion)
	fmt.Fprintf(w, "controllers:     %s\n", strings.Join(r.Controllers, " "))
	fmt.Fprintf(w, "egress filter:   %v (nf_tables; needed only for --net allow:…)\n", r.EgressFilter)
	if len(r.Missing) == 0 {
		fmt.Fprintln(w, "sandbox:         can run here")
		return
	}
	for _, m := range r.Missing {
		fmt.Fprintf(w, "missing:         %s\n", m)
	}
}

// sandboxFlags are the flags shared by the commands that build a
// sandbox.Config.
type sandboxFlags struct {
	workspace, pkg, pkgID, netMode, memory, sealed, control, stateRoot string
	pids                                                               int64
	cpus                                                               float64
	timeout                                                            time.Duration
}

func (f *sandboxFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.workspace, "workspace", "", "host directory mounted read-write at /workspace (default: an empty tmpfs)")
	fl.StringVar(&f.pkg, "package", "", "package directory for /package (read-only)")
	fl.StringVar(&f.pkgID, "package-id", "", "the package's bpkg id: /package is then emitted from the manifest into a tmpfs sealed read-only at the superblock, as the clean room does (refused unless the directory is that bpkg); without it --package is a plain read-only bind")
	fl.StringVar(&f.netMode, "net", "none", "network: none, or allow:IP:PORT[,IP:PORT…] (literal addresses only)")
	fl.StringVar(&f.memory, "memory", "2G", "memory limit (no swap beyond it)")
	fl.Int64Var(&f.pids, "pids", sandbox.DefaultPids, "maximum number of tasks")
	fl.Float64Var(&f.cpus, "cpus", sandbox.DefaultCPUs, "CPU quota in CPUs")
	fl.DurationVar(&f.timeout, "timeout", sandbox.DefaultTimeout, "wall-clock limit; the whole container is killed when it expires")
	fl.StringVar(&f.sealed, "sealed", "", "probe this IP:PORT from the candidate's vantage before starting; the run is refused unless the connection fails at the transport layer")
	fl.StringVar(&f.control, "control", "", "positive control IP:PORT that must be reachable (required with --sealed for an allowlisted run)")
}

// config reads the flags into a sandbox configuration; a value a flag
// cannot take is an unusable argument (2), whatever rule it breaks.
func (f *sandboxFlags) config(args []string) (sandbox.Config, error) {
	cfg := sandbox.Config{Args: args, Workspace: f.workspace, Package: f.pkg, Pids: f.pids, CPUs: f.cpus, Timeout: f.timeout}
	if f.pkgID != "" {
		if f.pkg == "" {
			return cfg, fault.AsUnusable(errors.New("--package-id needs --package"))
		}
		src, id := f.pkg, f.pkgID
		cfg.Package = ""
		cfg.PackageEmit = func(dir string) error {
			// Emit refuses unless the walked source is the named bpkg.
			_, err := pkgwalk.Emit(context.Background(), src, dir, id, pkgwalk.EmitOptions{})
			return err
		}
	}
	mem, err := units.RAMInBytes(f.memory)
	if err != nil {
		return cfg, fault.AsUnusable(fmt.Errorf("--memory %q: %w", f.memory, err))
	}
	cfg.Memory = mem
	if cfg.Allow, err = parseNetMode(f.netMode); err != nil {
		return cfg, err
	}
	if f.sealed != "" {
		if cfg.Seal, err = addrPortFlag("--sealed", f.sealed); err != nil {
			return cfg, err
		}
	}
	if f.control != "" {
		if cfg.Control, err = addrPortFlag("--control", f.control); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// addrPortFlag parses the IP:PORT value of flag (--sealed, --control);
// another value is an unusable argument (2).
func addrPortFlag(flag, v string) (*netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(v)
	if err != nil {
		return nil, fault.AsUnusable(fmt.Errorf("%s %q: want IP:PORT: %w", flag, v, err))
	}
	return &ap, nil
}

// parseNetMode parses --net: "none" or "allow:IP:PORT,…". A value --net
// cannot take is an unusable argument (2), whatever rule it breaks.
func parseNetMode(s string) ([]sandbox.Endpoint, error) {
	if s == "none" {
		return nil, nil
	}
	list, ok := strings.CutPrefix(s, "allow:")
	if !ok || list == "" {
		return nil, fault.AsUnusable(fmt.Errorf("--net %q: want none or allow:IP:PORT[,IP:PORT…]", s))
	}
	var out []sandbox.Endpoint
	for _, item := range strings.Split(list, ",") {
		e, err := sandbox.ParseEndpoint(item)
		if err != nil {
			return nil, fault.AsUnusable(fmt.Errorf("--net: %w", err))
		}
		out = append(out, e)
	}
	// Refused before anything runs, each by its rule.
	if err := sandbox.CheckAllowlist(out); err != nil {
		return nil, fault.AsUnusable(fmt.Errorf("--net: %w", err))
	}
	return out, nil
}

func newSandboxExecCmd() *cobra.Command {
	var f sandboxFlags
	c := &cobra.Command{
		Use:         "exec [flags] -- CMD [ARG…]",
		Annotations: map[string]string{annotationStdout: stdoutStream},
		Short:       "Run a command in the candidate sandbox (no network unless allowlisted), streaming its output",
		Long: `exec runs CMD in a fresh candidate container: new user, mount, pid, ipc,
uts, cgroup and network namespaces; root inside, host uid 2147352576 outside;
a read-only root of the host's /usr, /bin, /sbin, /lib* and a minimal /etc;
tmpfs /tmp; the workspace read-write at /workspace; the package read-only at
/package; no capabilities, no_new_privs, a default-deny seccomp filter,
masked /proc paths, rlimits and cgroup limits (memory, pids, CPU). Its
standard streams are pipes exec copies (never this process's descriptors).

--workspace must be empty or one a previous run made its own, and neither
it nor --package may be a system tree or the state root (exit 2, the rule
named). After CMD, set-uid/set-gid bits in the workspace are stripped and
named; a FIFO, socket or device left there exits 1 (rule
workspace_special_file).

Before CMD starts, the network namespace is checked by mechanism (links,
routes in every table, policy rules, route lookups) and, with --sealed,
probed from the candidate's vantage. A failed check or probe refuses the
run (exit 1, the record on stderr).

Run by a user who is not root, exec runs rootless: it runs itself again in
a user namespace of its own and sets everything up there; the candidate is
that user's uid on the host, limited by a delegated cgroup v2 subtree or by
rlimits (--memory per process, --pids tasks; no CPU rate), --workspace must
be empty, and --net allow: is refused (exit 3). "sandbox check" says which
mode this machine gives you.

The exit status is CMD's own; 124 when the timeout killed the container,
125 when the memory limit's OOM killer did, 128+N for signal N. With
--json the run's record is printed on stderr when CMD ends.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if sandbox.NeedsRootless() {
				return runRootless(cmd)
			}
			if sandbox.InRootlessChild() && !cmd.Flags().Changed("state-root") {
				f.stateRoot = sandbox.RootlessStateDir(sandbox.RootlessHostUID())
			}
			cfg, err := f.config(args)
			if err != nil {
				return err
			}
			cfg.StateDir = f.stateRoot
			// The candidate gets write access to --workspace: only an empty
			// directory, or one a run made its own, outside system trees
			// and the state root.
			if f.workspace != "" {
				if err := sandbox.CheckNewWorkspace(f.workspace, f.stateRoot); err != nil {
					return err
				}
			}
			if f.pkgID != "" {
				// The emit's source is read on the host: the same rules as a
				// plain --package bind.
				if _, err := sandbox.CheckHostDir("package", f.pkg, f.stateRoot); err != nil {
					return err
				}
			}
			if _, err := sandbox.CheckKernel(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, unix.SIGTERM)
			defer stop()
			// The harness's terminal never reaches the candidate (TIOCSTI
			// could push input into it): a TTY stdin becomes /dev/null.
			// Any other stdin reaches it through a pipe Exec copies into,
			// never as the descriptor itself.
			var stdin io.Reader = os.Stdin
			if term.IsTerminal(int(os.Stdin.Fd())) {
				stdin = nil
			}
			res, err := sandbox.Exec(ctx, cfg, sandbox.Stdio{Stdin: stdin, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()})
			refused := errors.Is(err, sandbox.ErrIsolation) || errors.Is(err, sandbox.ErrSealProbe) || errors.Is(err, sandbox.ErrNamespaceChanged)
			if res != nil && (jsonOutput(cmd) || refused) {
				printExecRecord(cmd, res)
			}
			switch {
			case refused:
				return fmt.Errorf("%w (terminal state %s)", err, sandbox.TerminalInvalidInfrastructure)
			case err != nil:
				return err
			}
			if res.Status != sandbox.StatusExited {
				fmt.Fprintf(cmd.ErrOrStderr(), "cleanroom: sandbox %s: %s\n", res.ID, res.Status)
			}
			for _, s := range res.Truncated {
				fmt.Fprintf(cmd.ErrOrStderr(), "cleanroom: sandbox %s: %s cut after %d bytes\n", res.ID, s, sandbox.DefaultOutputLimit)
			}
			for _, f := range res.Workspace {
				fmt.Fprintf(cmd.ErrOrStderr(), "cleanroom: sandbox %s: workspace %s (mode %s): rule %s\n", res.ID, f.Path, f.Mode, f.Rule)
			}
			if sandbox.WorkspaceRefused(res.Workspace) {
				// Whoever reads the workspace next would block on a FIFO or
				// read through a device: the run is refused, whatever the
				// command's own status.
				return fault.AsRefused(fmt.Errorf("sandbox %s: the workspace holds a FIFO, socket or device, or could not be walked whole (rules %s, %s; command status %d)", res.ID, sandbox.RuleSpecialFile, sandbox.RuleUnwalked, res.ExitCode))
			}
			if res.ExitCode != 0 {
				return fault.Status(res.ExitCode)
			}
			return nil
		},
	}
	f.register(c)
	c.Flags().StringVar(&f.stateRoot, "state-root", sandbox.DefaultStateDir, "where each run keeps its private tmpfs (see sandbox gc)")
	return c
}

// runRootless runs the command again in a user namespace of its own
// (rootless mode: not host root), where it sets up what host root would,
// and ends with the exit code that run ended with; the run itself has
// printed whatever it had to say.
func runRootless(cmd *cobra.Command) error {
	code, err := sandbox.EnterRootless(os.Args[1:])
	if err != nil {
		return err
	}
	if code != 0 {
		return fault.Status(code)
	}
	return nil
}

// printExecRecord writes the run's record to stderr (stdout carries the
// command's own output).
func printExecRecord(cmd *cobra.Command, res *sandbox.Result) {
	w := cmd.ErrOrStderr()
	if jsonOutput(cmd) {
		sub := *cmd
		sub.SetOut(w)
		_ = printResult(&sub, res, func(io.Writer) {})
		return
	}
	if res.Isolation != nil {
		printIsolation(w, res.Isolation)
	}
	if res.SealProbe != nil {
		printProbe(w, res.SealProbe)
	}
}

func printIsolation(w io.Writer, c *sandbox.IsolationCheck) {
	fmt.Fprintf(w, "isolation: %s, enforced=%v, default_route=%v\n", c.IsolationClass, c.Enforced, c.DefaultRoute)
	for _, l := range c.Links {
		fmt.Fprintf(w, "  link %s (%s) up=%v\n", l.Name, l.Type, l.Up)
	}
	for _, r := range c.Routes {
		fmt.Fprintf(w, "  route %s\n", r)
	}
	for _, r := range c.Rules {
		fmt.Fprintf(w, "  rule %s\n", r)
	}
	for _, g := range c.RouteGet {
		fmt.Fprintf(w, "  route get %s: %s\n", g.Target, g.Result)
	}
	for _, p := range c.Problems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
}

func printProbe(w io.Writer, p *sandbox.ProbeResult) {
	fmt.Fprintf(w, "seal probe %s: %s %s (%s)\n", p.SealedTarget, p.Outcome, p.Errno, p.Detail)
	if p.PositiveControl != nil {
		fmt.Fprintf(w, "positive control %s: %s\n", p.PositiveControl.Target, p.PositiveControl.Outcome)
	}
}

func newSandboxProbeCmd() *cobra.Command {
	var netMode, sealed, control string
	c := &cobra.Command{
		Use:   "probe --sealed IP:PORT [--control IP:PORT] [--net none|allow:…]",
		Short: "Probe the sealed store from a candidate's network vantage (and check that vantage by mechanism)",
		Long: `probe builds a candidate's network namespace exactly as exec does (only lo,
or the allowlisted egress), checks it by mechanism, and connects to the
sealed address from inside it. The probe passes only if the connection fails
at the transport layer (ENETUNREACH, EHOSTUNREACH, or ECONNREFUSED from the
candidate's own loopback). A completed handshake or any application answer
(401, 403, …) fails it; a timeout is inconclusive and fails it too. With an
allowlist, --control names an endpoint that must be reachable from the same
vantage. Exit 1 with terminal state invalid_infrastructure when the probe or
the check fails.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sandbox.NeedsRootless() {
				return runRootless(cmd)
			}
			allow, err := parseNetMode(netMode)
			if err != nil {
				return err
			}
			s, err := addrPortFlag("--sealed", sealed)
			if err != nil {
				return err
			}
			var ctl *netip.AddrPort
			if control != "" {
				if ctl, err = addrPortFlag("--control", control); err != nil {
					return err
				}
			}
			rep, err := sandbox.ProbeVantage(cmd.Context(), allow, *s, ctl)
			if rep != nil {
				if perr := printResult(cmd, rep, func(w io.Writer) {
					if rep.IsolationCheck != nil {
						printIsolation(w, rep.IsolationCheck)
					}
					if rep.SealProbe != nil {
						printProbe(w, rep.SealProbe)
					}
					if rep.TerminalState != "" {
						fmt.Fprintf(w, "terminal state: %s\n", rep.TerminalState)
					} else {
						fmt.Fprintln(w, "probe passed")
					}
				}); perr != nil {
					return perr
				}
			}
			return err
		},
	}
	c.Flags().StringVar(&netMode, "net", "none", "the vantage's network: none, or allow:IP:PORT[,IP:PORT…]")
	c.Flags().StringVar(&sealed, "sealed", "", "the sealed store's IP:PORT (required)")
	c.Flags().StringVar(&control, "control", "", "positive control IP:PORT (required with --net allow:…)")
	_ = c.MarkFlagRequired("sealed")
	return c
}

func newSandboxBundleCmd() *cobra.Command {
	var f sandboxFlags
	var out string
	c := &cobra.Command{
		Use:   "bundle --out DIR [flags] -- CMD [ARG…]",
		Short: "Write the candidate sandbox as an OCI runtime bundle (config.json + rootfs) for runc, crun, runsc…",
		Long: `bundle renders the same configuration exec runs as an OCI runtime bundle:
config.json (namespaces, read-only binds, tmpfs, the workspace, no
capabilities, no_new_privs, rlimits, cgroup limits, masked paths) and the
rootfs layout, for runc, crun and runsc alike (ociVersion 1.0.2, no "rro":
each mount below a read-only bind is bound read-only itself; give runsc
--network=none). The runtime creates the network namespace; the mechanism
check runs as a createRuntime hook ("cleanroom sandbox hook"), so a runtime
that honours hooks refuses to start a container whose namespace fails it,
and the hook's record is written to DIR/isolation_check.json. With --sealed
(and --control) the seal probe runs as a second createRuntime hook
("cleanroom sandbox seal-hook") from the container's network namespace,
its record in DIR/seal_probe.json; a probe that does not pass stops the
start. With --workspace, a poststop hook ("cleanroom sandbox scrub") gives the
workspace exec's post-run scrub once the container is deleted and writes
DIR/workspace_scrub.json: read the workspace only if that record says
"refused": false (a runtime only warns when a poststop hook fails), or run
"cleanroom sandbox scrub WORKSPACE" yourself after the runtime exits. Only
full isolation (--net none) can be rendered; the sealed package
(--package-id) is established by exec only. The bundle refers to this
binary and to the host paths by absolute path.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := f.config(args)
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			dir, err := filepath.Abs(out)
			if err != nil {
				return err
			}
			// Classed where made: a configuration a bundle cannot express and
			// an existing --out are unusable (2), as is a --out that cannot be
			// made; nothing here is a verdict on an input.
			if _, err := sandbox.WriteBundle(cfg, dir, exe); err != nil {
				return err
			}
			return printResult(cmd, map[string]any{"bundle": dir, "config": filepath.Join(dir, "config.json")}, func(w io.Writer) {
				fmt.Fprintf(w, "bundle written: %s (run with: runc run --bundle %s ID)\n", dir, dir)
			})
		},
	}
	f.register(c)
	c.Flags().StringVar(&out, "out", "", "the bundle directory to create (must not exist)")
	_ = c.MarkFlagRequired("out")
	return c
}

func newSandboxHookCmd() *cobra.Command {
	var record string
	var own bool
	c := &cobra.Command{
		Use:         "hook [--record FILE] [--own-netns]",
		Annotations: map[string]string{annotationStdout: stdoutStream},
		Short:       "OCI createRuntime hook: the mechanism check on the container's network namespace (state on stdin)",
		Long: `OCI createRuntime hook: the mechanism check on the container's network
namespace, named by the OCI state on stdin. With --own-netns it checks the
namespace it runs in instead and reads nothing: the first step of a
Kubernetes Job's command (exit 1 unless the pod is fully isolated).`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rec *sandbox.IsolationCheck
			var err error
			if own {
				rec, err = sandbox.RunOwnHook(record)
			} else {
				rec, err = sandbox.RunHook(cmd.InOrStdin(), record)
			}
			if rec != nil {
				printIsolation(cmd.ErrOrStderr(), rec)
			}
			return err
		},
	}
	c.Flags().StringVar(&record, "record", "", "write the isolation record here (create-exclusive)")
	c.Flags().BoolVar(&own, "own-netns", false, "check the network namespace this command runs in (no OCI state read)")
	return c
}

// demoSandbox is a demo stage (same signature as demoStages' entries):
// it runs one command in the candidate sandbox, with the mechanism check
// and a seal probe against a listener on the host's loopback, and
// reports what the kernel said from inside.
func demoSandbox(ctx context.Context, _ *demoEnv) (string, error) {
	if _, err := sandbox.CheckKernel(); err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	sealed := netip.MustParseAddrPort(ln.Addr().String())
	var out strings.Builder
	res, err := sandbox.Exec(ctx, sandbox.Config{
		Args: []string{"/bin/sh", "-c", `grep -E '^(CapEff|NoNewPrivs):' /proc/self/status | tr -d '\t'; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`},
		Seal: &sealed,
	}, sandbox.Stdio{Stdout: &out})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("the command exited %d", res.ExitCode)
	}
	inside := strings.Join(strings.Fields(out.String()), " ")
	return fmt.Sprintf("isolation %s enforced=%v; seal probe %s %s; inside: %s",
		res.Isolation.IsolationClass, res.Isolation.Enforced, res.SealProbe.Outcome, res.SealProbe.Errno, inside), nil
}
