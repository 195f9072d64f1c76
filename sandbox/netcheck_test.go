package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// isolatedNS returns a fresh network namespace with lo up, as Exec makes
// for a full-isolation run, and a netlink handle inside it.
func isolatedNS(t *testing.T) (*netlink.Handle, func() (*IsolationCheck, error)) {
	t.Helper()
	needSandbox(t)
	ns, err := newNetNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	if err := loopbackUp(ns); err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h, func() (*IsolationCheck, error) { return CheckIsolation(ns, Expectation{}) }
}

func TestIsolationCheckDefault(t *testing.T) {
	t.Parallel()
	_, check := isolatedNS(t)
	rec, err := check()
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Enforced || rec.DefaultRoute || rec.IsolationClass != ClassFull || len(rec.Problems) != 0 {
		t.Fatalf("fresh namespace: %+v", rec)
	}
	if len(rec.Links) != 1 || rec.Links[0] != (LinkRecord{Name: "lo", Type: "device", Up: true}) {
		t.Errorf("links %+v, want only lo up", rec.Links)
	}
	for _, g := range rec.RouteGet {
		if g.Result != "ENETUNREACH" {
			t.Errorf("route get %s: %s", g.Target, g.Result)
		}
	}
	if len(rec.RouteGet) != len(publicTargets) {
		t.Errorf("route get %+v", rec.RouteGet)
	}
}

// Each tampering of the candidate's namespace makes the check fail, and
// the problem names what was found.
func TestIsolationCheckTampered(t *testing.T) {
	t.Parallel()
	_, v4all, _ := net.ParseCIDR("0.0.0.0/0")
	_, public, _ := net.ParseCIDR("1.1.1.0/24")
	for _, tc := range []struct {
		name         string
		tamper       func(t *testing.T, h *netlink.Handle)
		defaultRoute bool
		problem      string
	}{
		{
			name: "second link",
			tamper: func(t *testing.T, h *netlink.Handle) {
				mustDo(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "extra0"}, PeerName: "extra1"}))
			},
			problem: "unexpected link extra0",
		},
		{
			name: "default route via a second link",
			tamper: func(t *testing.T, h *netlink.Handle) {
				mustDo(t, h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "extra0"}, PeerName: "extra1"}))
				l, err := h.LinkByName("extra0")
				mustDo(t, err)
				mustDo(t, h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP("192.0.2.1"), Mask: net.CIDRMask(24, 32)}}))
				mustDo(t, h.LinkSetUp(l))
				mustDo(t, h.RouteAdd(&netlink.Route{Dst: v4all, Gw: net.ParseIP("192.0.2.2"), LinkIndex: l.Attrs().Index}))
			},
			defaultRoute: true,
			problem:      "default route in table 254",
		},
		{
			// A naive check lists only the main table.
			name: "default route in another table",
			tamper: func(t *testing.T, h *netlink.Handle) {
				lo, err := h.LinkByName("lo")
				mustDo(t, err)
				mustDo(t, h.RouteAdd(&netlink.Route{Dst: v4all, LinkIndex: lo.Attrs().Index, Table: 100, Scope: netlink.SCOPE_LINK}))
			},
			defaultRoute: true,
			problem:      "default route in table 100",
		},
		{
			name: "policy rule",
			tamper: func(t *testing.T, h *netlink.Handle) {
				r := netlink.NewRule()
				r.Priority, r.Table, r.Family = 100, 100, unix.AF_INET
				mustDo(t, h.RuleAdd(r))
			},
			problem: "policy rule beyond the kernel defaults",
		},
		{
			// Wider than the loopback range: 126.0.0.0/8 is not loopback.
			name: "route through lo to a prefix holding the loopback range",
			tamper: func(t *testing.T, h *netlink.Handle) {
				lo, err := h.LinkByName("lo")
				mustDo(t, err)
				_, wide, _ := net.ParseCIDR("126.0.0.0/7")
				mustDo(t, h.RouteAdd(&netlink.Route{Dst: wide, LinkIndex: lo.Attrs().Index, Scope: netlink.SCOPE_LINK}))
			},
			problem: "unexpected route in table 254 on \"lo\"",
		},
		{
			name: "route to a public prefix",
			tamper: func(t *testing.T, h *netlink.Handle) {
				lo, err := h.LinkByName("lo")
				mustDo(t, err)
				mustDo(t, h.RouteAdd(&netlink.Route{Dst: public, LinkIndex: lo.Attrs().Index, Scope: netlink.SCOPE_LINK}))
			},
			problem: "route lookup 1.1.1.1 found a route",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, check := isolatedNS(t)
			tc.tamper(t, h)
			rec, err := check()
			if err != nil {
				t.Fatal(err)
			}
			if rec.Enforced {
				t.Fatalf("tampered namespace passed: %+v", rec)
			}
			if rec.DefaultRoute != tc.defaultRoute {
				t.Errorf("default_route %v, want %v", rec.DefaultRoute, tc.defaultRoute)
			}
			found := false
			for _, p := range rec.Problems {
				found = found || strings.Contains(p, tc.problem)
			}
			if !found {
				t.Errorf("problems %q do not name %q", rec.Problems, tc.problem)
			}
		})
	}
}

