package agentroom

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RelaySocket is the abstract unix socket, in the sandbox's network
// namespace, on which room agent hands the agent's MCP connection to the
// sealed room. An abstract name belongs to the network namespace: nothing
// is bound into the sandbox's file system, and no other namespace (the
// host's included) can reach it.
const RelaySocket = "@cleanroom-room"

// ProxyAddress is where the egress proxy listens in the sandbox's network
// namespace (its loopback: the namespace has no other link).
const ProxyAddress = "127.0.0.1:3128"

// RelayPath is where the relay binary (this program) is bound read-only
// in the sandbox; an agent's MCP configuration names it with RelayArgs.
const RelayPath = "/opt/cleanroom/cleanroom"

// RelayArgs are the relay command's arguments after RelayPath.
var RelayArgs = []string{"room", "relay"}

// The relay's first byte on RelaySocket says how the room gets the
// agent's MCP stream.
const (
	// helloPass comes with two descriptors (SCM_RIGHTS), the relay's
	// stdin and stdout: the room reads and writes them itself, and the
	// relay leaves the data path.
	helloPass = 'P'
	// helloCopy: the connection itself is the room's stdin and stdout,
	// the relay copying its stdio to it (stdio that is not a byte stream
	// the room may be handed: a terminal, /dev/null, a file).
	helloCopy = 'C'
)

// errNotRelay: a relay connection's first message is neither hello.
var errNotRelay = errors.New("not a relay's first message")

// errNotByteStream: a descriptor offered to the room is not a pipe or one
// end of an anonymous unix stream socket pair.
var errNotByteStream = errors.New("not a pipe or an anonymous unix socket pair")

// byteStream checks that fd is a pipe or one end of an anonymous AF_UNIX
// stream socket pair. The room, outside the sandbox, reads and writes
// what the relay hands it: only a plain byte stream, never a file, a
// device or another kind of socket whose operations could carry more
// than bytes the agent could send itself.
func byteStream(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return nil
	case unix.S_IFSOCK:
		dom, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
		typ, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
		lis, err3 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		// Only an anonymous pair (socketpair: what MCP clients start
		// servers with), both ends unnamed: a socket connected to a
		// listener (a service bound in a directory the sandbox sees, or
		// room agent's own relay socket) would have the room write, with
		// its credentials, into that service.
		if dom == unix.AF_UNIX && typ == unix.SOCK_STREAM && lis == 0 && unnamed(fd, unix.SYS_GETSOCKNAME) && unnamed(fd, unix.SYS_GETPEERNAME) {
			return nil
		}
	}
	return errNotByteStream
}

// unnamed reports whether getsockname or getpeername (trap) of the unix
// socket fd returns the unnamed address: the address family alone, no
// path and no abstract name (not even an empty one).
func unnamed(fd int, trap uintptr) bool {
	var rsa unix.RawSockaddrAny
	n := uint32(unsafe.Sizeof(rsa))
	_, _, errno := unix.Syscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&n)))
	return errno == 0 && n == uint32(unsafe.Sizeof(rsa.Addr.Family))
}

// Relay is the relay command run by the agent inside the sandbox as its
// MCP server. It connects to RelaySocket and, when its stdin and stdout
// are pipes or anonymous unix socket pairs (what MCP clients start a server
// with), passes both descriptors to room agent, which hands them to the
// room as its stdin and stdout: the agent's client and the room then
// exchange bytes directly, as with `room serve` (a read_file's round trip
// crosses no extra process). The relay then only waits for room agent to
// close the connection (the room's session has ended) and exits.
//
// Otherwise it copies in to the room and the room's answers to out over
// the connection until the room closes its side, each direction on its
// own thread on blocking descriptors. Either way it reads and writes
// bytes only; the room is what speaks (and gates) MCP.
func Relay(in io.Reader, out io.Writer) error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("connecting to the room: %w", err)
	}
	// The abstract name: a leading NUL in the kernel's address.
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: RelaySocket}); err != nil {
		unix.Close(fd)
		return fmt.Errorf("connecting to the room: %w", err)
	}
	c := os.NewFile(uintptr(fd), "room")
	defer c.Close()
	if fin, fout, ok := passable(in, out); ok {
		if err := unix.Sendmsg(fd, []byte{helloPass}, unix.UnixRights(int(fin.Fd()), int(fout.Fd())), nil, 0); err != nil {
			return fmt.Errorf("handing stdio to the room: %w", err)
		}
		// The room holds them now. This process's copies are closed: the
		// room's end of stdout must be the client's only peer, so that the
		// room's exit is the end of stream the client sees.
		fin.Close()
		fout.Close()
		// Room agent closes the connection when the room has ended.
		if _, err := io.Copy(io.Discard, c); err != nil {
			return fmt.Errorf("waiting for the room: %w", err)
		}
		return nil
	}
	if _, err := c.Write([]byte{helloCopy}); err != nil {
		return fmt.Errorf("connecting to the room: %w", err)
	}
	go func() {
		runtime.LockOSThread()
		_, _ = io.Copy(c, in)
		// The agent closed the server's stdin: the room's stdin ends too,
		// and it ends the session.
		_ = unix.Shutdown(fd, unix.SHUT_WR)
	}()
	runtime.LockOSThread()
	if _, err := io.Copy(out, c); err != nil {
		return fmt.Errorf("relaying the room's answers: %w", err)
	}
	return nil
}

