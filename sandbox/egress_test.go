package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// dialMain connects to each IP:PORT and prints "TARGET=ok:<first reply
// line>" or "TARGET=err:<ERRNO>". It runs inside the container.
// "gw:PORT" dials the gateway of the container's routes (the host end of
// its link).
func dialMain(targets []string) int {
	for _, t := range targets {
		addr := t
		if port, ok := strings.CutPrefix(t, "gw:"); ok {
			addr = net.JoinHostPort(routeGateway(), port)
		}
		conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			var en syscall.Errno
			if errors.As(err, &en) {
				fmt.Printf("%s=err:%s\n", t, unix.ErrnoName(en))
			} else {
				fmt.Printf("%s=err:%v\n", t, err)
			}
			continue
		}
		_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
		fmt.Fprintf(conn, "GET / HTTP/1.0\r\n\r\n")
		line, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		fmt.Printf("%s=ok:%s\n", t, strings.TrimSpace(line))
	}
	return 0
}

// routeGateway returns the first gateway in /proc/net/route.
func routeGateway() string {
	b, _ := os.ReadFile("/proc/net/route")
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 2 && f[2] != "00000000" {
			var v uint32
			if _, err := fmt.Sscanf(f[2], "%X", &v); err != nil {
				continue
			}
			return net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24)).String()
		}
	}
	return "0.0.0.0"
}

// newTestHost is NewTestHost for a test: removed at cleanup.
func newTestHost(t *testing.T) *TestHost {
	t.Helper()
	th, err := NewTestHost()
	if err != nil {
		t.Fatalf("test host: %v", err)
	}
	t.Cleanup(th.Close)
	return th
}

// serve is TestHost.ServeHTTP for a test.
func serve(t *testing.T, th *TestHost, port uint16, status int) netip.AddrPort {
	t.Helper()
	ap, err := th.ServeHTTP(port, status)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// copySelf puts this test binary into dir (the workspace, where exec is
// allowed) so the container can run `dial`.
func copySelf(t *testing.T, dir string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sbtest"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return "/workspace/sbtest"
}

func needNetns(t *testing.T) {
	t.Helper()
	needSandbox(t)
	c, err := nftables.New()
	if err == nil {
		_, err = c.ListTables()
	}
	if err != nil {
		t.Skipf("nf_tables is not usable here: %v", err)
	}
}

func TestAllowlistedEgress(t *testing.T) {
	t.Parallel()
	needNetns(t)
	th := newTestHost(t)
	allowed := serve(t, th, 8080, http.StatusOK)
	other := serve(t, th, 8081, http.StatusOK)
	// A listener on the host itself (all addresses): the candidate must
	// not reach the host's own services through its link.
	hostLn, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	hostPort := uint16(hostLn.Addr().(*net.TCPAddr).Port)
	go func() {
		for {
			c, err := hostLn.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "HTTP/1.0 200 host\r\n\r\n") // the client asserts what it reads
			c.Close()
		}
	}()
	// Not vacuous: from the host, both test-host servers answer.
	for _, ap := range []netip.AddrPort{allowed, other} {
		c, err := net.DialTimeout("tcp", ap.String(), 3*time.Second)
		if err != nil {
			t.Fatalf("test host %s unreachable from the host: %v", ap, err)
		}
		c.Close()
	}

	ws := t.TempDir()
	bin := copySelf(t, ws)
	hostEndAP := netip.AddrPortFrom(th.HostEnd, hostPort)
	loopAP := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), hostPort)
	gwTarget := fmt.Sprintf("gw:%d", hostPort)
	var stdout, stderr strings.Builder
	cfg := Config{
		Args:      []string{bin, "dial", allowed.String(), other.String(), hostEndAP.String(), loopAP.String(), gwTarget},
		Workspace: ws,
		Allow:     []Endpoint{{Addr: allowed.Addr(), Port: allowed.Port()}},
		Seal:      &other,
		Control:   &allowed,
		StateDir:  testStateDir(t),
	}
	res, err := Exec(context.Background(), cfg, Stdio{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		t.Fatalf("Exec: %v (stderr %s)", err, stderr.String())
	}
	got := keyValues(stdout.String())
	for _, tc := range []struct{ target, want string }{
		{allowed.String(), "ok:HTTP/1.0 200 OK"},
		{other.String(), "err:EHOSTUNREACH"},
		// Not allowlisted and not routed at all.
		{hostEndAP.String(), "err:ENETUNREACH"},
		// The candidate's own lo: nothing listens there.
		{loopAP.String(), "err:ECONNREFUSED"},
		// The host's own services through the candidate's link: the
		// host-side input filter rejects.
		{gwTarget, "err:EHOSTUNREACH"},
	} {
		if got[tc.target] != tc.want {
			t.Errorf("%s: %q, want %q", tc.target, got[tc.target], tc.want)
		}
	}
	iso := res.Isolation
	if iso.IsolationClass != ClassAllowlisted || !iso.Enforced || iso.DefaultRoute ||
		len(iso.Allowlist) != 1 || iso.Allowlist[0] != allowed.String() || len(iso.Links) != 2 {
		t.Errorf("isolation record %+v", iso)
	}
	if p := res.SealProbe; p.Outcome != ProbeSealed || p.Errno != "EHOSTUNREACH" || p.PositiveControl == nil ||
		p.PositiveControl.Outcome != ControlReachable || p.TerminalState() != "" {
		t.Errorf("seal probe %+v", p)
	}
	// Everything the run set up on the host is gone.
	hostName, _ := linkNames(res.ID)
	if _, err := netlink.LinkByName(hostName); err == nil {
		t.Errorf("veth %s left behind", hostName)
	}
	c, _ := nftables.New()
	if _, err := c.ListTableOfFamily("cleanroom-"+res.ID, nftables.TableFamilyINet); err == nil {
		t.Errorf("nftables table cleanroom-%s left behind", res.ID)
	}
}