// gVisor's netstack keeps 127.0.0.0/8 in the main table on lo: the same
// route made by this kernel passes, as nothing sent through lo leaves.
func TestIsolationCheckLoopbackRangeInMainTable(t *testing.T) {
	t.Parallel()
	h, check := isolatedNS(t)
	lo, err := h.LinkByName("lo")
	mustDo(t, err)
	_, loop, _ := net.ParseCIDR("127.0.0.0/8")
	mustDo(t, h.RouteAdd(&netlink.Route{Dst: loop, LinkIndex: lo.Attrs().Index, Scope: netlink.SCOPE_LINK, Table: unix.RT_TABLE_MAIN}))
	rec, err := check()
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Enforced {
		t.Fatalf("127.0.0.0/8 dev lo in the main table refused: %q", rec.Problems)
	}
}

// stackAnswers is a network stack's netlink answers, for the stacks this
// kernel cannot be made to answer like (gVisor's netstack).
type stackAnswers struct {
	links            []netlink.Link
	routes           []netlink.Route
	rulesErr, getErr error
}

func (s stackAnswers) LinkList() ([]netlink.Link, error) { return s.links, nil }
func (s stackAnswers) RouteListFiltered(int, *netlink.Route, uint64) ([]netlink.Route, error) {
	return s.routes, nil
}
func (s stackAnswers) RuleList(int) ([]netlink.Rule, error) { return nil, s.rulesErr }
func (s stackAnswers) RouteGet(net.IP) ([]netlink.Route, error) {
	return nil, s.getErr
}

