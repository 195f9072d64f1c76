package agentroom

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// Refusal rules of the proxy, recorded with each refused connection.
const (
	// errNotAllowed: the CONNECT target's host name and port are not on
	// the allowlist (compared as written, case-folded, before any lookup).
	errNotAllowed pkgwalk.Rule = "host not on the allowlist"
	// errNotConnect: only CONNECT is served; a request in absolute form
	// (plain HTTP through the proxy) is refused.
	errNotConnect pkgwalk.Rule = "only CONNECT is served"
	// errBadRequest: the request head could not be read as HTTP/1.
	errBadRequest pkgwalk.Rule = "malformed proxy request"
	// errAddressRefused: the name resolved only to addresses the proxy
	// never dials (loopback, unspecified, link-local, multicast) unless the
	// operator mapped the name with Resolve.
	errAddressRefused pkgwalk.Rule = "resolved address refused"
	// errUnreachable: the lookup or the dial failed.
	errUnreachable pkgwalk.Rule = "upstream unreachable"
)

// HostPort is one allowlist entry: a host name (or a literal address) and
// a TCP port.
type HostPort struct {
	Host string
	Port uint16
}

func (h HostPort) String() string { return net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port))) }

// ParseHostPort reads "host:port" ("[v6]:port" for an IPv6 literal). The
// host is case-folded; a trailing dot, an empty host, a wildcard and a port
// outside 1–65535 are refused.
func ParseHostPort(s string) (HostPort, error) {
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return HostPort{}, fmt.Errorf("%q: want HOST:PORT: %w", s, err)
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil || port == 0 {
		return HostPort{}, fmt.Errorf("%q: port %q: want 1-65535", s, p)
	}
	h = strings.ToLower(h)
	// A name is matched as written: a trailing dot or a wildcard would
	// make two spellings of one entry, or one entry of many hosts. Only a
	// DNS name's or an address's characters, at most 253 of them: the
	// name is recorded for every connection, and an agent must not grow
	// the record with its own bytes.
	if h == "" || len(h) > 253 || strings.HasSuffix(h, ".") || strings.Trim(h, "abcdefghijklmnopqrstuvwxyz0123456789.-_:") != "" {
		return HostPort{}, fmt.Errorf("%q: host %q: want a plain host name or address", s, h)
	}
	return HostPort{Host: h, Port: uint16(port)}, nil
}