// A sealed address that answers (here an HTTP 403, reachable because the
// allowlist wrongly includes it) fails the probe: the run is refused as
// invalid_infrastructure and the command never runs.
func TestSealProbeApplicationAnswer(t *testing.T) {
	t.Parallel()
	needNetns(t)
	th := newTestHost(t)
	control := serve(t, th, 8080, http.StatusOK)
	sealed := serve(t, th, 8443, http.StatusForbidden)
	ws := t.TempDir()
	cfg := Config{
		Args:      []string{"/bin/sh", "-c", "echo ran > /workspace/ran"},
		Workspace: ws,
		Allow:     []Endpoint{{Addr: control.Addr(), Port: control.Port()}, {Addr: sealed.Addr(), Port: sealed.Port()}},
		Seal:      &sealed,
		Control:   &control,
		StateDir:  testStateDir(t),
	}
	res, err := Exec(context.Background(), cfg, Stdio{})
	if !errors.Is(err, ErrSealProbe) {
		t.Fatalf("Exec error %v, want ErrSealProbe", err)
	}
	p := res.SealProbe
	if p.Outcome != ProbeAnswered || p.TerminalState() != TerminalInvalidInfrastructure || !strings.Contains(p.Detail, "403") {
		t.Errorf("probe %+v", p)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran after a failed probe: %v", err)
	}
}

// Full isolation: the probe from the candidate's vantage fails at the
// transport layer against a server the test runs on the host's loopback
// and against a test host the host itself reaches.
func TestSealProbeFullIsolation(t *testing.T) {
	t.Parallel()
	needNetns(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "HTTP/1.0 403 Forbidden\r\n\r\n") // the client asserts what it reads
			c.Close()
		}
	}()
	loop := netip.MustParseAddrPort(ln.Addr().String())
	th := newTestHost(t)
	remote := serve(t, th, 8080, http.StatusForbidden)
	for _, tc := range []struct {
		name   string
		target netip.AddrPort
		errno  string
	}{
		{"host loopback", loop, "ECONNREFUSED"},
		{"test host", remote, "ENETUNREACH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Not vacuous: the target answers from the host's namespace.
			c, err := net.DialTimeout("tcp", tc.target.String(), 3*time.Second)
			if err != nil {
				t.Fatalf("%s does not answer from the host: %v", tc.target, err)
			}
			c.Close()
			res, _, _ := runIn(t, Config{Seal: &tc.target}, "exit 0")
			p := res.SealProbe
			if p.Outcome != ProbeSealed || p.Errno != tc.errno || p.TerminalState() != "" || p.PositiveControl != nil {
				t.Errorf("probe %+v, want sealed with %s", p, tc.errno)
			}
		})
	}
}

