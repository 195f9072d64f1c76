package amber

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sandbox"
	"github.com/cleanroom-dev/cleanroom/sandbox/sandboxinit"
	"github.com/cleanroom-dev/cleanroom/sign"
)

// The test binary starts containers: it routes libcontainer's init and the
// sandbox shim as the command does (sandboxinit.Run).
func init() { sandboxinit.Run() }

func needSandbox(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the candidate sandbox needs root")
	}
	if _, err := sandbox.CheckKernel(); err != nil {
		t.Skipf("the candidate sandbox cannot run here: %v", err)
	}
}

// sandboxStateDir is a state root beneath a temporary directory the
// candidate's init (an unprivileged uid on the host) can pass through:
// t.TempDir makes its directories 0700.
func sandboxStateDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for p := dir; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "state")
}

// runOracle is an oracle whose evaluator scores /workspace/answer.txt.
func runOracle(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "oracle")
	writeFile(t, filepath.Join(dir, "rubric.md"), "criterion answer: answer.txt holds 42\n")
	writeFile(t, filepath.Join(dir, OracleEvaluator), `#!/bin/sh
if [ "$(cat "$1/answer.txt" 2>/dev/null)" = "42" ]; then echo '{"answer": 1}'; else echo '{"answer": 0}'; fi
`)
	return dir
}

// sealedStore serves HTTP 403 on all host addresses and returns a
// non-loopback host address for it (the sealed store's address). From the
// host it answers; from a fully isolated candidate it must not.
func sealedStore(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		w.Write([]byte("sealed store\n"))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
			ap := netip.AddrPortFrom(p.Addr(), port)
			// Not vacuous: the store answers 403 from the host.
			resp, err := http.Get("http://" + ap.String() + "/oracle.pack")
			if err != nil {
				t.Fatalf("sealed store unreachable from the host: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("sealed store answered %d", resp.StatusCode)
			}
			return ap
		}
	}
	t.Skip("no non-loopback IPv4 address on this host to put the sealed store on")
	return netip.AddrPort{}
}

type runFixture struct {
	opts    RunOptions
	c       *Case
	s       *sign.Signer
	specDir string
	ixDir   string
	ixKey   string
}

func newRunFixture(t *testing.T) runFixture {
	t.Helper()
	repo := newTestRepo(t, 3)
	_, s := newSigner(t)
	bo := buildOpts(t, repo, s)
	bo.OracleDir = runOracle(t)
	c, err := Build(context.Background(), bo)
	if err != nil {
		t.Fatal(err)
	}
	ixDir, ixKey := newTestIndex(t, 1)
	m, msha, err := VerifySignedManifest(c.Dir, s.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AppendCaseFile(ixDir, ixKey, EntryFromManifest(m, msha)); err != nil {
		t.Fatal(err)
	}
	return runFixture{
		opts: RunOptions{CaseDir: c.Dir, Producer: s.PublicKey(), IndexDir: ixDir, Signer: s,
			Provider: "test", Model: "scripted", Out: filepath.Join(t.TempDir(), "run")},
		c: c, s: s, specDir: bo.SpecFile, ixDir: ixDir, ixKey: ixKey,
	}
}

// TestRunFullIsolation: a full run on a small generated repository: the
// mechanism check passes, the seal probe fails at the transport layer,
// the oracle scores, and the signed record verifies by value and with
// ssh-keygen.
func TestRunFullIsolation(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	f := newRunFixture(t)
	sealed := sealedStore(t)
	iso := &SandboxIsolation{StateDir: sandboxStateDir(t)}
	for _, tc := range []struct {
		name, script, state string
		score               float64
	}{
		{"solves", "cat src/f0.go > /dev/null && echo 42 > /workspace/answer.txt", StateValidSuccess, 1},
		{"fails", "echo 41 > /workspace/answer.txt", StateValidFailure, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := f.opts
			o.Out = filepath.Join(t.TempDir(), "run")
			o.Sealed = sealed
			o.Isolation = iso
			o.Args = []string{"/bin/sh", "-c", "cd /workspace && " + tc.script}
			res, err := Run(context.Background(), o)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			r := res.Record
			if r.TerminalState != tc.state || r.Scores["answer"] != tc.score {
				t.Fatalf("state %s scores %v (%s)", r.TerminalState, r.Scores, r.Reason)
			}
			var probe struct {
				Outcome, Errno, SealedTarget string `json:"-"`
			}
			var probeRaw map[string]any
			if err := json.Unmarshal(r.SealProbe, &probeRaw); err != nil {
				t.Fatal(err)
			}
			probe.Outcome, _ = probeRaw["outcome"].(string)
			probe.Errno, _ = probeRaw["errno"].(string)
			if probe.Outcome != "sealed" || probe.Errno != "ENETUNREACH" || probeRaw["sealed_target"] != sealed.String() {
				t.Errorf("seal probe %s", r.SealProbe)
			}
			var isoRaw map[string]any
			if err := json.Unmarshal(r.IsolationCheck, &isoRaw); err != nil {
				t.Fatal(err)
			}
			if isoRaw["enforced"] != true || isoRaw["isolation_class"] != FullIsolation || isoRaw["default_route"] != false {
				t.Errorf("isolation check %s", r.IsolationCheck)
			}
			if tc.state == StateValidSuccess {
				want := Artifact{Path: "workspace/answer.txt", SHA256: sha256sumOf(t, []byte("42\n"))}
				if len(r.Artifacts) == 0 || r.Artifacts[0] != want {
					t.Errorf("artifacts %v, want %v first", r.Artifacts, want)
				}
			}
			// The record reads back through the strict reader and verifies
			// by value: index proof at the cited version, summary, spec.
			sumDir := t.TempDir()
			ix, err := LoadIndex(f.ixDir, "")
			if err != nil {
				t.Fatal(err)
			}
			m, msha, _ := VerifySignedManifest(f.c.Dir, f.s.PublicKey())
			sum, err := NewSummary(m, msha, ix)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := WriteSummary(sumDir, sum, f.s); err != nil {
				t.Fatal(err)
			}
			vkey, _ := os.ReadFile(filepath.Join(f.ixDir, IndexPubFile))
			rep, err := VerifyRecordByValue(filepath.Join(res.Dir, RecordFile), f.s.PublicKey(), string(vkey), filepath.Join(sumDir, SummaryFile), f.specDir)
			if err != nil {
				t.Fatalf("by value: %v", err)
			}
			if len(rep.Passed) != 5 {
				t.Errorf("by-value checks %v", rep.Passed)
			}
			sshKeygenVerify(t, f.s, sign.NamespaceRunRecord, filepath.Join(res.Dir, RecordFile))
		})
	}
}

