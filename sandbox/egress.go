package sandbox

import (
	"errors"
	"net/netip"

	"github.com/vishvananda/netns"
)

// ErrEgress: the allowlisted egress could not be set up.
var ErrEgress = errors.New("allowlisted egress")

// egress is the host side of an allowlisted run: the veth pair, the
// routes and the host-side filter, removed by teardown.
type egress struct {
	link        string
	local, peer netip.Addr
	allow       []Endpoint
	verify      func() error
	teardown    func()
}

func setupEgress(id string, ns netns.NsHandle, allow []Endpoint) (*egress, error) {
	return nil, errors.Join(ErrEgress, errors.New("not implemented yet"))
}

// expectFor is what CheckIsolation must find for this run.
func expectFor(allow []Endpoint, eg *egress) Expectation {
	if eg == nil {
		return Expectation{}
	}
	return Expectation{Allow: allow, Link: eg.link, Local: eg.local, Peer: eg.peer, Filter: eg.verify}
}