// Connection is one CONNECT the proxy answered: allowed (Outcome
// "proxied", with the address dialled and the bytes each way) or refused
// (Outcome "refused", with the rule).
type Connection struct {
	Host     string    `json:"host"`
	Port     int       `json:"port"`
	Address  string    `json:"address,omitempty"`
	Outcome  string    `json:"outcome"`
	Rule     string    `json:"rule,omitempty"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	BytesOut int64     `json:"bytes_out"` // agent → upstream
	BytesIn  int64     `json:"bytes_in"`  // upstream → agent
}

// maxLogged bounds the connections kept for the transcript (one line,
// under the strict reader's 8 MiB: an entry is at most about 1,000 bytes
// encoded, a host name of 253 and a rule of maxRule); past it only the
// count grows.
const maxLogged = 4000

// maxRule bounds a recorded refusal's text (a dial error names every
// address tried).
const maxRule = 512

// maxActive bounds the connections open at once: each holds a descriptor
// and a goroutine of this process, and the agent must not exhaust them.
const maxActive = 256

// errTooMany: the agent has maxActive connections open already.
const errTooMany pkgwalk.Rule = "too many connections open"

// Proxy is an HTTP CONNECT proxy that dials only allowlisted host names
// and ports, resolved on the host. It serves the listeners Serve is given
// (the one room agent opens in the sandbox's network namespace) and dials
// from the namespace of the process it runs in.
type Proxy struct {
	// Allow is the allowlist.
	Allow []HostPort
	// Resolve maps a host name to the address dialled for it instead of
	// a lookup (an operator's local model server; the tests' stand-in
	// API on 127.0.0.1). A mapped address is dialled whatever it is.
	Resolve map[string]netip.Addr
	// DialTimeout bounds one lookup and dial (default 30 s).
	DialTimeout time.Duration
	// Log, if set, is called with each connection as it ends.
	Log func(Connection)
	// lookup resolves a name (net.DefaultResolver's LookupNetIP if nil;
	// the tests watch it).
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)

	mu      sync.Mutex
	open    int
	conns   []Connection
	dropped int
	wg      sync.WaitGroup
	active  sync.Map // net.Conn → struct{}: closed by Close
	closed  atomic.Bool
}

// Serve accepts connections on l until l is closed, each in its own
// goroutine.
func (p *Proxy) Serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		full := p.open >= maxActive
		if !full {
			p.open++
		}
		p.mu.Unlock()
		if full {
			// Refused without reading: closing is the whole answer.
			p.record(Connection{Start: time.Now().UTC(), Outcome: "refused", Rule: string(errTooMany)})
			c.Close()
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() { p.mu.Lock(); p.open--; p.mu.Unlock() }()
			p.handle(c)
		}()
	}
}

// Close ends every connection still open and waits for their records.
func (p *Proxy) Close() {
	p.closed.Store(true)
	p.active.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	p.wg.Wait()
}

// Connections returns the recorded connections (in the order they ended)
// and how many more were not kept.
func (p *Proxy) Connections() ([]Connection, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Connection{}, p.conns...), p.dropped
}

func (p *Proxy) record(c Connection) {
	c.End = time.Now().UTC()
	p.mu.Lock()
	if len(p.conns) < maxLogged {
		p.conns = append(p.conns, c)
	} else {
		p.dropped++
	}
	p.mu.Unlock()
	if p.Log != nil {
		p.Log(c)
	}
}

func (p *Proxy) track(c net.Conn) func() {
	p.active.Store(c, struct{}{})
	if p.closed.Load() {
		c.Close()
	}
	return func() { p.active.Delete(c); c.Close() }
}

// maxHead bounds the request head the proxy reads (a CONNECT head is a
// few hundred bytes): an agent cannot make it buffer more.
const maxHead = 16 << 10

func (p *Proxy) handle(c net.Conn) {
	defer p.track(c)()
	rec := Connection{Start: time.Now().UTC(), Outcome: "refused"}
	refuse := func(status int, rule pkgwalk.Rule, detail string) {
		rec.Rule = string(rule)
		if detail != "" {
			rec.Rule += ": " + detail
		}
		rec.Rule = clip(rec.Rule, maxRule)
		fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\ncleanroom proxy: %s\n", status, http.StatusText(status), rec.Rule)
		p.record(rec)
	}
	// The head must arrive promptly; an idle connection is not kept.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReaderSize(io.LimitReader(c, maxHead), 4096)
	req, err := http.ReadRequest(br)
	if err != nil {
		refuse(http.StatusBadRequest, errBadRequest, "")
		return
	}
	if req.Method != http.MethodConnect {
		if req.URL != nil {
			// Recorded as the agent named it (absolute form).
			rec.Host = clip(req.URL.Hostname(), maxHost)
			rec.Port, _ = strconv.Atoi(req.URL.Port())
			if rec.Port == 0 && req.URL.Scheme == "http" {
				rec.Port = 80
			}
		}
		refuse(http.StatusMethodNotAllowed, errNotConnect, req.Method)
		return
	}
	target, err := ParseHostPort(req.RequestURI)
	if err != nil {
		rec.Host = clip(req.RequestURI, maxHost)
		refuse(http.StatusBadRequest, errBadRequest, "target")
		return
	}
	rec.Host, rec.Port = target.Host, int(target.Port)
	if !p.allowed(target) {
		// Decided on the name as the agent wrote it, before any lookup:
		// a name off the list is never resolved (no DNS as a channel).
		refuse(http.StatusForbidden, errNotAllowed, "")
		return
	}
	upstream, addr, rule, err := p.dial(target)
	if err != nil {
		refuse(http.StatusBadGateway, rule, err.Error())
		return
	}
	defer p.track(upstream)()
	rec.Address, rec.Outcome = addr, "proxied"
	_ = c.SetReadDeadline(time.Time{})
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		p.record(rec)
		return
	}
	// Each direction is io.Copy between the two *net.TCPConn themselves,
	// unwrapped: the runtime splices (socket → pipe → socket, no copy
	// through this process); the bytes are counted from its result.
	var out, in int64
	done := make(chan struct{})
	go func() {
		// Bytes the agent sent after its head (a TLS hello) are in br;
		// they go first, then the connection itself.
		head, _ := br.Peek(br.Buffered())
		n, err := upstream.Write(head)
		if err == nil {
			var m int64
			m, _ = io.Copy(upstream, c)
			n += int(m)
		}
		atomic.AddInt64(&out, int64(n))
		closeWrite(upstream)
		close(done)
	}()
	n, _ := io.Copy(c, upstream)
	atomic.AddInt64(&in, n)
	closeWrite(c)
	<-done
	rec.BytesOut, rec.BytesIn = atomic.LoadInt64(&out), atomic.LoadInt64(&in)
	p.record(rec)
}

// maxHost bounds a recorded host the agent wrote that is not a valid
// target (a malformed target, a URL's host).
const maxHost = 128

// clip bounds a string before it is recorded: valid UTF-8 (the
// transcript's canonical JSON takes nothing else), at most n bytes, never
// ending inside a rune. An agent's bytes must not grow the record.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	c.Close()
}

func (p *Proxy) allowed(t HostPort) bool { return slices.Contains(p.Allow, t) }

// dial resolves t on the host (or through Resolve) and connects to the
// first address that answers. It returns the address dialled.
func (p *Proxy) dial(t HostPort) (net.Conn, string, pkgwalk.Rule, error) {
	timeout := p.DialTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var addrs []netip.Addr
	if a, ok := p.Resolve[t.Host]; ok {
		addrs = []netip.Addr{a}
	} else if a, err := netip.ParseAddr(t.Host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		lookup := p.lookup
		if lookup == nil {
			lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			}
		}
		found, err := lookup(ctx, t.Host)
		if err != nil {
			return nil, "", errUnreachable, fmt.Errorf("lookup %s: %w", t.Host, err)
		}
		for i, a := range found {
			a = a.Unmap()
			found[i] = a
			// A public name that resolves to this host's loopback (or
			// its link-local neighbours) would reach the sealed store
			// and every local service: such answers are dropped.
			if a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsLinkLocalMulticast() {
				continue
			}
			addrs = append(addrs, a)
		}
		if len(addrs) == 0 {
			return nil, "", errAddressRefused, fmt.Errorf("%s resolves to %v", t.Host, found)
		}
	}
	var d net.Dialer
	var errs []error
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a, t.Port).String()
		c, err := d.DialContext(ctx, "tcp", ap)
		if err == nil {
			return c, ap, "", nil
		}
		errs = append(errs, err)
	}
	return nil, "", errUnreachable, errors.Join(errs...)
}
