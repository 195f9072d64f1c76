package sandbox

import (
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"

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
		r.rec, r.err = CheckIsolation(ns, Expectation{})
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
