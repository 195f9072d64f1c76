package sandbox

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// errEgress: the allowlisted egress could not be set up.
var errEgress = errors.New("allowlisted egress")

// egressPool is where the /31 links of allowlisted runs are numbered
// (a private range; a /31 already on this host is skipped).
var egressPool = netip.MustParsePrefix("10.213.0.0/16")

// egress is the host side of an allowlisted run: the veth pair, the
// routes and the host-side filter, removed by teardown.
//
// Layout: a veth pair, the host end in the host's namespace and the
// candidate end in the candidate's; a /31 between them; in the
// candidate's namespace only host routes (/32) to the allowlisted
// addresses via the host end, and no default route. Routes are not
// enforcement (the candidate could send to any address on its link):
// the nftables table cleanroom-<id> on the host accepts, from the host
// end, only TCP to the allowlisted address:port pairs and rejects
// everything else (forwarded or addressed to the host itself), lets only
// replies (established, related) go back in, and masquerades the
// candidate's address. IP forwarding is enabled on the host end only
// (net.ipv4.conf.<hostend>.forwarding); the reply path needs forwarding
// on the interface the replies arrive on, which is the operator's (or
// the test's) to enable.
type egress struct {
	id          string
	hostLink    string
	link        string
	local, peer netip.Addr // candidate end, host end
	allow       []Endpoint
	table       *nftables.Table
}

// linkNames returns the host-end and candidate-end interface names for a
// container id (IFNAMSIZ allows 15 bytes).
func linkNames(id string) (host, cand string) {
	s := strings.TrimPrefix(id, "cr")
	if len(s) > 10 {
		s = s[:10]
	}
	return "crh" + s, "crc" + s
}

// The rules of an egress allowlist (CheckAllowlist). Each entry becomes a
// host route and a filter rule for one remote service; these addresses
// would make it something else.
var (
	// errAllowUnspecified: 0.0.0.0 or :: is no destination (to the kernel,
	// this host).
	errAllowUnspecified = errors.New("allowlist entry is the unspecified address")
	// errAllowBroadcast: 255.255.255.255 reaches every host on a link.
	errAllowBroadcast = errors.New("allowlist entry is the limited broadcast address")
	// errAllowMulticast: a group address reaches every member of a group.
	errAllowMulticast = errors.New("allowlist entry is a multicast address")
	// errAllowLinkLocal: 169.254.0.0/16 (and fe80::/10) is the link's own,
	// where cloud metadata services (169.254.169.254) hand out credentials.
	errAllowLinkLocal = errors.New("allowlist entry is link-local (cloud metadata lives there)")
	// errAllowLoopback: a loopback address is the host itself.
	errAllowLoopback = errors.New("allowlist entry is a loopback address")
	// errAllowOwnPool: the sandbox numbers its own links from egressPool;
	// an entry there names another run's candidate or this host's end.
	errAllowOwnPool = errors.New("allowlist entry is in the sandbox's own link pool")
	// errAllowDuplicate: the same address and port twice (a list that says
	// one thing twice is not what its writer meant).
	errAllowDuplicate = errors.New("allowlist entry appears twice")
)

// CheckAllowlist refuses an allowlist with an entry that is not one remote
// unicast service: each refusal wraps errConfig and names its rule and the
// entry.
func CheckAllowlist(allow []Endpoint) error {
	seen := map[Endpoint]bool{}
	for _, e := range allow {
		a := e.Addr.Unmap()
		var rule error
		switch {
		case a.IsUnspecified():
			rule = errAllowUnspecified
		case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			rule = errAllowBroadcast
		case a.IsMulticast():
			rule = errAllowMulticast
		case a.IsLinkLocalUnicast():
			rule = errAllowLinkLocal
		case a.IsLoopback():
			rule = errAllowLoopback
		case egressPool.Contains(a):
			rule = errAllowOwnPool
		case seen[e]:
			rule = errAllowDuplicate
		}
		if rule != nil {
			return fmt.Errorf("%w: %w: %s", errConfig, rule, e)
		}
		seen[e] = true
	}
	return nil
}

