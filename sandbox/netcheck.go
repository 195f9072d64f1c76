package sandbox

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sort"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Isolation classes, as AMBER records them.
const (
	ClassFull        = "full_isolation"
	ClassAllowlisted = "allowlisted"
)

// IsolationCheck is the mechanism-level isolation record (the AMBER run
// record's isolation_check). Enforced is the verdict: true only when every
// check passed; Problems says why not.
type IsolationCheck struct {
	IsolationClass string          `json:"isolation_class"`
	Links          []LinkRecord    `json:"links"`
	DefaultRoute   bool            `json:"default_route"`
	Rules          []string        `json:"rules"`
	RouteGet       []RouteGetProbe `json:"route_get"`
	Allowlist      []string        `json:"allowlist"`
	Enforced       bool            `json:"enforced"`
	// Problems lists every failed check; it is not part of the AMBER
	// record (the record's verdict is Enforced).
	Problems []string `json:"-"`
	// Routes lists every route of every table, for the operator.
	Routes []string `json:"-"`
}

// LinkRecord is one network interface seen in the candidate's namespace.
type LinkRecord struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Up   bool   `json:"up"`
}

// RouteGetProbe is one route lookup the kernel answered (or refused).
type RouteGetProbe struct {
	Target string `json:"target"`
	Result string `json:"result"` // "ENETUNREACH", or "via DEV" when a route exists
}

// Expectation says what the candidate's namespace may contain.
type Expectation struct {
	// Allow is the allowlist; empty means full isolation.
	Allow []Endpoint
	// Link is the candidate end of the egress veth ("" for full isolation).
	Link string
	// Local and Peer are the two addresses of the /31 link.
	Local, Peer netip.Addr
	// Filter verifies the host-side filter; nil for full isolation.
	Filter func() error
}

// publicTargets are looked up with RouteGet: a namespace without a
// default route answers ENETUNREACH without sending anything.
var publicTargets = []string{"1.1.1.1", "8.8.8.8", "2606:4700:4700::1111"}

// dumpRetries bounds the retries of a netlink dump the kernel interrupted
// (the table changed during the dump). A partial dump is never a pass.
const dumpRetries = 5

// CheckIsolation inspects the network namespace ns through a netlink
// handle opened inside it: links, routes in every table, policy rules and
// route lookups to public addresses. The returned record's Enforced is
// true only if all of them match exp. An error means the check could not
// be completed (which is not a pass either).
func CheckIsolation(ns netns.NsHandle, exp Expectation) (*IsolationCheck, error) {
	// NewHandleAt enters ns (setns, which needs CAP_SYS_ADMIN) on a
	// locked thread, opens the socket and returns; the socket stays bound
	// to ns whatever thread uses it. Only NETLINK_ROUTE is opened: the
	// check needs nothing else, and gVisor refuses the other families
	// (XFRM) a default handle asks for.
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in the candidate namespace: %w", err)
	}
	defer h.Close()
	return checkWith(h, exp)
}

// CheckOwnIsolation is CheckIsolation of the network namespace the
// caller runs in, without naming it: the netlink socket is opened where
// the calling thread stands. A Kubernetes pod's container (every
// capability dropped) cannot enter a namespace, not even its own, and
// under gVisor it cannot name one either: runsc 20221219's
// /proc/PID/ns/net files have no stable identity and setns answers
// EOPNOTSUPP.
func CheckOwnIsolation(exp Expectation) (*IsolationCheck, error) {
	// No setns here (NewHandle with no namespace opens the socket on the
	// thread it runs on), so no thread lock either: a caller on a thread of
	// its own namespace has locked that thread already.
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in the own namespace: %w", err)
	}
	defer h.Close()
	return checkWith(h, exp)
}

// routeReader is what the check reads of a namespace (a *netlink.Handle;
// the tests give a network stack's recorded answers).
type routeReader interface {
	LinkList() ([]netlink.Link, error)
	RouteListFiltered(family int, filter *netlink.Route, filterMask uint64) ([]netlink.Route, error)
	RuleList(family int) ([]netlink.Rule, error)
	RouteGet(destination net.IP) ([]netlink.Route, error)
}