func sha256sumOf(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return sha256sumTool(t, p)
}

func sshKeygenVerify(t *testing.T, s *sign.Signer, ns, file string) {
	t.Helper()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		return
	}
	allowed := filepath.Join(t.TempDir(), "allowed_signers")
	writeFile(t, allowed, sign.AllowedSignersLine("producer@example", s.PublicKey()))
	b, _ := os.ReadFile(file)
	cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", allowed, "-I", "producer@example", "-n", ns, "-s", file+".sig")
	cmd.Stdin = bytes.NewReader(b)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("ssh-keygen -Y verify refused %s: %v %s", file, err, out)
	}
}

// neverIsolation fails the test if the runner reaches the sandbox: the
// refusals below must happen before anything runs.
type neverIsolation struct{ t *testing.T }

func (n neverIsolation) Run(context.Context, ContainerSpec, io.Writer, io.Writer) (*ContainerOutcome, error) {
	n.t.Fatal("the runner reached the sandbox for a case it must refuse")
	return nil, nil
}

func TestRunRefusesBeforeRunning(t *testing.T) {
	t.Parallel()
	needGit(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, f *runFixture)
		want  error
		check string
	}{
		{"retired case", func(t *testing.T, f *runFixture) {
			m, _, _ := VerifySignedManifest(f.c.Dir, f.s.PublicKey())
			if _, err := RetireCaseFile(f.ixDir, f.ixKey, m.CaseID, "2026-03-01"); err != nil {
				t.Fatal(err)
			}
		}, errRetired, CheckIndexState},
		{"case not in the index", func(t *testing.T, f *runFixture) {
			dir, _ := newTestIndex(t, 2)
			f.opts.IndexDir = dir
		}, errNotIndexed, CheckIndexState},
		{"swapped oracle", func(t *testing.T, f *runFixture) {
			w, err := os.Create(filepath.Join(f.c.Dir, OracleFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := WritePack(newOracle(t), w); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}, errMismatch, CheckOracleSHA256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRunFixture(t)
			tc.setup(t, &f)
			o := f.opts
			o.Isolation = neverIsolation{t}
			o.Args = []string{"/bin/true"}
			o.Sealed = netip.MustParseAddrPort("192.0.2.1:443")
			_, err := Run(context.Background(), o)
			if !errors.Is(err, tc.want) || CheckOf(err) != tc.check {
				t.Fatalf("got %v (check %q), want %v at %s", err, CheckOf(err), tc.want, tc.check)
			}
			if _, err := os.Stat(o.Out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused run left %s", o.Out)
			}
		})
	}
}