func setupEgress(id string, ns netns.NsHandle, allow []Endpoint) (eg *egress, err error) {
	// Checked where every caller's list arrives (sandbox exec, amber run,
	// probe): an address a host route must not be made for.
	if err := CheckAllowlist(allow); err != nil {
		return nil, err
	}
	for _, e := range allow {
		if !e.Addr.Is4() {
			// Host routes, the filter and the check are IPv4-only here;
			// refuse rather than leave an IPv6 path unfiltered.
			return nil, fmt.Errorf("%w: %s: IPv6 allowlist entries are not supported", errConfig, e)
		}
	}
	hostName, candName := linkNames(id)
	eg = &egress{id: id, hostLink: hostName, link: candName, allow: allow}
	defer func() {
		if err != nil {
			eg.teardown()
			eg = nil
		}
	}()
	if eg.peer, eg.local, err = pickLink(egressPool); err != nil {
		return nil, err
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostName}, PeerName: candName, PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("%w: creating veth %s: %w", errEgress, hostName, err)
	}
	host, err := netlink.LinkByName(hostName)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errEgress, err)
	}
	// No IPv6 on either end: no link-local addresses or routes the check
	// would have to explain, and no unfiltered v6 path.
	if err := disableIPv6(hostName); err != nil {
		return nil, err
	}
	if err := netlink.AddrAdd(host, &netlink.Addr{IPNet: prefixNet(eg.peer, 31)}); err != nil {
		return nil, fmt.Errorf("%w: host end address: %w", errEgress, err)
	}
	if err := writeSysctl("net/ipv4/conf/"+hostName+"/forwarding", "1"); err != nil {
		return nil, err
	}
	// The filter exists before the link carries anything.
	if err := eg.installFilter(); err != nil {
		return nil, err
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return nil, fmt.Errorf("%w: host end up: %w", errEgress, err)
	}
	if err := inNetNS(ns, func() error { return disableIPv6(candName) }); err != nil {
		return nil, err
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("%w: netlink handle in the candidate namespace: %w", errEgress, err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errEgress, err)
	}
	cand, err := h.LinkByName(candName)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errEgress, err)
	}
	if err := h.AddrAdd(cand, &netlink.Addr{IPNet: prefixNet(eg.local, 31)}); err != nil {
		return nil, fmt.Errorf("%w: candidate end address: %w", errEgress, err)
	}
	for _, l := range []netlink.Link{lo, cand} {
		if err := h.LinkSetUp(l); err != nil {
			return nil, fmt.Errorf("%w: link up: %w", errEgress, err)
		}
	}
	// A veth carries nothing until both ends are operationally up; a SYN
	// sent before that is lost and retried a second later.
	if err := waitOperUp(h, candName); err != nil {
		return nil, err
	}
	if err := waitOperUp(&netlink.Handle{}, hostName); err != nil {
		return nil, err
	}
	for _, e := range allow {
		r := &netlink.Route{LinkIndex: cand.Attrs().Index, Dst: prefixNet(e.Addr, 32), Gw: net.IP(eg.peer.AsSlice())}
		if err := h.RouteReplace(r); err != nil {
			return nil, fmt.Errorf("%w: host route to %s: %w", errEgress, e.Addr, err)
		}
	}
	return eg, nil
}

// waitOperUp polls (bounded) until the link reports operstate up.
func waitOperUp(h *netlink.Handle, name string) error {
	for range 200 {
		l, err := h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("%w: %w", errEgress, err)
		}
		if l.Attrs().OperState == netlink.OperUp {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("%w: link %s did not come up", errEgress, name)
}

// pickLink chooses a free /31 in pool (a /16): host end (even), far end
// (odd).
func pickLink(pool netip.Prefix) (host, cand netip.Addr, err error) {
	used := map[netip.Addr]bool{}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return host, cand, fmt.Errorf("%w: listing host addresses: %w", errEgress, err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			used[ip.Unmap()] = true
		}
	}
	base := pool.Addr().As4()
	for range 64 {
		var b [2]byte
		if _, err := rand.Read(b[:]); err != nil {
			return host, cand, fmt.Errorf("%w: %w", errEgress, err)
		}
		n := binary.BigEndian.Uint16(b[:]) &^ 1
		h := base
		h[2], h[3] = byte(n>>8), byte(n)
		host = netip.AddrFrom4(h)
		cand = host.Next()
		if !used[host] && !used[cand] {
			return host, cand, nil
		}
	}
	return host, cand, fmt.Errorf("%w: no free /31 in %s", errEgress, pool)
}

func prefixNet(a netip.Addr, bits int) *net.IPNet {
	return &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, a.BitLen())}
}

// writeSysctl writes /proc/sys/<key> as seen from the calling thread's
// network namespace, and reads it back.
func writeSysctl(key, value string) error {
	p := "/proc/sys/" + key
	if err := os.WriteFile(p, []byte(value), 0); err != nil {
		return fmt.Errorf("%w: sysctl %s: %w", errEgress, key, err)
	}
	b, err := os.ReadFile(p)
	if err != nil || strings.TrimSpace(string(b)) != value {
		return fmt.Errorf("%w: sysctl %s did not take %q (%q, %v)", errEgress, key, value, b, err)
	}
	return nil
}

// disableIPv6 turns IPv6 off on a link (in the calling thread's network
// namespace); a kernel without IPv6 has nothing to turn off.
func disableIPv6(link string) error {
	if _, err := os.Stat("/proc/sys/net/ipv6"); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return writeSysctl("net/ipv6/conf/"+link+"/disable_ipv6", "1")
}

