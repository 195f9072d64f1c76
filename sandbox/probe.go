package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Probe outcomes (seal_probe.outcome).
const (
	// ProbeSealed: the connection failed at the transport layer with an
	// accepted errno; nothing answered.
	ProbeSealed = "sealed"
	// ProbeAnswered: a TCP handshake completed (and whatever answered is
	// in Detail) — the seal is not physical.
	ProbeAnswered = "answered"
	// ProbeInconclusive: a timeout or an unexpected error; never a pass.
	ProbeInconclusive = "inconclusive"
)

// Positive-control outcomes.
const (
	ControlReachable   = "reachable"
	ControlUnreachable = "unreachable"
)

// TerminalInvalidInfrastructure is the AMBER terminal state of a run whose
// pre-start probe or mechanism check failed.
const TerminalInvalidInfrastructure = "invalid_infrastructure"

// ProbeConfig names what to probe.
type ProbeConfig struct {
	Sealed  netip.AddrPort
	Control *netip.AddrPort
	// Timeout bounds each connection attempt; default 3s.
	Timeout time.Duration
}

// ProbeResult is the seal_probe record of an AMBER run.
type ProbeResult struct {
	SealedTarget    string         `json:"sealed_target"`
	Outcome         string         `json:"outcome"`
	Errno           string         `json:"errno"`
	At              string         `json:"at"`
	PositiveControl *ControlResult `json:"positive_control,omitempty"`
	// Detail says what happened in words (not part of the record).
	Detail string `json:"-"`
}

// ControlResult is the positive control's outcome.
type ControlResult struct {
	Target  string `json:"target"`
	Outcome string `json:"outcome"`
}

// TerminalState is "" when the probe passed (sealed, and the positive
// control reachable if there is one), else invalid_infrastructure.
func (p *ProbeResult) TerminalState() string {
	if p.Outcome != ProbeSealed {
		return TerminalInvalidInfrastructure
	}
	if p.PositiveControl != nil && p.PositiveControl.Outcome != ControlReachable {
		return TerminalInvalidInfrastructure
	}
	return ""
}

// Probe attempts a TCP connection (and, if one completes, an HTTP request
// whose first reply bytes record what answered: an HTTP status line, or a
// TLS record) to the sealed address from
// inside ns, the candidate's network namespace, before the candidate
// starts. Only a transport-layer failure is a seal: ENETUNREACH,
// EHOSTUNREACH, EACCES/EPERM (a local filter), or ECONNREFUSED from a
// loopback address (the candidate's own lo: nothing listens). A refusal
// from any other address means a packet reached a host and came back, so
// the path exists: that is an answer, not a seal.
func Probe(ctx context.Context, ns netns.NsHandle, cfg ProbeConfig) *ProbeResult {
	if cfg.Timeout == 0 {
		cfg.Timeout = 3 * time.Second
	}
	res := &ProbeResult{SealedTarget: cfg.Sealed.String(), At: time.Now().UTC().Format(time.RFC3339)}
	err := inNetNS(ns, func() error {
		res.Outcome, res.Errno, res.Detail = probeSealed(ctx, cfg.Sealed, cfg.Timeout)
		if cfg.Control != nil {
			c := &ControlResult{Target: cfg.Control.String(), Outcome: ControlUnreachable}
			conn, err := dialFrom(ctx, *cfg.Control, cfg.Timeout)
			if err == nil {
				conn.Close()
				c.Outcome = ControlReachable
			} else {
				res.Detail += fmt.Sprintf("; positive control %s unreachable: %v", cfg.Control, err)
			}
			res.PositiveControl = c
		}
		return nil
	})
	if err != nil {
		res.Outcome, res.Errno, res.Detail = ProbeInconclusive, "", err.Error()
	}
	return res
}

// dialFrom connects on the calling (locked, in-namespace) thread: the
// socket is created by this goroutine's syscall, so it belongs to the
// candidate's namespace.
func dialFrom(ctx context.Context, ap netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	return d.DialContext(ctx, "tcp", ap.String())
}

func probeSealed(ctx context.Context, target netip.AddrPort, timeout time.Duration) (outcome, errno, detail string) {
	conn, err := dialFrom(ctx, target, timeout)
	if err != nil {
		var en syscall.Errno
		switch {
		case errors.As(err, &en) && (en == unix.ENETUNREACH || en == unix.EHOSTUNREACH || en == unix.EACCES || en == unix.EPERM):
			return ProbeSealed, unix.ErrnoName(en), fmt.Sprintf("connect %s: %v", target, err)
		case errors.As(err, &en) && en == unix.ECONNREFUSED && target.Addr().IsLoopback():
			return ProbeSealed, unix.ErrnoName(en), fmt.Sprintf("connect %s: refused by the candidate's own loopback", target)
		case errors.As(err, &en) && en == unix.ECONNREFUSED:
			return ProbeAnswered, unix.ErrnoName(en), fmt.Sprintf("connect %s: a remote host refused the connection: the network path exists", target)
		case errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
			// A blackhole or DROP times out while another port may get
			// through: not a seal.
			return ProbeInconclusive, "ETIMEDOUT", fmt.Sprintf("connect %s: timed out (inconclusive)", target)
		case errors.As(err, &en):
			return ProbeInconclusive, unix.ErrnoName(en), fmt.Sprintf("connect %s: %v (inconclusive)", target, err)
		default:
			return ProbeInconclusive, "", fmt.Sprintf("connect %s: %v (inconclusive)", target, err)
		}
	}
	// The TCP handshake completed: the probe has failed whatever comes
	// next. Record what answered (HTTP status line over plain TCP, else
	// whether TLS completed) for the operator.
	answer := readAnswer(conn, target, timeout)
	conn.Close()
	return ProbeAnswered, "", fmt.Sprintf("connect %s: TCP handshake completed; %s", target, answer)
}

// readAnswer sends a minimal HTTP request and reports the first line of
// the reply; if the server speaks TLS it reports the TLS handshake.
func readAnswer(conn net.Conn, target netip.AddrPort, timeout time.Duration) string {
	_ = conn.SetDeadline(time.Now().Add(timeout))
	fmt.Fprintf(conn, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", target.Addr())
	buf := make([]byte, 256)
	n, _ := conn.Read(buf)
	if n > 0 && buf[0] == 0x15 || n > 0 && buf[0] == 0x16 {
		return "a TLS server answered"
	}
	if n > 0 {
		line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
		return fmt.Sprintf("application answer %q", line)
	}
	return "no application bytes within the timeout"
}
