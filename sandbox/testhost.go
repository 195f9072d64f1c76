package sandbox

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// testHostPool numbers the links of test hosts (apart from egressPool).
var testHostPool = netip.MustParsePrefix("10.214.0.0/16")

// TestHost is a network namespace reachable from the host's namespace over
// a veth /31, with HTTP servers inside it: the stand-in for a remote host
// that tests and demos use, so that nothing but addresses cleanroom made
// itself is ever contacted. IP forwarding is enabled on the host end of its
// link (an interface it owns), so replies to a candidate's allowlisted
// egress are forwarded back. Close removes it. Needs root.
type TestHost struct {
	// Addr is the test host's address; HostEnd the host's end of the link.
	Addr, HostEnd netip.Addr
	// Link is the name of the host end of the veth.
	Link    string
	ns      netns.NsHandle
	servers []*http.Server
}

// NewTestHost creates a test host.
func NewTestHost() (th *TestHost, err error) {
	ns, err := newNetNS()
	if err != nil {
		return nil, err
	}
	id, err := newID()
	if err != nil {
		ns.Close()
		return nil, err
	}
	th = &TestHost{ns: ns, Link: "crt" + id[2:12]}
	defer func() {
		if err != nil {
			th.Close()
			th = nil
		}
	}()
	if th.HostEnd, th.Addr, err = pickLink(testHostPool); err != nil {
		return nil, err
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: th.Link}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("test host veth: %w", err)
	}
	l, err := netlink.LinkByName(th.Link)
	if err != nil {
		return nil, err
	}
	if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: prefixNet(th.HostEnd, 31)}); err != nil {
		return nil, err
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return nil, err
	}
	if err := writeSysctl("net/ipv4/conf/"+th.Link+"/forwarding", "1"); err != nil {
		return nil, err
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	for _, name := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(name)
		if err != nil {
			return nil, err
		}
		if name == "eth0" {
			if err := h.AddrAdd(l, &netlink.Addr{IPNet: prefixNet(th.Addr, 31)}); err != nil {
				return nil, err
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return nil, err
		}
	}
	if err := waitOperUp(h, "eth0"); err != nil {
		return nil, err
	}
	if err := waitOperUp(&netlink.Handle{}, th.Link); err != nil {
		return nil, err
	}
	return th, nil
}

// ServeHTTP starts an HTTP server on the test host's port that answers
// every request with status and returns its address.
func (th *TestHost) ServeHTTP(port uint16, status int) (netip.AddrPort, error) {
	ap := netip.AddrPortFrom(th.Addr, port)
	var ln net.Listener
	// The listening socket is created inside the test host's namespace;
	// accepting on it works from any thread.
	if err := inNetNS(th.ns, func() (err error) {
		ln, err = net.Listen("tcp", ap.String())
		return err
	}); err != nil {
		return ap, fmt.Errorf("test host listen %s: %w", ap, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "test host\n")
	})}
	go func() { _ = srv.Serve(ln) }()
	th.servers = append(th.servers, srv)
	return ap, nil
}

// Close stops the servers and removes the link and the namespace.
func (th *TestHost) Close() {
	for _, s := range th.servers {
		_ = s.Close()
	}
	if l, err := netlink.LinkByName(th.Link); err == nil {
		_ = netlink.LinkDel(l)
	}
	th.ns.Close()
}