func ifname(n string) []byte {
	b := make([]byte, 16)
	copy(b, n)
	return b
}

func (eg *egress) tableName() string { return "cleanroom-" + eg.id }

// filterRules builds the rules of the forward and input chains:
// allowlisted TCP from the host end is accepted, everything else from
// the host end rejected (ICMP administratively prohibited, so the
// candidate sees EHOSTUNREACH at once); toward the host end only
// replies pass.
func (eg *egress) filterRules() (forward, input, post [][]expr.Any) {
	fromCand := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(eg.hostLink)},
	}
	allowRule := func(e Endpoint) []expr.Any {
		ip := e.Addr.As4()
		port := []byte{byte(e.Port >> 8), byte(e.Port)}
		return append(append([]expr.Any{}, fromCand...),
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ip[:]},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port},
			&expr.Verdict{Kind: expr.VerdictAccept},
		)
	}
	reject := append(append([]expr.Any{}, fromCand...),
		&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED})
	toCand := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(eg.hostLink)},
	}
	zero := []byte{0, 0, 0, 0}
	mask := make([]byte, 4)
	binary.NativeEndian.PutUint32(mask, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED)
	replies := append(append([]expr.Any{}, toCand...),
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: zero},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: zero},
		&expr.Verdict{Kind: expr.VerdictAccept},
	)
	dropToCand := append(append([]expr.Any{}, toCand...), &expr.Verdict{Kind: expr.VerdictDrop})
	for _, e := range eg.allow {
		forward = append(forward, allowRule(e))
	}
	forward = append(forward, reject, replies, dropToCand)
	// Nothing from the candidate reaches the host's own services.
	input = [][]expr.Any{reject}
	cand := eg.local.As4()
	post = [][]expr.Any{{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.NFPROTO_IPV4}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: cand[:]},
		&expr.Masq{},
	}}
	return forward, input, post
}

func (eg *egress) installFilter() error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("%w: nftables: %w", errEgress, err)
	}
	eg.table = c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: eg.tableName()})
	accept := nftables.ChainPolicyAccept
	fwd := c.AddChain(&nftables.Chain{Name: "forward", Table: eg.table, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	in := c.AddChain(&nftables.Chain{Name: "input", Table: eg.table, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	post := c.AddChain(&nftables.Chain{Name: "postrouting", Table: eg.table, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept})
	fr, ir, pr := eg.filterRules()
	for _, set := range []struct {
		chain *nftables.Chain
		rules [][]expr.Any
	}{{fwd, fr}, {in, ir}, {post, pr}} {
		for _, r := range set.rules {
			c.AddRule(&nftables.Rule{Table: eg.table, Chain: set.chain, Exprs: r})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("%w: installing the nftables filter (is nf_tables available?): %w", errEgress, err)
	}
	return nil
}

// verify checks, from the kernel, that the host-side filter is in place:
// the table exists and its forward and input chains hold exactly the
// rules installFilter made, ending in the reject.
func (eg *egress) verify() error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	t, err := c.ListTableOfFamily(eg.tableName(), nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("table %s: %w", eg.tableName(), err)
	}
	fr, ir, _ := eg.filterRules()
	for _, want := range []struct {
		name string
		n    int
	}{{"forward", len(fr)}, {"input", len(ir)}} {
		rules, err := c.GetRules(t, &nftables.Chain{Name: want.name, Table: t})
		if err != nil {
			return fmt.Errorf("chain %s: %w", want.name, err)
		}
		if len(rules) != want.n {
			return fmt.Errorf("chain %s has %d rules, want %d", want.name, len(rules), want.n)
		}
		rejectAt := len(eg.allow)
		if want.name == "input" {
			rejectAt = 0
		}
		last := rules[rejectAt].Exprs
		if _, ok := last[len(last)-1].(*expr.Reject); !ok {
			return fmt.Errorf("chain %s: rule %d is not the reject", want.name, rejectAt)
		}
	}
	return nil
}

// teardown removes the filter and the veth pair (deleting the host end
// deletes both). Errors are ignored: teardown runs on every path.
func (eg *egress) teardown() {
	if eg.table != nil {
		_ = delFilterTable(eg.table.Name)
	}
	if l, err := netlink.LinkByName(eg.hostLink); err == nil {
		_ = netlink.LinkDel(l)
	}
}

// expectFor is what CheckIsolation must find for this run.
func expectFor(allow []Endpoint, eg *egress) Expectation {
	if eg == nil {
		return Expectation{}
	}
	return Expectation{Allow: allow, Link: eg.link, Local: eg.local, Peer: eg.peer, Filter: eg.verify}
}
