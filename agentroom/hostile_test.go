package agentroom

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hostileMain is the scripted hostile agent: it runs inside room agent's
// sandbox and tries every way out, printing NAME=RESULT per attempt (an
// errno name, "HTTP <status>" for a proxy's answer, or what it got).
// Arguments are KEY=VALUE: model (the allowlisted stand-in, HOST:PORT),
// modelport (its port on the host's loopback), sealed (the host's
// loopback address of a stand-in sealed store), localhost (an allowlisted
// localhost:PORT), secret and operatorhome (host paths).
func hostileMain(args []string) int {
	a := map[string]string{}
	for _, kv := range args {
		k, v, _ := strings.Cut(kv, "=")
		a[k] = v
	}
	out := func(name, result string) { fmt.Printf("%s=%s\n", name, result) }
	host, port, _ := net.SplitHostPort(a["model"])
	_ = port

	// Through the proxy: the allowlisted stand-in (the positive control),
	// then everything else.
	out("proxy_allowed", connectAndGet(a["model"], host))
	out("proxy_other_host", connectStatus("evil.example:443"))
	out("proxy_other_port", connectStatus(net.JoinHostPort(host, "1")))
	out("proxy_sealed_literal", connectStatus(a["sealed"]))
	out("proxy_localhost_lookup", connectStatus(a["localhost"]))
	out("proxy_plain_http", proxyRequest("GET http://"+a["model"]+"/ HTTP/1.1\r\nHost: "+a["model"]+"\r\n\r\n"))
	out("proxy_garbage", proxyRequest("\x16\x03\x01\x00\x10garbage\r\n\r\n"))

	// Around the proxy: direct sockets, DNS, vsock.
	out("direct_sealed", dialResult("tcp", a["sealed"]))
	out("direct_model", dialResult("tcp", "127.0.0.1:"+a["modelport"]))
	out("direct_public_v4", dialResult("tcp", "1.1.1.1:443"))
	out("direct_public_v6", dialResult("tcp", "[2606:4700:4700::1111]:443"))
	out("udp_dns", func() string {
		c, err := net.Dial("udp", "8.8.8.8:53")
		if err != nil {
			return errnoOf(err)
		}
		defer c.Close()
		_, err = c.Write([]byte("x"))
		return errnoOf(err)
	}())
	out("dns_lookup", func() string {
		addrs, err := net.LookupHost("example.com")
		if err != nil {
			return "FAILED"
		}
		return "OK:" + strings.Join(addrs, ",")
	}())
	out("vsock_host", func() string {
		fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return errnoOf(err)
		}
		defer unix.Close(fd)
		return errnoOf(unix.Connect(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_HOST, Port: 1024}))
	}())

	// The sandbox's system-call filter holds for the agent as for a
	// candidate (sandbox/adversarial_test.go has the whole battery).
	out("packet_socket", func() string {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err == nil {
			unix.Close(fd)
		}
		return errnoOf(err)
	}())
	out("unshare_user", errnoOf(unix.Unshare(unix.CLONE_NEWUSER)))
	out("ptrace_self", func() string {
		_, _, en := unix.Syscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
		if en != 0 {
			return errnoOf(en)
		}
		return "OK"
	}())

	// The relay socket for anything but MCP: the room reads it as MCP
	// and serves nothing of the package; a second connection gets nothing.
	out("relay_garbage", func() string {
		c, err := net.Dial("unix", RelaySocket)
		if err != nil {
			return errnoOf(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "GET /package HTTP/1.1\r\nHost: room\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(io.LimitReader(c, 1<<20))
		if strings.Contains(string(b), "Sorted") || strings.Contains(string(b), "CONTRACT") {
			return "LEAK"
		}
		return "NO_PACKAGE_BYTES"
	}())
	out("relay_second", func() string {
		c, err := net.Dial("unix", RelaySocket)
		if err != nil {
			return errnoOf(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`+"\n")
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(c)
		if len(b) == 0 && (err == nil || errors.Is(err, unix.ECONNRESET)) {
			return "CLOSED"
		}
		return fmt.Sprintf("GOT:%q:%v", b, err)
	}())

	// Host files.
	for name, p := range map[string]string{"read_root": "/root", "read_operator_home": a["operatorhome"], "read_secret": a["secret"]} {
		_, err := os.ReadDir(p)
		if err == nil {
			out(name, "OK")
			continue
		}
		if _, err = os.ReadFile(p); err == nil {
			out(name, "OK")
			continue
		}
		out(name, errnoOf(err))
	}
	out("write_relay", errnoOf(os.WriteFile(RelayPath, []byte("x"), 0o755)))
	out("write_usr", errnoOf(os.WriteFile("/usr/x", []byte("x"), 0o644)))
	home := os.Getenv("HOME")
	out("home", home)
	entries, err := os.ReadDir(home)
	out("home_entries", fmt.Sprint(len(entries), err))
	var names []string
	for _, e := range os.Environ() {
		n, _, _ := strings.Cut(e, "=")
		names = append(names, n)
	}
	sort.Strings(names)
	out("env", strings.Join(names, ","))
	return 0
}

func errnoOf(err error) string {
	if err == nil {
		return "OK"
	}
	var en unix.Errno
	if errors.As(err, &en) {
		if n := unix.ErrnoName(en); n != "" {
			return n
		}
	}
	return "ERR:" + err.Error()
}

func dialResult(network, addr string) string {
	c, err := net.DialTimeout(network, addr, 10*time.Second)
	if err == nil {
		c.Close()
	}
	return errnoOf(err)
}

// proxyRequest sends raw bytes to the proxy and returns "HTTP <status>"
// of its answer.
func proxyRequest(raw string) string {
	c, err := net.Dial("tcp", ProxyAddress)
	if err != nil {
		return errnoOf(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		return errnoOf(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "ERR:" + err.Error()
	}
	resp.Body.Close()
	return fmt.Sprintf("HTTP %d", resp.StatusCode)
}

func connectStatus(target string) string {
	return proxyRequest("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n")
}

// connectAndGet tunnels to target and fetches /hello over it.
func connectAndGet(target, host string) string {
	c, err := net.Dial("tcp", ProxyAddress)
	if err != nil {
		return errnoOf(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "ERR:" + err.Error()
	}
	if resp.StatusCode != 200 {
		return fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	fmt.Fprintf(c, "GET /hello HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		return "ERR:" + err.Error()
	}
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("HTTP %d %s", resp.StatusCode, strings.TrimSpace(string(b)))
}

// TestHostileAgent runs the scripted hostile agent through room agent: the
// only way out that works is the allowlisted name through the proxy.
func TestHostileAgent(t *testing.T) {
	needAgentRoom(t)
	var relayFromHost atomic.Value
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// While the session runs, the relay's abstract socket is not
		// reachable from the host's network namespace.
		relayFromHost.Store(dialResult("unix", RelaySocket))
		fmt.Fprintln(w, "stand-in")
	}))
	defer model.Close()
	var sealedHits atomic.Int64
	sealed := serveLoopback(t, func(c net.Conn) {
		sealedHits.Add(1)
		c.Close()
	})
	_, modelPort, _ := net.SplitHostPort(model.Listener.Addr().String())
	_, sealedPort, _ := net.SplitHostPort(sealed.Addr().String())
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "operator-secret")
	if err := os.WriteFile(secret, []byte("sk-operator"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CLEANROOM_TEST_HOST_SECRET", "must-not-reach")
	operatorHome, _ := os.UserHomeDir()
	const modelName = "model.cleanroom.test"
	o, stdout, stderr := testOptions(t, RelayPath, "hostile",
		"model="+modelName+":"+modelPort, "modelport="+modelPort, "sealed="+sealed.Addr().String(),
		"localhost=localhost:"+sealedPort, "secret="+secret, "operatorhome="+operatorHome)
	hp := func(s string) HostPort {
		h, err := ParseHostPort(s)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	o.Allow = []HostPort{hp(modelName + ":" + modelPort), hp("localhost:" + sealedPort)}
	o.Resolve = map[string]netip.Addr{modelName: loopback}
	o.Env = []string{"AGENT_API_KEY=sk-test"}
	res := runSession(t, o)
	got := map[string]string{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			got[k] = v
		}
	}
	want := map[string]string{
		"proxy_allowed":          "HTTP 200 stand-in",
		"proxy_other_host":       "HTTP 403",
		"proxy_other_port":       "HTTP 403",
		"proxy_sealed_literal":   "HTTP 403",
		"proxy_localhost_lookup": "HTTP 502",
		"proxy_plain_http":       "HTTP 405",
		"proxy_garbage":          "HTTP 400",
		"direct_sealed":          "ECONNREFUSED", // the sandbox's own lo: nothing listens there
		"direct_model":           "ECONNREFUSED",
		"direct_public_v4":       "ENETUNREACH",
		"direct_public_v6":       "ENETUNREACH",
		"udp_dns":                "ENETUNREACH",
		"dns_lookup":             "FAILED",
		"packet_socket":          "EPERM",
		"unshare_user":           "EPERM",
		"ptrace_self":            "EPERM",
		"relay_garbage":          "NO_PACKAGE_BYTES",
		"relay_second":           "CLOSED",
		"read_root":              "ENOENT",
		"read_operator_home":     "ENOENT",
		"read_secret":            "ENOENT",
		"write_relay":            "EROFS",
		"write_usr":              "EROFS",
		"home":                   AgentHome,
		"home_entries":           "0 <nil>",
		"env":                    "AGENT_API_KEY,ALL_PROXY,HOME,HTTPS_PROXY,HTTP_PROXY,NO_PROXY,PATH,all_proxy,http_proxy,https_proxy,no_proxy",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// AF_VSOCK: no socket, or no peer; never a connection.
	if v := got["vsock_host"]; v == "OK" || v == "" {
		t.Errorf("vsock_host = %q, want a refusal", v)
	}
	if n := sealedHits.Load(); n != 0 {
		t.Errorf("the stand-in sealed store on the host's loopback was reached %d times", n)
	}
	if v, _ := relayFromHost.Load().(string); v == "OK" || v == "" {
		t.Errorf("the relay socket from the host's namespace: %q, want a refusal", v)
	}
	if res.Sandbox.Status != "exited" || res.Sandbox.ExitCode != 0 || !res.Sandbox.Isolation.Enforced {
		t.Errorf("sandbox %+v, isolation %+v", res.Sandbox, res.Sandbox.Isolation)
	}
	if links := res.Sandbox.Isolation.Links; len(links) != 1 || links[0].Name != "lo" {
		t.Errorf("links %+v, want lo only", links)
	}

	doc := readTranscript(t, o.Room.Transcript)
	if c, _ := doc.Get("complete"); c != true {
		t.Errorf("transcript not complete")
	}
	if a, _ := doc.Get("access"); len(a.([]any)) != 0 {
		t.Errorf("garbage on the relay made calls: %v", a)
	}
	agent, ok := doc.Get("agent")
	if !ok {
		t.Fatalf("no agent line")
	}
	line := agent.(interface{ Get(string) (any, bool) })
	conns, _ := line.Get("connections")
	var summary []string
	for _, c := range conns.([]any) {
		o := c.(interface{ Get(string) (any, bool) })
		h, _ := o.Get("host")
		p, _ := o.Get("port")
		oc, _ := o.Get("outcome")
		r, _ := o.Get("rule")
		in, _ := o.Get("bytes_in")
		s := fmt.Sprintf("%v:%v %v %v", h, p, oc, r)
		if oc == "proxied" && in.(float64) == 0 {
			t.Errorf("proxied connection %s recorded no bytes in", s)
		}
		summary = append(summary, s)
	}
	sort.Strings(summary)
	wantConns := []string{
		"127.0.0.1:" + sealedPort + " refused " + string(errNotAllowed),
		"evil.example:443 refused " + string(errNotAllowed),
		"localhost:" + sealedPort + " refused " + string(errAddressRefused) + ": localhost resolves to [127.0.0.1]",
		modelName + ":1 refused " + string(errNotAllowed),
		modelName + ":" + modelPort + " proxied <nil>",
		modelName + ":" + modelPort + " refused " + string(errNotConnect) + ": GET",
		":0 refused " + string(errBadRequest),
	}
	sort.Strings(wantConns)
	if !slices.Equal(summary, wantConns) {
		t.Errorf("recorded connections:\n%s\nwant:\n%s", strings.Join(summary, "\n"), strings.Join(wantConns, "\n"))
	}
	if n, _ := line.Get("relay_connections"); n != float64(2) {
		t.Errorf("relay_connections %v, want 2", n)
	}
	if cmd, _ := line.Get("command"); len(cmd.([]any)) < 2 || cmd.([]any)[1] != "hostile" {
		t.Errorf("command %v", cmd)
	}
	if t.Failed() {
		t.Logf("agent output:\n%s\nstderr:\n%s", stdout, stderr)
	}
}