// What runsc 20221219 --network=none answers (recorded with `ip` and
// `cleanroom sandbox hook --own-netns` under `runsc do`): lo alone, the
// loopback routes in the main table, EOPNOTSUPP to the rule dump and to
// every route lookup. With lo the only link that is full isolation;
// with any other link the same answers are no proof, and the check
// says so (a problem, or an incomplete check).
func TestIsolationCheckStackWithoutRulesOrLookups(t *testing.T) {
	t.Parallel()
	lo := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: 1, Name: "lo", Flags: net.FlagUp}}
	eth := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: 2, Name: "eth0", Flags: net.FlagUp}}
	route := func(cidr string, dev int, gw string) netlink.Route {
		_, dst, _ := net.ParseCIDR(cidr)
		return netlink.Route{LinkIndex: dev, Dst: dst, Gw: net.ParseIP(gw), Table: unix.RT_TABLE_MAIN, Type: unix.RTN_UNICAST}
	}
	gvisor := []netlink.Route{route("127.0.0.0/8", 1, ""), route("::1/128", 1, "")}
	for _, tc := range []struct {
		name    string
		stack   stackAnswers
		exp     Expectation
		errIs   error  // the check could not complete
		problem string // "" = enforced
	}{
		{name: "gVisor, lo only", stack: stackAnswers{links: []netlink.Link{lo}, routes: gvisor, rulesErr: unix.EOPNOTSUPP, getErr: unix.EOPNOTSUPP}},
		{name: "a second link, no rule dump", stack: stackAnswers{links: []netlink.Link{lo, eth}, routes: gvisor, rulesErr: unix.EOPNOTSUPP, getErr: unix.EOPNOTSUPP}, errIs: unix.EOPNOTSUPP},
		{name: "a second link, no lookups", stack: stackAnswers{links: []netlink.Link{lo, eth}, routes: gvisor, getErr: unix.EOPNOTSUPP}, problem: "route lookup 1.1.1.1"},
		{name: "allowlisted, no lookups", stack: stackAnswers{links: []netlink.Link{lo}, routes: gvisor, getErr: unix.EOPNOTSUPP},
			exp: Expectation{Allow: []Endpoint{{Addr: netip.MustParseAddr("192.0.2.1"), Port: 443}}}, problem: "route lookup 1.1.1.1"},
		{name: "lo only, another lookup error", stack: stackAnswers{links: []netlink.Link{lo}, routes: gvisor, rulesErr: unix.EOPNOTSUPP, getErr: unix.EINVAL}, problem: "route lookup 1.1.1.1"},
		{name: "lo only, another rule dump error", stack: stackAnswers{links: []netlink.Link{lo}, routes: gvisor, rulesErr: unix.EINVAL, getErr: unix.EOPNOTSUPP}, errIs: unix.EINVAL},
		{name: "lo only, a public route through lo", stack: stackAnswers{links: []netlink.Link{lo}, routes: append(slices.Clone(gvisor), route("10.0.0.0/8", 1, "")), rulesErr: unix.EOPNOTSUPP, getErr: unix.EOPNOTSUPP}, problem: "unexpected route in table 254"},
		{name: "lo only, the loopback range via a gateway", stack: stackAnswers{links: []netlink.Link{lo}, routes: []netlink.Route{route("127.0.0.0/8", 1, "127.0.0.2")}, rulesErr: unix.EOPNOTSUPP, getErr: unix.EOPNOTSUPP}, problem: "unexpected route"},
		{name: "lo only, a default route", stack: stackAnswers{links: []netlink.Link{lo}, routes: []netlink.Route{route("0.0.0.0/0", 1, "")}, rulesErr: unix.EOPNOTSUPP, getErr: unix.EOPNOTSUPP}, problem: "default route in table 254"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := checkWith(tc.stack, tc.exp)
			if tc.errIs != nil {
				if !errors.Is(err, tc.errIs) {
					t.Fatalf("err %v, want %v (record %+v)", err, tc.errIs, rec)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.problem == "" {
				if !rec.Enforced || len(rec.Problems) != 0 {
					t.Fatalf("not enforced: %q", rec.Problems)
				}
				if !slices.Equal(rec.Rules, []string{"EOPNOTSUPP"}) || len(rec.RouteGet) != len(publicTargets) || rec.RouteGet[0].Result != "EOPNOTSUPP" {
					t.Errorf("the stack's answers are not recorded as they came: rules %q, lookups %+v", rec.Rules, rec.RouteGet)
				}
				return
			}
			if rec.Enforced || !slices.ContainsFunc(rec.Problems, func(p string) bool { return strings.Contains(p, tc.problem) }) {
				t.Errorf("enforced=%v, problems %q do not name %q", rec.Enforced, rec.Problems, tc.problem)
			}
		})
	}
}

// ownVerdict is what `netcheck-own` prints.
type ownVerdict struct {
	Record   *IsolationCheck
	Problems []string
	Err      string
}

func netcheckOwnMain() int {
	rec, err := CheckOwnIsolation(Expectation{})
	v := ownVerdict{Record: rec}
	if rec != nil {
		v.Problems = rec.Problems
	}
	if err != nil {
		v.Err = err.Error()
	}
	b, _ := json.Marshal(v)
	fmt.Printf("\nverdict %s\n", b)
	return 0
}

