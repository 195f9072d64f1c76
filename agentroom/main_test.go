package agentroom

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/harness"
	"github.com/cleanroom-dev/cleanroom/internal/deathsig"
	"github.com/cleanroom-dev/cleanroom/sandbox"
	"github.com/cleanroom-dev/cleanroom/sandbox/sandboxinit"
	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
	"golang.org/x/sys/unix"
)

// The container's init (libcontainer re-executes this binary as "init")
// is routed by sandboxinit's init function; Run keeps the main thread.
func init() { sandboxinit.Run() }

// The test binary plays the cleanroom binary: argv[1] selects a role.
// Inside the sandbox it is bound at RelayPath, so "room relay" is the
// relay an agent's configuration names, and "hostile" the scripted agent.
const stageMarker = "agentroom-test-sealed-stage"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch {
		case os.Args[1] == stageMarker:
			os.Exit(harness.RunStage([]string{stageMarker}, os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case len(os.Args) == 3 && os.Args[1] == RelayArgs[0] && os.Args[2] == RelayArgs[1]:
			if err := Relay(os.Stdin, os.Stdout); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			os.Exit(0)
		case os.Args[1] == "hostile":
			os.Exit(hostileMain(os.Args[2:]))
		case os.Args[1] == "list-and-wait":
			os.Exit(listAndWaitMain())
		case os.Args[1] == "copy-relay":
			os.Exit(copyRelayMain())
		case os.Args[1] == "relay-tricks":
			os.Exit(relayTricksMain())
		case os.Args[1] == "bench-client":
			os.Exit(benchClientMain(os.Args[2:]))
		case os.Args[1] == "bench-serve":
			os.Exit(benchServeMain(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}

// roomPackage is harness/testdata/room-package and its pin.
const roomPackagePin = "bpkg-bf608ff8dd92dee2a27258aaed6d594ffcaea9b5975ae1728f5a772adaad86b4"

func roomPackage(t testing.TB) string {
	p, err := filepath.Abs(filepath.Join("..", "harness", "testdata", "room-package"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// needAgentRoom skips unless this machine can run both the sealed room
// and the candidate sandbox (root, the namespaces, the cgroups).
func needAgentRoom(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("room agent needs root (the candidate sandbox and the seal)")
	}
	if err := deathsig.Run(seal.SealedCommand("/bin/true", nil, nil)); err != nil {
		t.Skipf("cannot create mount+network namespaces here: %v", err)
	}
	if _, err := sandbox.CheckKernel(); err != nil {
		t.Skipf("the candidate sandbox cannot run here: %v", err)
	}
}

// stateDir is a sandbox state root of the test's own, unmounted at the end.
func stateDir(tb testing.TB) string {
	tb.Helper()
	state := filepath.Join(tb.TempDir(), "state")
	// The candidate's init (an unprivileged uid) passes through the state
	// root's parents: t.TempDir makes them 0700.
	readableByCandidate(tb, filepath.Dir(state))
	tb.Cleanup(func() {
		// EINVAL: nothing is mounted there.
		for unix.Unmount(state, unix.MNT_DETACH) == nil {
		}
	})
	return state
}

// readableByCandidate makes dir and its parents up to the system's
// temporary directory readable and searchable by others (the candidate
// runs as an unprivileged uid; t.TempDir makes them 0700).
func readableByCandidate(tb testing.TB, dir string) {
	tb.Helper()
	for p := dir; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.Chmod(p, fi.Mode().Perm()|0o055); err != nil {
			tb.Fatal(err)
		}
	}
}

// testOptions is a session on the room package with the test binary as
// the relay and the room's stages.
func testOptions(t testing.TB, command ...string) (Options, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	var stdout, stderr bytes.Buffer
	return Options{
		Room: harness.ServeOptions{PackageDir: roomPackage(t), Expect: roomPackagePin,
			Workspace: filepath.Join(base, "ws"), Transcript: filepath.Join(base, "transcript.jsonl"),
			StageArgs: []string{stageMarker}},
		Command: command, Relay: self, StateDir: stateDir(t), Timeout: 3 * time.Minute,
		Stdout: &stdout, Stderr: &stderr,
	}, &stdout, &stderr
}

// readTranscript reads the session's record through the strict reader.
func readTranscript(t *testing.T, path string) *evidence.Object {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := harness.ReadTranscript(b)
	if err != nil {
		t.Fatalf("transcript: %v\n%s", err, b)
	}
	// The agent line's journal goes once the line is in the record.
	if _, err := os.Lstat(path + harness.PendingSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the agent line's journal is left beside the transcript: %v", err)
	}
	return doc
}

// serveLoopback runs a TCP server on the host's loopback that hands each
// connection to serve (which closes it) until the test ends.
func serveLoopback(tb testing.TB, serve func(net.Conn)) net.Listener {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return l
}

// loopback is the stand-in servers' address.
var loopback = netip.MustParseAddr("127.0.0.1")

func runSession(t *testing.T, o Options) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("Run: %v\nstderr:\n%s", err, o.Stderr)
	}
	return res
}