func checkWith(h routeReader, exp Expectation) (*IsolationCheck, error) {
	rec := &IsolationCheck{IsolationClass: ClassFull, Links: []LinkRecord{}, Rules: []string{}, RouteGet: []RouteGetProbe{}, Allowlist: []string{}}
	if len(exp.Allow) > 0 {
		rec.IsolationClass = ClassAllowlisted
	}
	for _, e := range exp.Allow {
		rec.Allowlist = append(rec.Allowlist, e.String())
	}
	fail := func(format string, a ...any) { rec.Problems = append(rec.Problems, fmt.Sprintf(format, a...)) }

	links, err := retryDump(func() ([]netlink.Link, error) { return h.LinkList() })
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	names := map[int]string{}
	// loOnly: lo is the namespace's only link. Then no route leads out,
	// whatever a policy rule or a lookup would say: a network stack that
	// has neither (gVisor's netstack answers EOPNOTSUPP to both) is not
	// failed for lacking them, and the answer is recorded as it came.
	loOnly := len(exp.Allow) == 0 && exp.Link == ""
	for _, l := range links {
		a := l.Attrs()
		names[a.Index] = a.Name
		rec.Links = append(rec.Links, LinkRecord{Name: a.Name, Type: l.Type(), Up: a.Flags&net.FlagUp != 0})
		switch {
		case a.Name == "lo" && l.Type() == "device":
		case exp.Link != "" && a.Name == exp.Link && l.Type() == "veth":
		default:
			// Any other interface (tunnel, macvlan, a second veth) is
			// a path out of the namespace nobody declared.
			fail("unexpected link %s (%s)", a.Name, l.Type())
			loOnly = false
		}
	}

	routes, err := retryDump(func() ([]netlink.Route, error) {
		return h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, fmt.Errorf("listing routes: %w", err)
	}
	for _, r := range routes {
		rec.Routes = append(rec.Routes, fmt.Sprintf("table=%d type=%d dev=%s %s", r.Table, r.Type, names[r.LinkIndex], r.String()))
		if isDefault(r) {
			// netlink ≥1.2.1 reports a default route as 0.0.0.0/0 or
			// ::/0, not a nil Dst: both are caught here.
			rec.DefaultRoute = true
			fail("default route in table %d: %s", r.Table, r)
			continue
		}
		if msg := checkRoute(r, names, exp); msg != "" {
			fail("%s", msg)
		}
	}

	rules, err := retryDump(func() ([]netlink.Rule, error) { return h.RuleList(netlink.FAMILY_ALL) })
	switch {
	case loOnly && errors.Is(err, unix.EOPNOTSUPP):
		// No policy routing in this stack; with lo the only link there
		// is nothing a rule could select anyway.
		rec.Rules = append(rec.Rules, "EOPNOTSUPP")
	case err != nil:
		return nil, fmt.Errorf("listing rules: %w", err)
	}
	for _, r := range rules {
		rec.Rules = append(rec.Rules, fmt.Sprintf("%s %d lookup %d", familyName(r.Family), r.Priority, r.Table))
		if !isDefaultRule(r) {
			fail("policy rule beyond the kernel defaults: %s", r)
		}
	}
	sort.Strings(rec.Rules)

	for _, t := range publicTargets {
		// An allowlisted public address is routed through the link by
		// design (checked below with the allowlist): refusing it here
		// made such a run impossible to start.
		if allowed(exp.Allow, netip.MustParseAddr(t)) {
			continue
		}
		ip := net.ParseIP(t)
		got, err := h.RouteGet(ip)
		switch {
		case errors.Is(err, unix.ENETUNREACH):
			rec.RouteGet = append(rec.RouteGet, RouteGetProbe{Target: t, Result: "ENETUNREACH"})
		case loOnly && errors.Is(err, unix.EOPNOTSUPP):
			// A stack with no route lookup (gVisor's netstack): with lo
			// the only link and every route checked above, the lookup
			// could only have confirmed it.
			rec.RouteGet = append(rec.RouteGet, RouteGetProbe{Target: t, Result: "EOPNOTSUPP"})
		case err != nil:
			// Only ENETUNREACH proves there is no route; any other
			// answer is not a pass.
			rec.RouteGet = append(rec.RouteGet, RouteGetProbe{Target: t, Result: errnoName(err)})
			fail("route lookup %s: %v (want ENETUNREACH)", t, err)
		default:
			dev := ""
			if len(got) > 0 {
				dev = names[got[0].LinkIndex]
			}
			rec.RouteGet = append(rec.RouteGet, RouteGetProbe{Target: t, Result: "via " + dev})
			fail("route lookup %s found a route via %q", t, dev)
		}
	}
	for _, e := range exp.Allow {
		got, err := h.RouteGet(net.IP(e.Addr.AsSlice()))
		if err != nil || len(got) == 0 || names[got[0].LinkIndex] != exp.Link {
			fail("allowlisted %s is not routed through %s (%v)", e, exp.Link, err)
			continue
		}
		rec.RouteGet = append(rec.RouteGet, RouteGetProbe{Target: e.Addr.String(), Result: "via " + exp.Link})
	}
	if exp.Filter != nil {
		if err := exp.Filter(); err != nil {
			fail("host-side egress filter: %v", err)
		}
	}
	rec.Enforced = len(rec.Problems) == 0
	return rec, nil
}

// retryDump repeats a netlink dump the kernel marked as interrupted;
// after dumpRetries attempts the partial result is discarded and an
// error returned.
func retryDump[T any](f func() ([]T, error)) ([]T, error) {
	var err error
	for range dumpRetries {
		var v []T
		v, err = f()
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("dump interrupted %d times, partial result refused: %w", dumpRetries, err)
}

func isDefault(r netlink.Route) bool {
	if r.Dst == nil {
		return true
	}
	ones, _ := r.Dst.Mask.Size()
	return ones == 0
}

// checkRoute returns a problem for any route the expectation does not
// allow, or "".
func checkRoute(r netlink.Route, names map[int]string, exp Expectation) string {
	dev := names[r.LinkIndex]
	ones, bits := r.Dst.Mask.Size()
	dst, _ := netip.AddrFromSlice(r.Dst.IP)
	dst = dst.Unmap()
	if dev == "lo" && r.Gw == nil && len(r.MultiPath) == 0 && r.Type == unix.RTN_UNICAST && loopbackPrefix(dst, ones, bits) {
		// A route into the loopback range through lo: gVisor's netstack
		// keeps 127.0.0.0/8 and ::1 there in the main table (Linux in
		// the local table, below). Nothing sent through lo leaves the
		// namespace.
		return ""
	}
	if r.Table == unix.RT_TABLE_LOCAL {
		// The kernel's own local/broadcast entries for the namespace's
		// addresses; multicast and anycast only on the egress link.
		switch {
		case dev == "lo" && (r.Type == unix.RTN_LOCAL || r.Type == unix.RTN_BROADCAST):
			return ""
		case exp.Link != "" && dev == exp.Link && r.Type == unix.RTN_LOCAL && dst == exp.Local && ones == bits:
			return ""
		case exp.Link != "" && dev == exp.Link && r.Type == unix.RTN_BROADCAST:
			return ""
		}
		return fmt.Sprintf("unexpected local-table route on %q: %s", dev, r)
	}
	if len(r.MultiPath) > 0 || r.Gw != nil && exp.Link == "" {
		return fmt.Sprintf("unexpected route: %s", r)
	}
	if exp.Link != "" && dev == exp.Link && r.Table == unix.RT_TABLE_MAIN && r.Type == unix.RTN_UNICAST {
		// The connected route of the /31 link.
		if r.Gw == nil && ones == 31 && bits == 32 && netip.PrefixFrom(exp.Local, 31).Masked().Addr() == dst {
			return ""
		}
		// A host route to one allowlisted address via the host end.
		if ones == bits && r.Gw != nil {
			gw, _ := netip.AddrFromSlice(r.Gw)
			if gw.Unmap() == exp.Peer && allowed(exp.Allow, dst) {
				return ""
			}
		}
	}
	return fmt.Sprintf("unexpected route in table %d on %q: %s", r.Table, dev, r)
}

// loopbackPrefix reports whether every address of dst/ones is a
// loopback address: inside 127.0.0.0/8, or ::1 itself.
func loopbackPrefix(dst netip.Addr, ones, bits int) bool {
	if dst.Is4() {
		return bits == 32 && ones >= 8 && dst.IsLoopback()
	}
	return bits == 128 && ones == 128 && dst.IsLoopback()
}

func allowed(list []Endpoint, a netip.Addr) bool {
	for _, e := range list {
		if e.Addr == a {
			return true
		}
	}
	return false
}

// Multicast-routing rule families (RTNL_FAMILY_IPMR, RTNL_FAMILY_IP6MR).
const (
	familyIPMR  = 128
	familyIP6MR = 129
)

// isDefaultRule accepts only the rules the kernel creates in a new
// namespace, with no selectors: unicast priority 0 → local, 32766 → main,
// 32767 → default (IPv4 only); multicast routing 32767 → default (IPv4)
// or main (IPv6).
func isDefaultRule(r netlink.Rule) bool {
	var want map[int]int
	switch r.Family {
	case unix.AF_INET:
		want = map[int]int{0: unix.RT_TABLE_LOCAL, 32766: unix.RT_TABLE_MAIN, 32767: unix.RT_TABLE_DEFAULT}
	case unix.AF_INET6:
		want = map[int]int{0: unix.RT_TABLE_LOCAL, 32766: unix.RT_TABLE_MAIN}
	case familyIPMR:
		want = map[int]int{32767: unix.RT_TABLE_DEFAULT}
	case familyIP6MR:
		want = map[int]int{32767: unix.RT_TABLE_MAIN}
	}
	t, ok := want[r.Priority]
	return ok && t == r.Table && r.Src == nil && r.Dst == nil && r.Mark == 0 && r.IifName == "" &&
		r.OifName == "" && !r.Invert && r.Goto <= 0 && r.Tos == 0 && r.IPProto == 0 &&
		r.Dport == nil && r.Sport == nil && r.UIDRange == nil && (r.Type == 0 || r.Type == unix.RTN_UNICAST)
}

func familyName(f int) string {
	switch f {
	case unix.AF_INET:
		return "ipv4"
	case unix.AF_INET6:
		return "ipv6"
	case familyIPMR:
		return "ipmr"
	case familyIP6MR:
		return "ip6mr"
	}
	return fmt.Sprintf("family%d", f)
}

func errnoName(err error) string {
	var en unix.Errno
	if errors.As(err, &en) {
		if n := unix.ErrnoName(en); n != "" {
			return n
		}
	}
	return err.Error()
}

// newNetNS creates a network namespace and returns a handle (an fd) on
// it. The calling goroutine is not moved: a dedicated goroutine locks its
// OS thread, unshares, opens the new namespace, and exits without
// unlocking, so the Go runtime discards that thread rather than reusing
// it in the wrong namespace.
func newNetNS() (netns.NsHandle, error) {
	type result struct {
		ns  netns.NsHandle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread dies with this goroutine.
		ns, err := netns.New()
		ch <- result{ns, err}
	}()
	r := <-ch
	if r.err != nil {
		return 0, fmt.Errorf("creating the candidate network namespace: %w", r.err)
	}
	return r.ns, nil
}

// loopbackUp brings lo up inside ns (full isolation: the only link).
func loopbackUp(ns netns.NsHandle) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink handle in the candidate namespace: %w", err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("candidate namespace lo: %w", err)
	}
	if err := h.LinkSetUp(lo); err != nil {
		return fmt.Errorf("candidate namespace lo up: %w", err)
	}
	return nil
}

// inNetNS runs f on a locked OS thread that has entered ns. The thread is
// never returned to the scheduler (the goroutine exits locked), so no
// other goroutine ever runs in ns by accident. Sockets f creates belong to
// ns.
func inNetNS(ns netns.NsHandle, f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Never unlocked: the thread dies with this goroutine.
		if err := netns.Set(ns); err != nil {
			ch <- fmt.Errorf("entering the candidate network namespace: %w", err)
			return
		}
		ch <- f()
	}()
	return <-ch
}
