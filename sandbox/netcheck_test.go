package sandbox

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
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
