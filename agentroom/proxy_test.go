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
	"testing"
)

func TestParseHostPort(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want HostPort
		ok   bool
	}{
		{"api.example.com:443", HostPort{"api.example.com", 443}, true},
		{"API.Example.COM:443", HostPort{"api.example.com", 443}, true},
		{"[2001:db8::1]:8443", HostPort{"2001:db8::1", 8443}, true},
		{"10.0.0.1:80", HostPort{"10.0.0.1", 80}, true},
		{"api.example.com", HostPort{}, false},       // no port
		{"api.example.com:0", HostPort{}, false},     // port 0
		{"api.example.com:65536", HostPort{}, false}, // out of range
		{"api.example.com.:443", HostPort{}, false},  // a second spelling of one name
		{"*.example.com:443", HostPort{}, false},     // a wildcard is many hosts
		{":443", HostPort{}, false},
		{"user@host:443", HostPort{}, false},
		{"host/path:443", HostPort{}, false},
		{"h\u00e9:443", HostPort{}, false}, // outside a DNS name's characters
		{"h\n:443", HostPort{}, false},
		{strings.Repeat("a", 254) + ":443", HostPort{}, false}, // longer than a DNS name
		{strings.Repeat("a", 253) + ":443", HostPort{strings.Repeat("a", 253), 443}, true},
	}
	for _, c := range cases {
		got, err := ParseHostPort(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseHostPort(%q) = %+v, %v; want %+v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

// TestProxyRefusals drives the proxy on the host's loopback (no sandbox):
// each refusal is answered with its status and recorded with its rule,
// and a name off the allowlist is never looked up.
func TestProxyRefusals(t *testing.T) {
	t.Parallel()
	up := serveLoopback(t, func(c net.Conn) {
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		fmt.Fprintf(c, "echo %s", line)
	})
	_, port, _ := net.SplitHostPort(up.Addr().String())
	var mu sync.Mutex
	var looked []string
	p := &Proxy{
		Allow:   []HostPort{{"mapped.test", mustPort(t, port)}, {"public.test", mustPort(t, port)}, {"loop.test", mustPort(t, port)}},
		Resolve: map[string]netip.Addr{"mapped.test": loopback},
		lookup: func(_ context.Context, host string) ([]netip.Addr, error) {
			mu.Lock()
			looked = append(looked, host)
			mu.Unlock()
			switch host {
			case "loop.test":
				// DNS rebinding onto the host's own services.
				return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1"), netip.MustParseAddr("169.254.169.254")}, nil
			}
			return nil, fmt.Errorf("no such host %s", host)
		},
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(l)
	send := func(raw string) (int, string) { return proxySend(t, l.Addr().String(), raw) }
	connect := func(target string) string { return "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n" }
	cases := []struct {
		name, raw string
		status    int
		rule      string
	}{
		{"allowed, mapped", connect("mapped.test:" + port), 200, ""},
		{"allowed, mapped, case folded", connect("MAPPED.test:" + port), 200, ""},
		{"other host", connect("other.test:" + port), 403, string(errNotAllowed)},
		{"other port", connect("mapped.test:1"), 403, string(errNotAllowed)},
		{"literal loopback", connect(up.Addr().String()), 403, string(errNotAllowed)},
		{"resolves to loopback", connect("loop.test:" + port), 502, string(errAddressRefused)},
		{"lookup fails", connect("public.test:" + port), 502, string(errUnreachable)},
		{"plain HTTP", "GET http://mapped.test:" + port + "/ HTTP/1.1\r\nHost: mapped.test\r\n\r\n", 405, string(errNotConnect)},
		{"not HTTP", "\x16\x03\x01garbage\r\n\r\n", 400, string(errBadRequest)},
		{"no port", connect("mapped.test"), 400, string(errBadRequest)},
	}
	for _, c := range cases {
		status, body := send(c.raw)
		if status != c.status || (c.rule != "" && !strings.Contains(body, c.rule)) || (status == 200 && body != "echo ping\n") {
			t.Errorf("%s: %d %q; want %d naming %q", c.name, status, body, c.status, c.rule)
		}
	}
	l.Close()
	p.Close()
	conns, dropped := p.Connections()
	if len(conns) != len(cases) || dropped != 0 {
		t.Fatalf("%d connections recorded (%d dropped), want %d", len(conns), dropped, len(cases))
	}
	proxied := 0
	for _, c := range conns {
		if c.Outcome == "proxied" {
			proxied++
			// "ping\n" out, "echo ping\n" in.
			if c.BytesOut != 5 || c.BytesIn != 10 || c.Address != up.Addr().String() || c.Host != "mapped.test" {
				t.Errorf("proxied %+v", c)
			}
		}
	}
	if proxied != 2 {
		t.Errorf("%d proxied, want 2", proxied)
	}
	// Only allowlisted names without a mapping were ever looked up.
	if want := []string{"loop.test", "public.test"}; fmt.Sprint(looked) != fmt.Sprint(want) {
		t.Errorf("looked up %v, want %v", looked, want)
	}
}

func mustPort(t *testing.T, s string) uint16 {
	hp, err := ParseHostPort("x:" + s)
	if err != nil {
		t.Fatal(err)
	}
	return hp.Port
}

// TestProxyTooMany: past maxActive open connections, the next one is
// closed unread and recorded as errTooMany.
func TestProxyTooMany(t *testing.T) {
	t.Parallel()
	p := &Proxy{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(l)
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
		l.Close()
		p.Close()
	}()
	for range maxActive {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
	}
	// The proxy accepts in order and none of those has sent its head:
	// the next one is over the limit.
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	if len(b) != 0 || err != nil {
		t.Errorf("connection over the limit: read %q, %v; want closed unread", b, err)
	}
	conns, _ := p.Connections()
	if len(conns) != 1 || conns[0].Rule != string(errTooMany) {
		t.Errorf("recorded %+v, want one %q", conns, errTooMany)
	}
}

// TestProxyBytesAfterHead: bytes the agent sends in the same write as its
// CONNECT head (a TLS client hello sent without waiting) reach the
// upstream first, then the rest, and the record counts them all.
func TestProxyBytesAfterHead(t *testing.T) {
	got := make(chan string, 1)
	up := serveLoopback(t, func(c net.Conn) {
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- string(b)
		_, _ = io.WriteString(c, "ok")
	})
	_, port, _ := net.SplitHostPort(up.Addr().String())
	p := &Proxy{Allow: []HostPort{{"mapped.test", mustPort(t, port)}}, Resolve: map[string]netip.Addr{"mapped.test": loopback}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(l)
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	target := "mapped.test:" + port
	if _, err := io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\nhello "); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	if _, err := io.WriteString(c, "world"); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(br); string(b) != "ok" {
		t.Errorf("answer %q, want ok", b)
	}
	if s := <-got; s != "hello world" {
		t.Errorf("upstream got %q, want %q", s, "hello world")
	}
	l.Close()
	p.Close()
	conns, _ := p.Connections()
	if len(conns) != 1 || conns[0].BytesOut != 11 || conns[0].BytesIn != 2 {
		t.Errorf("recorded %+v, want one connection, 11 bytes out, 2 in", conns)
	}
}

// TestClip: a recorded string is valid UTF-8 and at most n bytes, never
// ending inside a rune, whatever the agent sent.
func TestClip(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"aé", 2, "a"},                // é is 2 bytes: not split
		{"a\xffb", 8, "a\uFFFDb"},     // invalid byte replaced
		{"ab\xff", 4, "ab"},           // the replacement (3 bytes) does not fit: left out
		{"\u20ac\u20ac", 5, "\u20ac"}, // € is 3 bytes
	} {
		if got := clip(c.in, c.n); got != c.want {
			t.Errorf("clip(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
