package agentroom

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cleanroom-dev/cleanroom/harness"
	"github.com/cleanroom-dev/cleanroom/internal/capbuf"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/sandbox"
)

// HomePath is where the operator's HOME template (Options.Home) is bound
// read-only; its contents are copied into the agent's fresh HOME before
// the agent starts.
const HomePath = "/opt/cleanroom/home"

// AgentHome is the agent's HOME and working directory in the sandbox: a
// fresh, empty tmpfs (the sandbox's /workspace, which room agent never
// binds to a host directory).
const AgentHome = "/workspace"

// Options configure one room agent session.
type Options struct {
	// Room is the sealed room the agent reaches through the relay; its
	// Transcript is required (the record is the point of the session).
	Room harness.ServeOptions
	// Command is the agent command, resolved inside the sandbox.
	Command []string
	// Env is the agent's environment beyond the proxy variables: NAME=VALUE
	// entries the operator named (--env).
	Env []string
	// Allow is the egress allowlist by host name and port.
	Allow []HostPort
	// Resolve maps allowlisted names to addresses instead of a lookup.
	Resolve map[string]netip.Addr
	// Binds are the operator's read-only binds (the agent's installation).
	Binds []sandbox.Bind
	// Home, if set, is a host directory copied into the fresh HOME.
	Home string
	// Relay is the host path of the relay binary (this program).
	Relay string
	// Timeout, Memory, Pids and CPUs bound the agent's sandbox (zero:
	// the sandbox's defaults, and DefaultTimeout).
	Timeout time.Duration
	Memory  int64
	Pids    int64
	CPUs    float64
	// StateDir is the sandbox's state root ("" = its default).
	StateDir string
	// Stdout and Stderr receive the agent's streams; Stderr also the
	// room's diagnostics and one line per proxied connection.
	Stdout, Stderr io.Writer
	// stopGrace replaces roomStopGrace (tests).
	stopGrace time.Duration
}

// DefaultTimeout is the wall-clock limit of an agent session.
const DefaultTimeout = 4 * time.Hour

// Result is the outcome of a session.
type Result struct {
	Version     string
	Sandbox     *sandbox.Result
	Connections []Connection
	// RelayConnections counts the agent's connections to the relay
	// socket; only the first the room started on is the room's, the
	// others were closed. RelayRefused counts those closed because their
	// first message was not a relay's (see relayHandshake).
	RelayConnections int
	RelayRefused     int
	// RelayMode is how the room got the agent's MCP stream: "handed" (the
	// relay's stdin and stdout), "copied" (the relay copying to its
	// connection), or "" (the agent never reached it).
	RelayMode string
	// RoomEnded is "" when the room ended by itself with the agent's
	// sandbox, "stopped" or "killed" when room agent had to end it
	// (roomStopGrace).
	RoomEnded string
	// RoomExit is the room's exit status (0: it ended cleanly).
	RoomExit int
}

// errAgentOptions: the options are unusable (the error names which).
var errAgentOptions = fault.New(fault.Unusable, "room agent options")

// proxyEnv points the common proxy variables at the in-namespace proxy
// (lower- and upper-case spellings: tools read one or the other).
func proxyEnv() []string {
	u := "http://" + ProxyAddress
	return []string{"HTTPS_PROXY=" + u, "https_proxy=" + u, "HTTP_PROXY=" + u, "http_proxy=" + u, "ALL_PROXY=" + u, "all_proxy=" + u, "NO_PROXY=", "no_proxy="}
}

