package agentroom

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// relayPair is a connected unix stream socket pair: the relay's end as a
// descriptor, room agent's as the *net.UnixConn its listener accepts.
func relayPair(t *testing.T) (int, *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[1]), "room-agent-end")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); c.Close() })
	return fds[0], c.(*net.UnixConn)
}

func pipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// probePipe is a pipe whose write end a hello hands over: once the test
// has closed its own copy, end of file on r says no one holds w.
type probePipe struct{ r, w *os.File }

func newProbe(t *testing.T) *probePipe {
	r, w := pipe(t)
	return &probePipe{r, w}
}

func (p *probePipe) fd() int { return int(p.w.Fd()) }

// listenerPair connects to a listener of the test's own and returns the
// connected (or, if accepted, the accepted) end as a file.
func listenerPair(t *testing.T, accepted bool) *os.File {
	t.Helper()
	l, err := net.Listen("unix", "@cleanroom-test-"+strings.ReplaceAll(t.Name(), "/", "-"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if accepted {
		c = s
	}
	f, err := c.(*net.UnixConn).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestRelayHandshake: room agent's side of the relay's first message —
// two byte streams are handed to the room as they are, the copy hello
// makes the connection itself the room's stdio, and anything else is
// refused by name with every descriptor it carried closed.
func TestRelayHandshake(t *testing.T) {
	type started struct {
		stdin, stdout *os.File
		mode          string
	}
	// toRoom and fromRoom are the agent's ends of the two pipes whose
	// other ends the relay hands over.
	tests := []struct {
		name string
		// hello is the relay's first message; if it hands over the write
		// end of a probe pipe, a refusal must close it.
		hello   func(t *testing.T) (byte, []int, *probePipe)
		wantErr error
		copy    bool
	}{
		{"two pipes", nil, nil, false},
		{"a socket pair", func(t *testing.T) (byte, []int, *probePipe) {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
			return helloPass, []int{fds[0], fds[0]}, nil
		}, nil, false},
		{"copy", func(*testing.T) (byte, []int, *probePipe) { return helloCopy, nil, nil }, nil, true},
		{"garbage", func(*testing.T) (byte, []int, *probePipe) { return '{', nil, nil }, errNotRelay, false},
		{"pass without descriptors", func(*testing.T) (byte, []int, *probePipe) { return helloPass, nil, nil }, errNotRelay, false},
		{"copy with descriptors", func(t *testing.T) (byte, []int, *probePipe) {
			p := newProbe(t)
			return helloCopy, []int{p.fd()}, p
		}, errNotRelay, false},
		{"three descriptors", func(t *testing.T) (byte, []int, *probePipe) {
			p := newProbe(t)
			return helloPass, []int{p.fd(), p.fd(), p.fd()}, p
		}, errNotRelay, false},
		{"a regular file", func(t *testing.T) (byte, []int, *probePipe) {
			f, err := os.Open("relay.go")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			p := newProbe(t)
			return helloPass, []int{int(f.Fd()), p.fd()}, p
		}, errNotByteStream, false},
		{"a device", func(t *testing.T) (byte, []int, *probePipe) {
			f, err := os.OpenFile("/dev/null", os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			p := newProbe(t)
			return helloPass, []int{p.fd(), int(f.Fd())}, p
		}, errNotByteStream, false},
		{"a datagram socket", func(t *testing.T) (byte, []int, *probePipe) {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fd) })
			return helloPass, []int{fd, fd}, nil
		}, errNotByteStream, false},
		{"a TCP socket", func(t *testing.T) (byte, []int, *probePipe) {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fd) })
			return helloPass, []int{fd, fd}, nil
		}, errNotByteStream, false},
		{"a unix socket connected to a listener", func(t *testing.T) (byte, []int, *probePipe) {
			f := listenerPair(t, false)
			return helloPass, []int{int(f.Fd()), int(f.Fd())}, nil
		}, errNotByteStream, false},
		{"a unix socket accepted by a listener", func(t *testing.T) (byte, []int, *probePipe) {
			f := listenerPair(t, true)
			return helloPass, []int{int(f.Fd()), int(f.Fd())}, nil
		}, errNotByteStream, false},
		{"a listening unix socket", func(t *testing.T) (byte, []int, *probePipe) {
			l, err := net.Listen("unix", "@cleanroom-test-"+strings.ReplaceAll(t.Name(), "/", "-"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close() })
			f, err := l.(*net.UnixListener).File()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return helloPass, []int{int(f.Fd()), int(f.Fd())}, nil
		}, errNotByteStream, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			peer, c := relayPair(t)
			// The relay's stdio: the agent writes requests to toRoom and
			// reads answers from fromRoom.
			stdinR, toRoom := pipe(t)
			fromRoom, stdoutW := pipe(t)
			hello, fds := byte(helloPass), []int{int(stdinR.Fd()), int(stdoutW.Fd())}
			var probe *probePipe
			if tc.hello != nil {
				hello, fds, probe = tc.hello(t)
			}
			var rights []byte
			if len(fds) > 0 {
				rights = unix.UnixRights(fds...)
			}
			if err := unix.Sendmsg(peer, []byte{hello}, rights, nil, 0); err != nil {
				t.Fatal(err)
			}
			if probe != nil {
				// In flight, the kernel holds it: the test's copy goes.
				probe.w.Close()
			}
			var got *started
			err := relayHandshake(c, func(stdin, stdout *os.File, conn net.Conn, mode string) bool {
				got = &started{stdin, stdout, mode}
				return true
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("relayHandshake = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if got != nil {
					t.Fatalf("the room started on a refused hello")
				}
				// Refused: the connection is closed (the relay reads its
				// end) and no descriptor it carried is kept open here.
				if n, _ := unix.Read(peer, make([]byte, 1)); n != 0 {
					t.Errorf("the refused connection is still open")
				}
				if probe != nil {
					// Every write end of the probe's pipe is closed: the
					// one room agent received too (else no end of file).
					_ = probe.r.SetReadDeadline(time.Now().Add(time.Minute))
					if n, err := probe.r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
						t.Errorf("a refused descriptor is still open here: read %d, %v", n, err)
					}
				}
				return
			}
			if got == nil {
				t.Fatal("the room did not start")
			}
			defer got.stdin.Close()
			defer got.stdout.Close()
			if want := map[bool]string{true: relayCopied, false: relayHanded}[tc.copy]; got.mode != want {
				t.Errorf("mode %q, want %q", got.mode, want)
			}
			if tc.copy {
				if got.stdin != got.stdout {
					t.Errorf("copy: stdin and stdout are two files")
				}
				// What the relay writes is the room's stdin, and the room's
				// stdout is what the relay reads.
				roundTrip(t, func(b []byte) { _, _ = unix.Write(peer, b) }, got.stdin)
				roundTrip(t, func(b []byte) { _, _ = got.stdout.Write(b) }, fdReader(peer))
				return
			}
			// The handed descriptors are the ones sent, in order.
			for i, f := range []*os.File{got.stdin, got.stdout} {
				var a, b unix.Stat_t
				if unix.Fstat(int(f.Fd()), &a) != nil || unix.Fstat(fds[i], &b) != nil || a.Ino != b.Ino || a.Dev != b.Dev {
					t.Errorf("descriptor %d is not the one sent", i)
				}
			}
			if tc.hello == nil {
				// The relay's pipes themselves: bytes go through.
				roundTrip(t, func(b []byte) { _, _ = toRoom.Write(b) }, got.stdin)
				roundTrip(t, func(b []byte) { _, _ = got.stdout.Write(b) }, fromRoom)
			}
		})
	}
}

