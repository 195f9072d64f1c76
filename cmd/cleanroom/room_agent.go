package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom/agentroom"
	"github.com/cleanroom-dev/cleanroom/harness"
	"github.com/cleanroom-dev/cleanroom/harness/roomstage"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/sandbox"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func newRoomAgentCmd() *cobra.Command {
	var f roomFlags
	var allow, envNames, resolve, binds []string
	var home, stateRoot string
	var timeout time.Duration
	var memory int64
	c := &cobra.Command{
		Use:         "agent (--world DIR | --package DIR --expect bpkg-…) --workspace NEWDIR --transcript FILE [--allow-host HOST:PORT…] [--env NAME…] [--bind-ro SRC:/opt/DEST…] [--home DIR] -- AGENT-COMMAND…",
		Annotations: map[string]string{annotationStdout: stdoutStream},
		Short:       "Run any agent command agent-blind: in the sandbox, the room as its only MCP server, egress only to allowlisted hosts",
		Long: `Run AGENT-COMMAND in the candidate sandbox against a sealed room.

The agent gets a fresh, empty tmpfs as HOME and working directory (` + agentroom.AgentHome + `),
the host's toolchain read-only (/usr, /bin, /lib*), the directories bound
with --bind-ro (its installation) read-only under /opt, the environment
variables named with --env (their values taken from this process), and
nothing else of the host: no memory directories, no earlier sessions, no
credentials. With --home DIR, DIR's contents are copied into the fresh HOME
first (the agent's configuration: see docs/guides/implementer.md, section 6).

Its network namespace has only lo (checked before the agent starts). Two
listeners are opened in it: an HTTP CONNECT proxy on ` + agentroom.ProxyAddress + `
(HTTPS_PROXY and its spellings point there), which connects only to the
--allow-host names and ports, resolved on this host; and the abstract unix
socket ` + agentroom.RelaySocket + `, which the relay
(` + agentroom.RelayPath + ` ` + strings.Join(agentroom.RelayArgs, " ") + `, to be named as the agent's MCP server)
connects to the room, sealed outside the sandbox as "room serve" seals it.

The transcript (required) is the room's, with an "agent" line appended: the
command, its --version answer, every proxied or refused connection (host,
port, bytes each way, time) and the sandbox's record. Only what the agent
wrote through write_source survives, in --workspace.

--resolve HOST=ADDR maps an allowlisted name to an address instead of a
lookup (a local model server); a looked-up name is never dialled at a
loopback, link-local or multicast address.

Exit 0: the agent exited 0 and the room ended cleanly; 1: the agent exited
non-zero or was killed (timeout, memory), or the room refused the package;
2: unusable arguments; 3: the isolation could not be established here.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ro, err := f.options(cmd.Context())
			if err != nil {
				return err
			}
			if ro.Transcript == "" {
				return fault.AsUnusable(errors.New("--transcript is required: the record is the point of an agent session"))
			}
			o := agentroom.Options{Room: ro, Command: args, Timeout: timeout, Memory: memory, StateDir: stateRoot,
				Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
			for _, a := range allow {
				hp, err := agentroom.ParseHostPort(a)
				if err != nil {
					return fault.AsUnusable(fmt.Errorf("--allow-host %w", err))
				}
				o.Allow = append(o.Allow, hp)
			}
			for _, r := range resolve {
				h, a, ok := strings.Cut(r, "=")
				addr, err := netip.ParseAddr(a)
				if !ok || err != nil || h == "" {
					return fault.AsUnusable(fmt.Errorf("--resolve %q: want HOST=ADDR with a literal address", r))
				}
				if o.Resolve == nil {
					o.Resolve = map[string]netip.Addr{}
				}
				o.Resolve[strings.ToLower(h)] = addr.Unmap()
			}
			for _, name := range envNames {
				v, ok := os.LookupEnv(name)
				if !ok || name == "" || strings.Contains(name, "=") {
					return fault.AsUnusable(fmt.Errorf("--env %s: not set in this environment", name))
				}
				o.Env = append(o.Env, name+"="+v)
			}
			for _, b := range binds {
				src, dst, ok := strings.Cut(b, ":")
				if !ok {
					return fault.AsUnusable(fmt.Errorf("--bind-ro %q: want SRC:/opt/DEST", b))
				}
				if src, err = filepath.Abs(src); err != nil {
					return err
				}
				o.Binds = append(o.Binds, sandbox.Bind{Source: src, Destination: dst})
			}
			if home != "" {
				if o.Home, err = filepath.Abs(home); err != nil {
					return err
				}
			}
			if o.Relay, err = os.Executable(); err != nil {
				return fmt.Errorf("the relay binary: %w", err)
			}
			if o.Relay, err = filepath.EvalSymlinks(o.Relay); err != nil {
				return fmt.Errorf("the relay binary: %w", err)
			}
			if o.Room.Stage, err = harness.OpenStage(); err == nil {
				defer o.Room.Stage.Close()
			} else {
				o.Room.StageArgs = roomstage.Args
			}
			if _, err := sandbox.CheckKernel(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, unix.SIGTERM)
			defer stop()
			res, err := agentroom.Run(ctx, o)
			if res != nil && res.Sandbox != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "cleanroom room agent: agent %s (status %d), version %q, %d connections, transcript %s\n",
					res.Sandbox.Status, res.Sandbox.ExitCode, res.Version, len(res.Connections), ro.Transcript)
			}
			// The room's own status passes through; every other error
			// carries its class from where it was made.
			var ee *harness.ExitError
			if errors.As(err, &ee) {
				return fault.Status(ee.Code)
			}
			if err != nil {
				return err
			}
			if res.Sandbox.Status != sandbox.StatusExited || res.Sandbox.ExitCode != 0 {
				return fault.AsRefused(fmt.Errorf("the agent ended %s with status %d", res.Sandbox.Status, res.Sandbox.ExitCode))
			}
			return nil
		},
	}
	f.register(c)
	c.Flags().StringArrayVar(&allow, "allow-host", nil, "allow the agent to connect to HOST:PORT through the proxy (repeatable)")
	c.Flags().StringArrayVar(&envNames, "env", nil, "pass this environment variable to the agent (repeatable; e.g. its API key)")
	c.Flags().StringArrayVar(&resolve, "resolve", nil, "dial HOST at ADDR instead of looking it up (HOST=ADDR, repeatable)")
	c.Flags().StringArrayVar(&binds, "bind-ro", nil, "bind a host directory or file read-only at /opt/DEST (SRC:/opt/DEST, repeatable)")
	c.Flags().StringVar(&home, "home", "", "copy this directory's contents into the agent's fresh HOME (its configuration)")
	c.Flags().DurationVar(&timeout, "timeout", agentroom.DefaultTimeout, "wall-clock limit of the agent")
	c.Flags().Int64Var(&memory, "memory", sandbox.DefaultMemory, "memory limit of the agent's sandbox in bytes")
	c.Flags().StringVar(&stateRoot, "state-root", sandbox.DefaultStateDir, "the sandbox's state root")
	return c
}

func newRoomRelayCmd() *cobra.Command {
	return &cobra.Command{
		Use:         "relay",
		Annotations: map[string]string{annotationStdout: stdoutStream},
		Short:       "Inside a room agent sandbox: the agent's MCP server, relaying stdio to the sealed room",
		Long: `Run by an agent inside "room agent"'s sandbox as its MCP server (stdio): connects
to the room through the abstract unix socket ` + agentroom.RelaySocket + ` and hands it its
stdin and stdout when they are pipes or socket pairs (the room then reads and
writes them itself), or else copies stdin to the room and the room's answers
to stdout. Outside such a sandbox there is no room to reach.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The process's own stdin and stdout, not cobra's writers
			// (stdout is wrapped to count bytes): only descriptors can be
			// handed to the room.
			return agentroom.Relay(os.Stdin, os.Stdout)
		},
	}
}