func (o *Options) check() error {
	if len(o.Command) == 0 || o.Command[0] == "" {
		return fmt.Errorf("%w: no agent command", errAgentOptions)
	}
	if o.Room.Transcript == "" {
		return fmt.Errorf("%w: a transcript is required", errAgentOptions)
	}
	if o.Relay == "" || !filepath.IsAbs(o.Relay) {
		return fmt.Errorf("%w: relay binary %q: want an absolute path", errAgentOptions, o.Relay)
	}
	for _, b := range o.Binds {
		// The relay and the HOME template have their own places.
		if b.Destination == "/opt/cleanroom" || strings.HasPrefix(b.Destination, "/opt/cleanroom/") {
			return fmt.Errorf("%w: bind destination %s: /opt/cleanroom is room agent's", errAgentOptions, b.Destination)
		}
	}
	for _, e := range o.Env {
		name, _, _ := strings.Cut(e, "=")
		// The proxy variables are room agent's: an agent told to use
		// another proxy would only fail, but the record would not say so.
		for _, p := range proxyEnv() {
			if pn, _, _ := strings.Cut(p, "="); strings.EqualFold(pn, name) {
				return fmt.Errorf("%w: --env %s: the proxy variables are set by room agent", errAgentOptions, name)
			}
		}
		if name == "HOME" || name == "PATH" {
			return fmt.Errorf("%w: --env %s: set by the sandbox", errAgentOptions, name)
		}
	}
	return nil
}

// sandboxConfig is the agent's sandbox: no host directory but the binds,
// a fresh tmpfs as HOME and working directory, only lo.
func (o *Options) sandboxConfig(args []string) sandbox.Config {
	binds := append([]sandbox.Bind{{Source: o.Relay, Destination: RelayPath}}, o.Binds...)
	if o.Home != "" {
		binds = append(binds, sandbox.Bind{Source: o.Home, Destination: HomePath})
	}
	timeout := o.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	return sandbox.Config{
		Args:     args,
		Env:      append(proxyEnv(), o.Env...),
		Binds:    binds,
		Timeout:  timeout,
		Memory:   o.Memory,
		Pids:     o.Pids,
		CPUs:     o.CPUs,
		StateDir: o.StateDir,
	}
}