// Under gVisor (runsc --network=none, as a Kubernetes RuntimeClass runs
// it) the check of the own namespace completes and proves full
// isolation: Debian's runsc 20221219 can neither enter a namespace nor
// answer a rule dump or a route lookup, and the check must still reach
// its verdict from what that stack does answer.
func TestOwnIsolationUnderGVisor(t *testing.T) {
	needSandbox(t)
	runsc, err := exec.LookPath("runsc")
	if err != nil {
		t.Skip("runsc is not installed (Debian package runsc)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// `runsc do` runs a command in a sandbox over the host's root (this
	// test binary included), its state under a directory of the test's.
	out, err := exec.CommandContext(ctx, runsc, "--root", t.TempDir(), "--network=none", "do", exe, "netcheck-own").CombinedOutput()
	if err != nil {
		t.Fatalf("runsc do: %v\n%s", err, out)
	}
	_, line, ok := strings.Cut(string(out), "verdict ")
	if !ok {
		t.Fatalf("no verdict in the output:\n%s", out)
	}
	var v ownVerdict
	if err := json.Unmarshal([]byte(strings.TrimSpace(line)), &v); err != nil {
		t.Fatalf("verdict %q: %v", line, err)
	}
	if v.Err != "" || v.Record == nil || !v.Record.Enforced || len(v.Problems) != 0 {
		t.Fatalf("under gVisor: %+v (problems %q)", v, v.Problems)
	}
	if len(v.Record.Links) != 1 || v.Record.Links[0].Name != "lo" {
		t.Errorf("links %+v, want lo alone", v.Record.Links)
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRetryDumpRefusesPartial(t *testing.T) {
	t.Parallel()
	calls := 0
	_, err := retryDump(func() ([]int, error) {
		calls++
		return []int{1}, netlink.ErrDumpInterrupted
	})
	if !errors.Is(err, netlink.ErrDumpInterrupted) || calls != dumpRetries || !strings.Contains(err.Error(), "partial result refused") {
		t.Errorf("err %v after %d calls", err, calls)
	}
	calls = 0
	v, err := retryDump(func() ([]int, error) {
		calls++
		if calls < 3 {
			return []int{1}, netlink.ErrDumpInterrupted
		}
		return []int{1, 2}, nil
	})
	if err != nil || len(v) != 2 {
		t.Errorf("retry then success: %v %v", v, err)
	}
}

// A process with no capability (a Kubernetes pod's container) can check
// the network namespace it stands in: entering it would need
// CAP_SYS_ADMIN, so the check must not setns into its own namespace. The
// test runs on a thread of its own that unshares a network namespace and
// then drops every capability (capabilities are per thread); the thread
// is never handed back to the runtime.
func TestIsolationCheckOwnNamespaceWithoutCapabilities(t *testing.T) {
	needSandbox(t)
	type result struct {
		rec    *IsolationCheck
		err    error
		setns  error
		failed string
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		var r result
		defer func() { done <- r }()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			r.failed = "unshare: " + err.Error()
			return
		}
		h, err := netlink.NewHandle()
		if err != nil {
			r.failed = "handle: " + err.Error()
			return
		}
		lo, err := h.LinkByName("lo")
		if err == nil {
			err = h.LinkSetUp(lo)
		}
		h.Close()
		if err != nil {
			r.failed = "lo up: " + err.Error()
			return
		}
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var none [2]unix.CapUserData // version 3 takes two words; all zero: no capability
		if err := unix.Capset(&hdr, &none[0]); err != nil {
			r.failed = "capset: " + err.Error()
			return
		}
		ns, err := netns.Get()
		if err != nil {
			r.failed = "netns: " + err.Error()
			return
		}
		defer ns.Close()
		// Without capabilities, entering even the namespace the thread is
		// in is refused: what the check must not depend on.
		r.setns = unix.Setns(int(ns), unix.CLONE_NEWNET)
		r.rec, r.err = CheckOwnIsolation(Expectation{})
	}()
	r := <-done
	if r.failed != "" {
		t.Fatal(r.failed)
	}
	if !errors.Is(r.setns, unix.EPERM) {
		t.Fatalf("setns without CAP_SYS_ADMIN: %v, want EPERM (the test did not drop the capability)", r.setns)
	}
	if r.err != nil {
		t.Fatalf("check of the own namespace without capabilities: %v", r.err)
	}
	if !r.rec.Enforced || len(r.rec.Links) != 1 || r.rec.Links[0].Name != "lo" {
		t.Fatalf("own isolated namespace: %+v", r.rec)
	}
}
