package agentroom

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestProxyBattery is the adversarial battery against room agent's
// CONNECT proxy (issue 19, rerun), on the host's loopback: the host's own
// services under every spelling of loopback, names that resolve (or
// rebind) onto loopback, link-local or unspecified addresses, targets in
// forms the allowlist might be matched against loosely, and request
// smuggling in the head. Each must be refused with its status and rule,
// and only the allowlisted name ever reaches the upstream.
func TestProxyBattery(t *testing.T) {
	var upstreamConns atomic.Int64
	up := serveLoopback(t, func(c net.Conn) {
		upstreamConns.Add(1)
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		fmt.Fprintf(c, "echo %s", line)
	})
	_, port, _ := net.SplitHostPort(up.Addr().String())
	p16 := mustPort(t, port)
	var lookups atomic.Int64
	p := &Proxy{
		Allow: []HostPort{
			{"mapped.test", p16}, {"mapped-v6.test", p16}, {"unspec.test", p16}, {"linklocal.test", p16},
			{"metadata.test", p16}, {"multicast.test", p16}, {"rebind.test", p16}, {"mixed.test", p16},
		},
		Resolve:     map[string]netip.Addr{"mapped.test": loopback},
		DialTimeout: 2 * time.Second,
		lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			n := lookups.Add(1)
			addrs := map[string][]string{
				"mapped-v6.test": {"::ffff:127.0.0.1"},
				"unspec.test":    {"0.0.0.0", "::"},
				"linklocal.test": {"fe80::1", "169.254.1.1"},
				"metadata.test":  {"169.254.169.254"},
				"multicast.test": {"224.0.0.1", "ff02::1"},
				"mixed.test":     {"::1", "127.0.0.2", "127.255.255.254"},
			}[host]
			if host == "rebind.test" {
				// A name that answers a harmless address once, then
				// loopback: the proxy must judge what it dials.
				addrs = []string{"127.0.0.1"}
				if n%2 == 1 {
					addrs = []string{"192.0.2.1"} // TEST-NET-1: unreachable
				}
			}
			var out []netip.Addr
			for _, a := range addrs {
				out = append(out, netip.MustParseAddr(a))
			}
			if out == nil {
				return nil, fmt.Errorf("no such host %s", host)
			}
			return out, nil
		},
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(l)
	defer func() { l.Close(); p.Close() }()
	send := func(raw string) (int, string) { return proxySend(t, l.Addr().String(), raw) }
	connect := func(target string) string { return "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n" }
	refused := func(status int, rule error) func(int, string) error {
		return func(s int, body string) error {
			if s != status || !strings.Contains(body, rule.Error()) {
				return fmt.Errorf("%d %q, want %d naming %q", s, body, status, rule)
			}
			return nil
		}
	}
	tunnelled := func(want string) func(int, string) error {
		return func(s int, body string) error {
			if s != 200 || body != want {
				return fmt.Errorf("%d %q, want 200 and %q through the tunnel", s, body, want)
			}
			return nil
		}
	}
	notAllowed := refused(http.StatusForbidden, errNotAllowed)
	badRequest := refused(http.StatusBadRequest, errBadRequest)
	addrRefused := refused(http.StatusBadGateway, errAddressRefused)
	cases := []struct {
		name, raw string
		check     func(int, string) error
	}{
		// The positive control.
		{"allowed", connect("mapped.test:" + port), tunnelled("echo ping\n")},
		// Loopback by every spelling: none is on the allowlist, so none
		// is ever resolved or dialled.
		{"127.0.0.1", connect("127.0.0.1:" + port), notAllowed},
		{"127.1", connect("127.1:" + port), notAllowed},
		{"decimal", connect("2130706433:" + port), notAllowed},
		{"hex", connect("0x7f000001:" + port), notAllowed},
		{"octal", connect("0177.0.0.1:" + port), notAllowed},
		{"::1", connect("[::1]:" + port), notAllowed},
		{"v4-mapped", connect("[::ffff:127.0.0.1]:" + port), notAllowed},
		{"long ::1", connect("[0:0:0:0:0:0:0:1]:" + port), notAllowed},
		{"localhost", connect("localhost:" + port), notAllowed},
		{"0.0.0.0", connect("0.0.0.0:" + port), notAllowed},
		{"::", connect("[::]:" + port), notAllowed},
		{"scoped v6", connect("[fe80::1%25lo]:" + port), badRequest},
		// Names on the allowlist that resolve where the proxy never dials.
		{"resolves v4-mapped loopback", connect("mapped-v6.test:" + port), addrRefused},
		{"resolves unspecified", connect("unspec.test:" + port), addrRefused},
		{"resolves link-local", connect("linklocal.test:" + port), addrRefused},
		{"resolves metadata address", connect("metadata.test:" + port), addrRefused},
		{"resolves multicast", connect("multicast.test:" + port), addrRefused},
		{"resolves all of 127/8 and ::1", connect("mixed.test:" + port), addrRefused},
		// DNS rebinding: each CONNECT is judged on the address it dials.
		{"rebind, first answer", connect("rebind.test:" + port), refused(http.StatusBadGateway, errUnreachable)},
		{"rebind, second answer", connect("rebind.test:" + port), addrRefused},
		// Other spellings of an allowlisted target.
		{"trailing dot", connect("mapped.test.:" + port), badRequest},
		{"percent-encoded", connect("mapped%2etest:" + port), badRequest},
		{"userinfo", connect("user@mapped.test:" + port), badRequest},
		{"absolute form", connect("http://mapped.test:" + port + "/"), badRequest},
		{"no port", connect("mapped.test"), badRequest},
		{"port +", connect("mapped.test:+" + port), badRequest},
		{"port out of range", connect("mapped.test:1" + port + "0000"), badRequest},
		{"second target", "CONNECT mapped.test:" + port + " evil.test:443 HTTP/1.1\r\n\r\n", badRequest},
		{"lower-case method", "connect mapped.test:" + port + " HTTP/1.1\r\n\r\n", refused(http.StatusMethodNotAllowed, errNotConnect)},
		{"plain GET", "GET http://mapped.test:" + port + "/ HTTP/1.1\r\nHost: mapped.test\r\n\r\n", refused(http.StatusMethodNotAllowed, errNotConnect)},
		// Smuggling: the Host header is not the target; bytes after an
		// allowed head are the tunnel's, not a second request; after a
		// refusal the connection is closed, a pipelined CONNECT unread.
		{"host header names another", "CONNECT evil.test:443 HTTP/1.1\r\nHost: mapped.test:" + port + "\r\n\r\n", notAllowed},
		{"host header ignored", "CONNECT mapped.test:" + port + " HTTP/1.1\r\nHost: evil.test:443\r\n\r\n", tunnelled("echo ping\n")},
		{"pipelined after allowed", "CONNECT mapped.test:" + port + " HTTP/1.1\r\n\r\nCONNECT evil.test:443 HTTP/1.1\r\n\r\n", tunnelled("echo CONNECT evil.test:443 HTTP/1.1\r\n")},
		{"pipelined after refused", "CONNECT evil.test:443 HTTP/1.1\r\n\r\nCONNECT mapped.test:" + port + " HTTP/1.1\r\n\r\n", notAllowed},
		{"folded header naming the allowed target", "CONNECT evil.test:443 HTTP/1.1\r\nX: a\r\n mapped.test:" + port + "\r\n\r\n", notAllowed},
		{"head over 16 KiB", "CONNECT mapped.test:" + port + " HTTP/1.1\r\nX: " + strings.Repeat("a", maxHead) + "\r\n\r\n", badRequest},
		{"not HTTP", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", badRequest},
	}
	for _, c := range cases {
		if err := c.check(send(c.raw)); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// Only the three tunnels reached the upstream; each refusal recorded.
	if n := upstreamConns.Load(); n != 3 {
		t.Errorf("the upstream was reached %d times, want 3 (the allowed tunnels)", n)
	}
	l.Close()
	p.Close()
	conns, dropped := p.Connections()
	if len(conns) != len(cases) || dropped != 0 {
		t.Errorf("%d connections recorded (%d dropped), want %d", len(conns), dropped, len(cases))
	}
}

// TestProxyHeadDripped: a head dripped a byte at a time, never ending,
// does not hold up another connection's complete head (each connection
// is read on its own; TestProxyTooMany bounds how many may wait).
func TestProxyHeadDripped(t *testing.T) {
	p := &Proxy{Allow: []HostPort{{"x.test", 1}}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(l)
	defer func() { l.Close(); p.Close() }()
	// A head sent a byte at a time, never ending, interleaved with a
	// complete one on another connection: the complete one is answered.
	var wg sync.WaitGroup
	drip, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer drip.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, b := range []byte("CONNECT x.test:1 HTTP/1.1\r\nX: ") {
			if _, err := drip.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "CONNECT evil.test:443 HTTP/1.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the complete head beside a dripping one: %v %v, want 403", resp, err)
	}
	wg.Wait()
}

// proxySend writes raw to the proxy at addr and returns the status and
// the refusal's body, or, for a tunnel, what came back through it after
// writing "ping\n" (a refused connection must have been closed by the
// proxy: the body is read to its end).
func proxySend(t *testing.T, addr, raw string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		return 0, err.Error()
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return 0, err.Error()
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		return 200, err.Error()
	}
	b, _ := io.ReadAll(br)
	return 200, string(b)
}