// Run checks the room (a preflight: the same sealed room on an empty
// session, in a scratch directory), starts the agent in its sandbox with
// the proxy and the relay listening in the sandbox's network namespace,
// starts the room on the first relay handshake (relayHandshake: the
// relay's own stdin and stdout handed over, or the connection itself; no
// copy in room agent either way), waits for the agent and the room (at
// most roomStopGrace twice beyond the sandbox), and appends the agent
// line to the transcript.
// An agent that never connected gets a room session with no call, so
// that the record exists either way.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	// The agent's stderr, the room's diagnostics and the proxy's lines
	// are written from several goroutines: one writer, one at a time.
	o.Stdout, o.Stderr = orDiscard(o.Stdout), &lockedWriter{w: orDiscard(o.Stderr)}
	for _, p := range []string{o.Room.Workspace, o.Room.Transcript} {
		// The room refuses these too, but only once the agent has
		// started: an agent must not run for nothing.
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s exists (or cannot be checked: %v); the room creates it", errAgentOptions, p, err)
		}
	}
	if err := preflight(ctx, o); err != nil {
		return nil, fmt.Errorf("the room: %w", err)
	}
	res := &Result{Version: version(ctx, o)}

	proxy := &Proxy{Allow: o.Allow, Resolve: o.Resolve, Log: func(c Connection) {
		fmt.Fprintf(o.Stderr, "cleanroom room agent: %s %s:%d out %d in %d %s\n", c.Outcome, c.Host, c.Port, c.BytesOut, c.BytesIn, c.Rule)
	}}
	var listeners []net.Listener
	var serving sync.WaitGroup // the accept loops and the relay handshakes
	var mu sync.Mutex
	var roomDone chan error // set when the room starts
	// The room is not cancelled with ctx: it ends when the agent's sandbox
	// has ended (its stdin, the agent's end of the relay, is closed with
	// it) and writes its end line; a SIGINT or SIGTERM is passed on to it
	// by Serve, and so is a close of stop (see roomStopGrace).
	roomCtx, killRoom := context.WithCancel(context.WithoutCancel(ctx))
	defer killRoom()
	stop := make(chan struct{})
	room := o.Room
	room.Stop = stop
	// startRoom starts the room on stdin and stdout unless it has started
	// already (one room, one MCP session: a later connection gets nothing)
	// and reports whether it did. conn is closed when the room has ended
	// (a relay that handed its stdio over waits for that).
	startRoom := func(stdin, stdout *os.File, conn net.Conn, mode string) bool {
		mu.Lock()
		defer mu.Unlock()
		if roomDone != nil {
			return false
		}
		res.RelayMode = mode
		roomDone = make(chan error, 1)
		go func() {
			err := harness.Serve(roomCtx, room, stdin, stdout, o.Stderr)
			stdin.Close()
			stdout.Close()
			conn.Close()
			roomDone <- err
		}()
		return true
	}
	cfg := o.sandboxConfig(o.command())
	cfg.Vantage = func(listen sandbox.ListenFunc) error {
		pl, err := listen("tcp", ProxyAddress)
		if err != nil {
			return fmt.Errorf("proxy listener: %w", err)
		}
		listeners = append(listeners, pl)
		rl, err := listen("unix", RelaySocket)
		if err != nil {
			return fmt.Errorf("relay listener: %w", err)
		}
		listeners = append(listeners, rl)
		serving.Add(2)
		go func() { defer serving.Done(); proxy.Serve(pl) }()
		go func() {
			defer serving.Done()
			for {
				c, err := rl.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				res.RelayConnections++
				mu.Unlock()
				// Each handshake on its own: a connection that sends
				// nothing must not hold up the agent's relay.
				serving.Add(1)
				go func() {
					defer serving.Done()
					if err := relayHandshake(c.(*net.UnixConn), startRoom); err != nil {
						fmt.Fprintf(o.Stderr, "cleanroom room agent: relay connection closed: %v\n", err)
						mu.Lock()
						res.RelayRefused++
						mu.Unlock()
					}
				}()
			}
		}()
		return nil
	}
	sres, execErr := sandbox.Exec(ctx, cfg, sandbox.Stdio{Stdout: o.Stdout, Stderr: o.Stderr})
	res.Sandbox = sres
	for _, l := range listeners {
		l.Close()
	}
	// No connection is accepted after this: the counts are final.
	serving.Wait()
	proxy.Close()
	mu.Lock()
	if roomDone == nil {
		// The agent never reached the room: its session is recorded as
		// one with no call (the room on an empty stdin).
		roomDone = make(chan error, 1)
		roomDone <- harness.Serve(roomCtx, room, nil, io.Discard, o.Stderr)
	}
	done := roomDone
	mu.Unlock()
	// Every process of the sandbox is gone, the relay with it: the room's
	// stdin has ended, and the room ends its session.
	grace := o.stopGrace
	if grace == 0 {
		grace = roomStopGrace
	}
	ended, roomErr := waitRoom(done, stop, killRoom, grace)
	res.RoomEnded = ended
	res.Connections, _ = proxy.Connections()
	var ee *harness.ExitError
	switch {
	case errors.As(roomErr, &ee):
		// The room ran and ended with a status (the agent sent it what it
		// refuses, or its record failed): recorded on the agent line.
		res.RoomExit = ee.Code
	case ended == "killed":
		// The room ran and did not end on SIGTERM: its record has no end
		// line, and the agent line (room_ended) says why.
		res.RoomExit = -1
	case roomErr != nil:
		// No room ran: there is no record to append to.
		return res, fmt.Errorf("the room: %w", roomErr)
	}
	if aerr := harness.AppendAgentLine(o.Room.Transcript, o.agentLine(res, proxy)); aerr != nil {
		return res, aerr
	}
	if execErr != nil {
		return res, fmt.Errorf("the agent's sandbox: %w", execErr)
	}
	return res, nil
}