// fdReader reads a descriptor the test closes itself.
type fdReader int

func (r fdReader) Read(b []byte) (int, error) {
	n, err := unix.Read(int(r), b)
	if n == 0 && err == nil {
		return 0, io.EOF
	}
	return max(n, 0), err
}

// roundTrip writes a line with write and reads it back from r.
func roundTrip(t *testing.T, write func([]byte), r io.Reader) {
	t.Helper()
	want := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")
	write(want)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, want) {
		t.Errorf("read %q, %v; want %q", got, err, want)
	}
}

// copyRelayMain is an agent whose relay has a regular file as stdout
// (as `relay > out` in a shell): the relay cannot hand it to the room and
// copies. It reads benchFile, ends the session and prints what the relay
// wrote.
func copyRelayMain() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	out, err := os.Create(filepath.Join(AgentHome, "relay-out"))
	if err != nil {
		return fail(err)
	}
	cmd := exec.Command(RelayPath, RelayArgs...)
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		return fail(err)
	}
	// One request at a time, each answer awaited in the file (the room
	// may take requests concurrently: a call must not race initialize).
	var b []byte
	for i, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n",
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"` + benchFile + `"}}}` + "\n",
	} {
		if _, err := io.WriteString(stdin, m); err != nil {
			return fail(err)
		}
		answer := []byte(fmt.Sprintf(`"id":%d`, i+1))
		for j := 0; j < 600 && !bytes.Contains(b, answer); j++ {
			time.Sleep(100 * time.Millisecond)
			b, _ = os.ReadFile(out.Name())
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		return fail(fmt.Errorf("relay: %w", err))
	}
	b, _ = os.ReadFile(out.Name())
	if _, err := os.Stdout.Write(b); err != nil {
		return fail(err)
	}
	return 0
}

// TestRelayCopies: a relay whose stdio cannot be handed over copies, and
// the session is the same: the answer reaches the agent, the call is in
// the transcript.
func TestRelayCopies(t *testing.T) {
	needAgentRoom(t)
	o, stdout, stderr := testOptions(t, RelayPath, "copy-relay")
	res := runSession(t, o)
	if res.Sandbox.ExitCode != 0 || !strings.Contains(stdout.String(), "Sorted") {
		t.Fatalf("agent status %d, output %q\n%s", res.Sandbox.ExitCode, stdout, stderr)
	}
	doc := readTranscript(t, o.Room.Transcript)
	if a, _ := doc.Get("access"); len(a.([]any)) != 1 {
		t.Errorf("access %v, want the one read_file", a)
	}
	if res.RelayConnections != 1 || res.RelayRefused != 0 || res.RoomEnded != "" || res.RelayMode != relayCopied {
		t.Errorf("relay connections %d, refused %d, room ended %q, mode %q", res.RelayConnections, res.RelayRefused, res.RoomEnded, res.RelayMode)
	}
}

// relayTricksMain is an agent that misuses the relay socket: one pipe's
// two ends as the room's stdin and stdout, so that the room holds the
// only writer of its own stdin and would wait for ever; then a regular
// file handed as stdin (refused) and three descriptors (refused).
func relayTricksMain() int {
	hello := func(fds ...int) error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: RelaySocket}); err != nil {
			return err
		}
		if err := unix.Sendmsg(fd, []byte{helloPass}, unix.UnixRights(fds...), nil, 0); err != nil {
			return err
		}
		// Wait for room agent's verdict (a refusal closes the connection).
		_, err = unix.Read(fd, make([]byte, 1))
		return err
	}
	f, err := os.Open(RelayPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The loop first, not waited for (the room never answers it); the
	// refusals after it are, so that when they are answered room agent
	// has accepted the loop's connection too (connections are accepted
	// in order): none is left in the listener's queue when this agent
	// exits and the listener closes.
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: RelaySocket})
	}
	if err == nil {
		err = unix.Sendmsg(fd, []byte{helloPass}, unix.UnixRights(int(r.Fd()), int(w.Fd())), nil, 0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, fds := range [][]int{{int(f.Fd()), int(w.Fd())}, {int(r.Fd()), int(w.Fd()), int(w.Fd())}} {
		if err := hello(fds...); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return 0
}

// TestRelayTricks: descriptors that are not byte streams are refused by
// name and never reach the room; a room made to hold its own stdin's
// writer is ended by room agent once the sandbox is gone (SIGTERM: its
// transcript is whole), and the agent line says so.
func TestRelayTricks(t *testing.T) {
	needAgentRoom(t)
	o, _, stderr := testOptions(t, RelayPath, "relay-tricks")
	o.stopGrace = time.Second
	res := runSession(t, o)
	if res.Sandbox.ExitCode != 0 {
		t.Fatalf("agent status %d\n%s", res.Sandbox.ExitCode, stderr)
	}
	if res.RelayConnections != 3 || res.RelayRefused != 2 || res.RoomEnded != "stopped" || res.RelayMode != relayHanded {
		t.Errorf("relay connections %d, refused %d, room ended %q; want 3, 2, stopped\n%s", res.RelayConnections, res.RelayRefused, res.RoomEnded, stderr)
	}
	for _, want := range []string{errNotByteStream.Error(), errNotRelay.Error()} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not name %q:\n%s", want, stderr)
		}
	}
	doc := readTranscript(t, o.Room.Transcript)
	if c, _ := doc.Get("complete"); c != true {
		t.Errorf("transcript not complete")
	}
	agent, _ := doc.Get("agent")
	line := agent.(interface{ Get(string) (any, bool) })
	if v, _ := line.Get("room_ended"); v != "stopped" {
		t.Errorf("agent line room_ended %v, want stopped", v)
	}
	if v, _ := line.Get("relay_refused"); v != float64(2) {
		t.Errorf("agent line relay_refused %v, want 2", v)
	}
}

// TestWaitRoom: a room that ends by itself is waited for; one that ends
// only when told (stop closed) is "stopped"; one that ignores that too is
// killed, and waited for.
func TestWaitRoom(t *testing.T) {
	errRoom := errors.New("room's error")
	for _, want := range []string{"", "stopped", "killed"} {
		t.Run("ended "+want, func(t *testing.T) {
			done := make(chan error, 1)
			stop := make(chan struct{})
			killed := make(chan struct{})
			switch want {
			case "":
				done <- errRoom
			case "stopped":
				go func() { <-stop; done <- errRoom }()
			case "killed":
				go func() { <-killed; done <- errRoom }()
			}
			// The grace is a bound, not a measure: long enough for a room
			// told to stop to be seen stopping before the kill.
			grace := time.Millisecond
			if want == "stopped" {
				grace = time.Second
			}
			got, err := waitRoom(done, stop, func() { close(killed) }, grace)
			if got != want || err != errRoom {
				t.Errorf("waitRoom = %q, %v; want %q, %v", got, err, want, errRoom)
			}
		})
	}
}