// ProbeVantage (what `cleanroom sandbox probe` runs) without a container:
// a sealed address that is rejected by the host-side filter passes, and
// the positive control must be reachable.
func TestProbeVantage(t *testing.T) {
	t.Parallel()
	needNetns(t)
	th := newTestHost(t)
	control := serve(t, th, 8080, http.StatusOK)
	sealed := serve(t, th, 9090, http.StatusForbidden)
	closed := netip.AddrPortFrom(th.Addr, 7070) // nothing listens
	allow := []Endpoint{{Addr: control.Addr(), Port: control.Port()}}
	for _, tc := range []struct {
		name     string
		allow    []Endpoint
		sealed   netip.AddrPort
		control  *netip.AddrPort
		outcome  string
		ctl      string
		terminal string
		err      error
	}{
		{"full isolation", nil, sealed, nil, ProbeSealed, "", "", nil},
		{"allowlisted, filtered", allow, sealed, &control, ProbeSealed, ControlReachable, "", nil},
		{"allowlisted, control down", allow, sealed, &closed, ProbeSealed, ControlUnreachable, TerminalInvalidInfrastructure, ErrSealProbe},
		{"sealed address allowlisted", append(allow, Endpoint{Addr: sealed.Addr(), Port: sealed.Port()}), sealed, &control, ProbeAnswered, ControlReachable, TerminalInvalidInfrastructure, ErrSealProbe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := ProbeVantage(context.Background(), tc.allow, tc.sealed, tc.control)
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			p := rep.SealProbe
			if p.Outcome != tc.outcome || rep.TerminalState != tc.terminal {
				t.Errorf("probe %+v terminal %q", p, rep.TerminalState)
			}
			if (p.PositiveControl == nil) != (tc.ctl == "") || p.PositiveControl != nil && p.PositiveControl.Outcome != tc.ctl {
				t.Errorf("control %+v, want %q", p.PositiveControl, tc.ctl)
			}
		})
	}
	if _, err := ProbeVantage(context.Background(), allow, sealed, nil); !errors.Is(err, errConfig) {
		t.Errorf("allowlisted vantage without control: %v, want errConfig", err)
	}
}

// An allowlist may name one of the public addresses the check looks up
// (a resolver at 8.8.8.8): that lookup is then routed through the
// candidate's link by design, and the run is not refused for it; the
// other public addresses must still be unreachable.
func TestAllowlistNamesAPublicTarget(t *testing.T) {
	t.Parallel()
	needNetns(t)
	allow := []Endpoint{{Addr: netip.MustParseAddr("8.8.8.8"), Port: 53}}
	// The vantage as Exec makes it; no packet is sent (route lookups only).
	ns, err := newNetNS()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	id, err := newID()
	if err != nil {
		t.Fatal(err)
	}
	eg, err := setupEgress(id, ns, allow)
	if err != nil {
		t.Fatal(err)
	}
	defer eg.teardown()
	iso, err := CheckIsolation(ns, expectFor(allow, eg))
	if err != nil || !iso.Enforced {
		t.Fatalf("isolation check refused an allowlisted public address: %v, %+v", err, iso)
	}
	for _, g := range iso.RouteGet {
		if g.Target != "8.8.8.8" && g.Result != "ENETUNREACH" {
			t.Errorf("route get %s: %s", g.Target, g.Result)
		}
	}
}

// Each address that is not one remote unicast service is refused by its
// own rule, in a list and as one endpoint (ParseEndpoint, what --net
// allow: and an AMBER manifest's allowlist go through).
func TestCheckAllowlist(t *testing.T) {
	t.Parallel()
	ok := Endpoint{Addr: netip.MustParseAddr("192.0.2.10"), Port: 443}
	for _, tc := range []struct {
		entry string
		rule  error
	}{
		{"255.255.255.255:80", errAllowBroadcast},
		{"169.254.169.254:80", errAllowLinkLocal},
		{"169.254.0.1:443", errAllowLinkLocal},
		{"[fe80::1]:443", errAllowLinkLocal},
		{"224.0.0.1:80", errAllowMulticast},
		{"239.1.2.3:80", errAllowMulticast},
		{"[ff02::1]:80", errAllowMulticast},
		{"0.0.0.0:80", errAllowUnspecified},
		{"[::]:80", errAllowUnspecified},
		{"127.0.0.1:80", errAllowLoopback},
		{"10.213.0.1:80", errAllowOwnPool},
		{"10.213.255.254:443", errAllowOwnPool},
	} {
		ap := netip.MustParseAddrPort(tc.entry)
		e := Endpoint{Addr: ap.Addr().Unmap(), Port: ap.Port()}
		if err := CheckAllowlist([]Endpoint{ok, e}); !errors.Is(err, tc.rule) || !errors.Is(err, errConfig) {
			t.Errorf("CheckAllowlist(%s) = %v, want %v", tc.entry, err, tc.rule)
		}
		if _, err := ParseEndpoint(tc.entry); !errors.Is(err, tc.rule) {
			t.Errorf("ParseEndpoint(%s) = %v, want %v", tc.entry, err, tc.rule)
		}
	}
	if err := CheckAllowlist([]Endpoint{ok, {Addr: ok.Addr, Port: 80}, ok}); !errors.Is(err, errAllowDuplicate) {
		t.Errorf("a duplicate entry: %v, want %v", err, errAllowDuplicate)
	}
	if err := CheckAllowlist([]Endpoint{ok, {Addr: netip.MustParseAddr("10.214.0.3"), Port: 80}}); err != nil {
		t.Errorf("a unicast list refused: %v", err)
	}
}