// preflight runs the room as the session will, on an empty stdin, with a
// workspace in a scratch directory that is removed afterwards: a package
// the room refuses, or a machine that cannot seal it, is found before
// the agent starts (and spends anything), by the room's own code.
func preflight(ctx context.Context, o Options) error {
	scratch, err := os.MkdirTemp("", "cleanroom-agent-preflight-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	pre := o.Room
	pre.Workspace, pre.Transcript = filepath.Join(scratch, "ws"), ""
	return harness.Serve(ctx, pre, nil, io.Discard, o.Stderr)
}

// command is what the sandbox runs: the agent command, after the HOME
// template (if any) is copied into the fresh HOME by the toolchain's own
// sh and cp.
func (o *Options) command() []string {
	if o.Home == "" {
		return o.Command
	}
	return append([]string{"/bin/sh", "-c", `cp -R "$0"/. "$HOME"/ && exec "$@"`, HomePath}, o.Command...)
}

// versionTimeout bounds the agent's --version run.
const versionTimeout = time.Minute

// version runs the agent command's first word with --version in a
// sandbox of its own (no proxy, no relay) and returns the first line of
// what it printed, or "" if it did not answer with status 0.
func version(ctx context.Context, o Options) string {
	cfg := o.sandboxConfig([]string{o.Command[0], "--version"})
	cfg.Timeout = versionTimeout
	out := capbuf.Buffer{Max: 4096}
	res, err := sandbox.Exec(ctx, cfg, sandbox.Stdio{Stdout: &out})
	if err != nil || res.Status != sandbox.StatusExited || res.ExitCode != 0 {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
	return strings.ToValidUTF8(strings.TrimSpace(line), "\uFFFD")
}

// agentLine is the transcript's "agent" line.
func (o *Options) agentLine(res *Result, p *Proxy) map[string]any {
	conns, dropped := p.Connections()
	list := make([]any, 0, len(conns))
	for _, c := range conns {
		e := map[string]any{"host": c.Host, "port": c.Port, "outcome": c.Outcome,
			"start": c.Start.Format(time.RFC3339Nano), "end": c.End.Format(time.RFC3339Nano),
			"bytes_out": c.BytesOut, "bytes_in": c.BytesIn}
		if c.Address != "" {
			e["address"] = c.Address
		}
		if c.Rule != "" {
			e["rule"] = c.Rule
		}
		list = append(list, e)
	}
	command := make([]any, len(o.Command))
	for i, a := range o.Command {
		command[i] = strings.ToValidUTF8(a, "\uFFFD")
	}
	envNames := []any{}
	for _, e := range o.Env {
		name, _, _ := strings.Cut(e, "=")
		envNames = append(envNames, name)
	}
	allow := []any{}
	for _, a := range o.Allow {
		allow = append(allow, a.String())
	}
	resolve := map[string]any{}
	for h, a := range o.Resolve {
		resolve[h] = a.String()
	}
	binds := []any{}
	for _, b := range o.Binds {
		binds = append(binds, map[string]any{"source": b.Source, "destination": b.Destination})
	}
	line := map[string]any{
		"event": "agent", "time": time.Now().UTC().Format(time.RFC3339Nano),
		"command": command, "version": res.Version, "env_names": envNames,
		"allow_hosts": allow, "resolve": resolve, "binds": binds,
		"connections": list, "connections_not_recorded": dropped,
		"relay_connections": res.RelayConnections, "relay_refused": res.RelayRefused, "room_exit": res.RoomExit,
	}
	if res.RoomEnded != "" {
		line["room_ended"] = res.RoomEnded
	}
	if res.RelayMode != "" {
		line["relay_mode"] = res.RelayMode
	}
	if s := res.Sandbox; s != nil {
		sb := map[string]any{"id": s.ID, "status": s.Status, "exit_code": s.ExitCode}
		if s.Signal != "" {
			sb["signal"] = s.Signal
		}
		if s.Isolation != nil {
			sb["isolation_class"] = s.Isolation.IsolationClass
			sb["enforced"] = s.Isolation.Enforced
			links := []any{}
			for _, l := range s.Isolation.Links {
				links = append(links, l.Name)
			}
			sb["links"] = links
		}
		line["sandbox"] = sb
	}
	return line
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