// passable returns in and out as files when both are byte streams the
// room may be handed.
func passable(in io.Reader, out io.Writer) (*os.File, *os.File, bool) {
	fin, ok1 := in.(*os.File)
	fout, ok2 := out.(*os.File)
	if !ok1 || !ok2 || fin == nil || fout == nil {
		return nil, nil, false
	}
	if byteStream(int(fin.Fd())) != nil || byteStream(int(fout.Fd())) != nil {
		return nil, nil, false
	}
	return fin, fout, true
}

// How the room got the agent's MCP stream (Result.RelayMode).
const (
	relayHanded = "handed" // the relay's stdin and stdout themselves
	relayCopied = "copied" // the connection, the relay copying
)

// relayHandshakeTimeout bounds the wait for a relay connection's first
// message: a connection that sends nothing is not kept.
const relayHandshakeTimeout = 30 * time.Second

// relayHandshake reads a relay connection's first message and starts the
// room on what it offers: the two descriptors of helloPass (the relay's
// stdin and stdout) or, after helloCopy, the connection itself. start
// (told the mode) reports whether the room started (only once per
// session); whatever the room did not get is closed here. A first message
// that is neither is refused (the connection closed) with the error
// returned.
func relayHandshake(c *net.UnixConn, start func(stdin, stdout *os.File, conn net.Conn, mode string) bool) error {
	_ = c.SetReadDeadline(time.Now().Add(relayHandshakeTimeout))
	var b [1]byte
	// Room for more descriptors than a relay sends: a message with more
	// is received whole (and refused) rather than cut by the kernel.
	oob := make([]byte, unix.CmsgSpace(8*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(b[:], oob)
	// ReadMsgUnix receives with MSG_CMSG_CLOEXEC: no descriptor of the
	// agent's leaks into a process room agent starts.
	var fds []int
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for _, m := range msgs {
			if r, rerr := unix.ParseUnixRights(&m); rerr == nil {
				fds = append(fds, r...)
			}
		}
	}
	refuse := func(err error) error {
		for _, fd := range fds {
			unix.Close(fd)
		}
		c.Close()
		return err
	}
	switch {
	case err != nil:
		return refuse(fmt.Errorf("no first message: %w", err))
	case flags&unix.MSG_CTRUNC != 0:
		return refuse(fmt.Errorf("%w: descriptors cut short (too many)", errNotRelay))
	case n == 1 && b[0] == helloPass && len(fds) == 2:
		for _, fd := range fds {
			// The room, outside the sandbox, reads and writes these: only
			// a byte stream, never a file, a device or a socket of another
			// kind the agent opened.
			if err := byteStream(fd); err != nil {
				return refuse(fmt.Errorf("a descriptor handed to the room: %w", err))
			}
		}
		_ = c.SetReadDeadline(time.Time{})
		stdin, stdout := os.NewFile(uintptr(fds[0]), "agent-stdin"), os.NewFile(uintptr(fds[1]), "agent-stdout")
		if !start(stdin, stdout, c, relayHanded) {
			stdin.Close()
			stdout.Close()
			c.Close()
		}
		return nil
	case n == 1 && b[0] == helloCopy && len(fds) == 0:
		_ = c.SetReadDeadline(time.Time{})
		f, err := c.File()
		if err != nil {
			return refuse(err)
		}
		if !start(f, f, c, relayCopied) {
			f.Close()
			c.Close()
		}
		return nil
	}
	return refuse(fmt.Errorf("%w: %q with %d descriptors", errNotRelay, b[:n], len(fds)))
}

// roomStopGrace is how long the room may outlive the agent's sandbox
// before it is told to end (SIGTERM: it writes its end line), and then
// before it is killed. The sandbox's end ends the room's stdin, unless
// the agent made the room hold the other end itself (a pipe's two ends as
// stdin and stdout, a socket queued inside the room's stdout): then only
// this bound ends the session.
const roomStopGrace = 10 * time.Second

// waitRoom waits for the room's end (done), closing stop after grace and
// calling kill after another. It returns how the room was ended: ""
// (by itself), "stopped" or "killed", and the room's error.
func waitRoom(done <-chan error, stop chan<- struct{}, kill func(), grace time.Duration) (string, error) {
	select {
	case err := <-done:
		return "", err
	case <-time.After(grace):
	}
	close(stop)
	select {
	case err := <-done:
		return "stopped", err
	case <-time.After(grace):
	}
	kill()
	return "killed", <-done
}
