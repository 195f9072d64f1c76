package amber

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// testHost is a network namespace the test creates, reached from the host
// over a veth /31: the only remote host this test contacts.
type testHost struct {
	ns   netns.NsHandle
	addr netip.Addr
}

// inNS runs f on a thread inside ns; the thread is discarded afterwards.
func inNS(ns netns.NsHandle, f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := netns.Set(ns); err != nil {
			ch <- err
			return
		}
		ch <- f()
	}()
	return <-ch
}

func newTestHost(t *testing.T) *testHost {
	t.Helper()
	type created struct {
		ns  netns.NsHandle
		err error
	}
	ch := make(chan created, 1)
	go func() {
		// netns.New moves this thread into the new namespace; the locked
		// thread is discarded when the goroutine ends.
		runtime.LockOSThread()
		ns, err := netns.New()
		ch <- created{ns, err}
	}()
	cr := <-ch
	if cr.err != nil {
		t.Skipf("cannot create a network namespace: %v", cr.err)
	}
	ns := cr.ns
	t.Cleanup(func() { ns.Close() })
	b := make([]byte, 4)
	rand.Read(b)
	name := "cra" + hex.EncodeToString(b)
	host := netip.AddrFrom4([4]byte{10, 216, b[0], b[1] &^ 1})
	th := &testHost{ns: ns, addr: host.Next()}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "eth0", PeerNamespace: netlink.NsFd(int(ns))}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Skipf("cannot create a veth pair: %v", err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(name); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				t.Errorf("removing the veth %s: %v", name, err)
			}
		}
	})
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: host.AsSlice(), Mask: net.CIDRMask(31, 32)}}); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	// Replies from the test host arrive on this link and are forwarded
	// back to the candidate.
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+name+"/forwarding", []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	for _, n := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(n)
		if err != nil {
			t.Fatal(err)
		}
		if n == "eth0" {
			if err := h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: th.addr.AsSlice(), Mask: net.CIDRMask(31, 32)}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	return th
}

// serve answers every HTTP request on the test host's port with status.
func (th *testHost) serve(t *testing.T, port uint16, status int) netip.AddrPort {
	t.Helper()
	ap := netip.AddrPortFrom(th.addr, port)
	var ln net.Listener
	if err := inNS(th.ns, func() (err error) { ln, err = net.Listen("tcp", ap.String()); return err }); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		w.Write([]byte("test host\n"))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	// Not vacuous: the host reaches it.
	c, err := net.Dial("tcp", ap.String())
	if err != nil {
		t.Fatalf("test host %s unreachable from the host: %v", ap, err)
	}
	c.Close()
	return ap
}

// TestRunSealedStoreAnswers: the sealed store answers HTTP 403 (the
// producer wrongly allowlisted it): the probe fails at the application
// layer, the candidate never starts, and the signed record says
// invalid_infrastructure.
func TestRunSealedStoreAnswers(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	if c, err := nftables.New(); err != nil {
		t.Skipf("nf_tables is not usable here: %v", err)
	} else if _, err := c.ListTables(); err != nil {
		t.Skipf("nf_tables is not usable here: %v", err)
	}
	th := newTestHost(t)
	control := th.serve(t, 8080, http.StatusOK)
	sealed := th.serve(t, 8443, http.StatusForbidden)

	repo := newTestRepo(t, 2)
	_, s := newSigner(t)
	bo := buildOpts(t, repo, s)
	bo.OracleDir = runOracle(t)
	bo.Allow = []string{control.String(), sealed.String()}
	c, err := Build(context.Background(), bo)
	if err != nil {
		t.Fatal(err)
	}
	ixDir, ixKey := newTestIndex(t, 0)
	m, msha, _ := VerifySignedManifest(c.Dir, s.PublicKey())
	if m.Eligibility.IsolationClass != Allowlisted {
		t.Fatalf("isolation class %s", m.Eligibility.IsolationClass)
	}
	if _, err := AppendCaseFile(ixDir, ixKey, EntryFromManifest(m, msha)); err != nil {
		t.Fatal(err)
	}
	o := RunOptions{CaseDir: c.Dir, Producer: s.PublicKey(), IndexDir: ixDir, Signer: s, Provider: "test", Model: "scripted",
		Out: filepath.Join(t.TempDir(), "run"), Sealed: sealed, Control: &control,
		Args:      []string{"/bin/sh", "-c", "echo ran > /workspace/ran"},
		Isolation: &SandboxIsolation{StateDir: sandboxStateDir(t)}}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	r := res.Record
	if r.TerminalState != StateInvalidInfrastructure {
		t.Fatalf("terminal state %s (%s)", r.TerminalState, r.Reason)
	}
	var probe map[string]any
	if err := json.Unmarshal(r.SealProbe, &probe); err != nil {
		t.Fatal(err)
	}
	if probe["outcome"] != "answered" || probe["sealed_target"] != sealed.String() {
		t.Errorf("seal probe %s", r.SealProbe)
	}
	if _, err := os.Stat(filepath.Join(res.Dir, "workspace", "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the candidate ran after the probe failed: %v", err)
	}
	if len(r.Scores) != 0 {
		t.Errorf("scores %v for a run that never started", r.Scores)
	}
	vkey, _ := os.ReadFile(filepath.Join(ixDir, IndexPubFile))
	if _, err := VerifyRecordByValue(filepath.Join(res.Dir, RecordFile), s.PublicKey(), string(vkey), "", ""); err != nil {
		t.Errorf("the invalid_infrastructure record does not verify by value: %v", err)
	}
}