// TestRunEvaluatorInputFIFO: a candidate that leaves a FIFO (or a link to
// a device) where the oracle reads its answer has broken the protocol; the
// run is not signed as the infrastructure's failure, and the evaluator is
// never started on it (the class is asserted, not a time).
func TestRunEvaluatorInputFIFO(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	f := newRunFixture(t)
	sealed := sealedStore(t)
	iso := &SandboxIsolation{StateDir: sandboxStateDir(t)}
	for _, tc := range []struct{ name, script string }{
		{"fifo", "mkfifo /workspace/answer.txt"},
		{"link to a device", "ln -s /dev/zero /workspace/answer.txt"},
		// Links whose texts stay inside, resolved into the evaluator's root.
		{"chain of links to a device", "mkdir /workspace/sub && ln -s .. /workspace/sub/l1 && ln -s l1/.. /workspace/sub/l2 && ln -s sub/l2/dev/zero /workspace/answer.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := f.opts
			o.Out = filepath.Join(t.TempDir(), "run")
			o.Sealed, o.Isolation = sealed, iso
			o.Args = []string{"/bin/sh", "-c", tc.script}
			res, err := Run(context.Background(), o)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if r := res.Record; r.TerminalState != StateProtocolViolation || !bytes.Contains([]byte(r.Reason), []byte(errEvaluatorInput.Error())) {
				t.Fatalf("state %s (%s), want %s naming %q", r.TerminalState, r.Reason, StateProtocolViolation, errEvaluatorInput)
			}
			if _, err := os.Stat(filepath.Join(res.Dir, "oracle.stdout")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the evaluator ran on a refused workspace (oracle.stdout: %v)", err)
			}
		})
	}
}

func TestCheckEvaluatorInputs(t *testing.T) {
	t.Parallel()
	caseLink := pkgwalk.SHA256Hex([]byte("symlink:/usr/share/doc"))
	for _, tc := range []struct {
		name string
		make func(ws string) error
		ok   bool
	}{
		{"regular files and directories", func(ws string) error {
			return os.WriteFile(filepath.Join(ws, "sub", "a.txt"), []byte("42\n"), 0o644)
		}, true},
		{"link inside", func(ws string) error { return os.Symlink("../top.txt", filepath.Join(ws, "sub", "l")) }, true},
		{"the case's own absolute link", func(ws string) error { return os.Symlink("/usr/share/doc", filepath.Join(ws, "case-link")) }, true},
		{"fifo", func(ws string) error { return mkfifo(filepath.Join(ws, "sub", "answer.txt")) }, false},
		{"fifo in .git", func(ws string) error { return mkfifo(filepath.Join(ws, ".git", "HEAD")) }, false},
		{"absolute link", func(ws string) error { return os.Symlink("/dev/zero", filepath.Join(ws, "answer.txt")) }, false},
		{"escaping link", func(ws string) error { return os.Symlink("../../etc/passwd", filepath.Join(ws, "sub", "l")) }, false},
		{"changed case link", func(ws string) error { return os.Symlink("/dev/zero", filepath.Join(ws, "case-link")) }, false},
		// Each link stays inside by its text, but resolved one after the
		// other they climb out: sub/l2 is the workspace's parent (in the
		// evaluator's container, its root: /package, /dev).
		{"escaping through a chain of links", func(ws string) error {
			return errors.Join(os.Symlink("..", filepath.Join(ws, "sub", "l1")), os.Symlink("l1/..", filepath.Join(ws, "sub", "l2")),
				os.Symlink("sub/l2/dev/zero", filepath.Join(ws, "answer.txt")))
		}, false},
		{"a chain of links that stays inside", func(ws string) error {
			return errors.Join(os.WriteFile(filepath.Join(ws, "sub", "a.txt"), []byte("42\n"), 0o644),
				os.Symlink("..", filepath.Join(ws, "sub", "l1")), os.Symlink("l1/sub", filepath.Join(ws, "sub", "l2")),
				os.Symlink("sub/l2/a.txt", filepath.Join(ws, "answer.txt")))
		}, true},
		{"dangling link inside", func(ws string) error { return os.Symlink("sub/missing", filepath.Join(ws, "answer.txt")) }, true},
		{"socket", func(ws string) error {
			l, err := net.Listen("unix", filepath.Join(ws, "sock"))
			if err == nil {
				l.(*net.UnixListener).SetUnlinkOnClose(false)
				l.Close()
			}
			return err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			if err := os.MkdirAll(filepath.Join(ws, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tc.make(ws); err != nil {
				t.Skip(err)
			}
			err := walked(t, ws, map[string]string{"case-link": caseLink}).input
			if tc.ok && err != nil {
				t.Errorf("refused: %v", err)
			}
			if !tc.ok && !errors.Is(err, errEvaluatorInput) {
				t.Errorf("got %v, want %v", err, errEvaluatorInput)
			}
		})
	}
}
