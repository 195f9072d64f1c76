package agentroom

import (
	"fmt"
	"io"
	"os"
	"runtime"

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

// Relay is the relay command run by the agent inside the sandbox as its
// MCP server: it connects to RelaySocket and copies in to the room and
// the room's answers to out, until the room closes its side. It reads and
// writes bytes only; the room is what speaks (and gates) MCP. The socket
// is used in blocking mode, each direction on its own thread: a
// read_file's round trip crosses this process twice, and a wake-up
// through the runtime's poller costs more than the copy.
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
