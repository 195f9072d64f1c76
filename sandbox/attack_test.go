package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// attacks are what a hostile candidate tries from inside a full-isolation
// container, each printing NAME=RESULT (an errno name, or OK when the
// attempt succeeded). arg is a per-run token (the host's abstract socket
// name, the key description).
var attacks = map[string]func(arg string) error{
	// Network, policy none.
	"raw_socket": func(string) error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
		closeFD(fd, err)
		return err
	},
	"packet_socket": func(string) error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		closeFD(fd, err)
		return err
	},
	// Not network-namespaced: a virtual machine's channel to its host.
	"vsock_socket": func(string) error {
		fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
		closeFD(fd, err)
		return err
	},
	"netlink_audit": func(string) error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT)
		closeFD(fd, err)
		return err
	},
	// Network and file operations outside the system calls the filter
	// judges.
	"io_uring_setup": func(string) error {
		params := make([]byte, 120) // struct io_uring_params
		fd, _, en := unix.Syscall(unix.SYS_IO_URING_SETUP, 8, uintptr(unsafe.Pointer(&params[0])), 0)
		if en != 0 {
			return en
		}
		unix.Close(int(fd))
		return nil
	},
	"ptrace": func(string) error {
		_, _, en := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0, 0, 0, 0)
		if en != 0 {
			return en
		}
		return nil
	},
	"ping_socket": func(string) error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP)
		closeFD(fd, err)
		return err
	},
	"netlink_route_add": func(string) error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		_, all, _ := net.ParseCIDR("0.0.0.0/0")
		return netlink.RouteAdd(&netlink.Route{Dst: all, LinkIndex: lo.Attrs().Index, Scope: netlink.SCOPE_LINK})
	},
	"netlink_link_add": func(string) error {
		return netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "out0"}})
	},
	"abstract_unix":   func(name string) error { return dialClose("unix", "@"+name) },
	"ipv6_link_local": func(string) error { return dialClose("tcp", "[fe80::1%lo]:80") },
	"ipv6_public":     func(string) error { return dialClose("tcp", "[2606:4700:4700::1111]:443") },
	"udp_public": func(string) error {
		c, err := net.Dial("udp", "8.8.8.8:53")
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("x"))
		return err
	},
	"dns": func(string) error {
		_, err := net.LookupHost("example.com")
		return err
	},
	// The host's file systems and devices.
	"mknod":        func(string) error { return unix.Mknod("/tmp/sda", unix.S_IFBLK|0o600, int(unix.Mkdev(8, 0))) },
	"mount":        func(string) error { return unix.Mount("tmpfs", "/usr", "tmpfs", 0, "") },
	"core_pattern": func(string) error { return os.WriteFile("/proc/sys/kernel/core_pattern", []byte("|/workspace/x"), 0) },
	"write_usr":    func(string) error { return os.WriteFile("/usr/cleanroom-attack", nil, 0o644) },
	// The host's kernel keyrings: root's user keyring is shared by every
	// uid-0 process of the host's user namespace and outlives the run.
	"add_key_user": func(desc string) error {
		_, err := unix.AddKey("user", desc, []byte("candidate"), unix.KEY_SPEC_USER_KEYRING)
		return err
	},
	"add_key_session": func(desc string) error {
		_, err := unix.AddKey("user", desc, []byte("candidate"), unix.KEY_SPEC_SESSION_KEYRING)
		return err
	},
	"read_user_keyring": func(string) error {
		_, err := unix.KeyctlBuffer(unix.KEYCTL_READ, unix.KEY_SPEC_USER_KEYRING, make([]byte, 1024), 0)
		return err
	},
	// A user namespace of its own: every capability over new namespaces,
	// and with it the kernel code only privilege reaches.
	"unshare_user": func(string) error { return unix.Unshare(unix.CLONE_NEWUSER) },
	"clone_user": func(string) error {
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}})
		if err == nil {
			syscall.Wait4(pid, nil, 0, nil)
		}
		return err
	},
	// clone3's flags are in memory, out of a filter's reach: it is not
	// there at all (size 0 would be EINVAL if it were).
	"clone3": func(string) error {
		_, _, en := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
		return en
	},
	// A plain child still starts (through clone).
	"fork_exec": func(string) error {
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
		if err == nil {
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil)
			if ws.ExitStatus() != 0 {
				return fmt.Errorf("true exited %d", ws.ExitStatus())
			}
		}
		return err
	},
}

func closeFD(fd int, err error) {
	if err == nil {
		unix.Close(fd)
	}
}

func dialClose(network, addr string) error {
	c, err := net.DialTimeout(network, addr, 3*time.Second)
	if err == nil {
		c.Close()
	}
	return err
}

func attackMain(args []string) int {
	token := args[0]
	for _, name := range args[1:] {
		err := attacks[name](token)
		res := "OK"
		var en syscall.Errno
		switch {
		case err == nil:
		case errors.As(err, &en):
			res = unix.ErrnoName(en)
		default:
			res = "error:" + err.Error()
		}
		fmt.Printf("%s=%s\n", name, res)
	}
	return 0
}

// A hostile candidate in a full-isolation run: every attempt to reach a
// network, the host's devices and file systems, or the host's kernel
// keyrings fails, and nothing it tried is left on the host.
func TestCandidateAttacks(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	ws := t.TempDir()
	bin := copySelf(t, ws)
	token := fmt.Sprintf("cleanroom-attack-%d-%d", os.Getpid(), time.Now().UnixNano())
	// An abstract socket of the host's network namespace: abstract names
	// belong to a network namespace, so the candidate's is another.
	ln, err := net.Listen("unix", "@"+token)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Cleanup(func() { removeHostKeys(t, token) })
	want := map[string]string{
		"raw_socket":        "EPERM",
		"packet_socket":     "EPERM",
		"vsock_socket":      "EPERM",
		"netlink_audit":     "EPERM",
		"io_uring_setup":    "EPERM",
		"ptrace":            "EPERM",
		"ping_socket":       "EACCES",
		"netlink_route_add": "EPERM",
		"netlink_link_add":  "EPERM",
		"abstract_unix":     "ECONNREFUSED",
		"ipv6_link_local":   "ENETUNREACH",
		"ipv6_public":       "ENETUNREACH",
		"udp_public":        "ENETUNREACH",
		"dns":               "error:",
		"mknod":             "EPERM",
		"mount":             "EPERM",
		"core_pattern":      "EROFS",
		"write_usr":         "EROFS",
		"add_key_user":      "EPERM",
		"add_key_session":   "EPERM",
		"read_user_keyring": "EPERM",
		"unshare_user":      "EPERM",
		"clone_user":        "EPERM",
		"clone3":            "ENOSYS",
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	res, out, stderr := runIn(t, Config{Workspace: ws}, bin+" attack "+token+" "+strings.Join(names, " "))
	if res.Status != StatusExited || res.ExitCode != 0 {
		t.Fatalf("status %s/%d, stderr %s", res.Status, res.ExitCode, stderr)
	}
	got := keyValues(out)
	for _, n := range names {
		if g := got[n]; g == "OK" || !strings.HasPrefix(g, want[n]) {
			t.Errorf("%s: %q, want %s", n, g, want[n])
		}
	}
	// What the filter leaves alone still works: a child through clone.
	res, out, stderr = runIn(t, Config{Workspace: ws}, bin+" attack "+token+" fork_exec")
	if g := keyValues(out)["fork_exec"]; res.ExitCode != 0 || g != "OK" {
		t.Errorf("fork_exec: %q (exit %d, stderr %s), want OK", g, res.ExitCode, stderr)
	}
	if _, err := os.Stat(filepath.Join("/usr", "cleanroom-attack")); err == nil {
		t.Errorf("the candidate wrote the host's /usr")
	}
	if keys, _ := os.ReadFile("/proc/keys"); strings.Contains(string(keys), token) {
		t.Errorf("a key the candidate added is left in the host's keyrings")
	}
}

// removeHostKeys unlinks from root's user keyring the keys an attack
// left there (only when the sandbox let it add them). The key grants the
// owner only view, so it is found by listing the keyring.
func removeHostKeys(t *testing.T, desc string) {
	buf := make([]byte, 4096)
	n, err := unix.KeyctlBuffer(unix.KEYCTL_READ, unix.KEY_SPEC_USER_KEYRING, buf, 0)
	if err != nil || n > len(buf) {
		t.Logf("listing the user keyring: %d bytes, %v", n, err)
		return
	}
	for i := 0; i+4 <= n; i += 4 {
		id := int(int32(binary.NativeEndian.Uint32(buf[i:])))
		d, err := unix.KeyctlString(unix.KEYCTL_DESCRIBE, id)
		if err != nil || !strings.HasSuffix(d, ";"+desc) {
			continue
		}
		if _, err := unix.KeyctlInt(unix.KEYCTL_UNLINK, id, unix.KEY_SPEC_USER_KEYRING, 0, 0); err != nil {
			t.Logf("unlink key %d: %v", id, err)
		}
	}
}

// Nothing the candidate starts outlives its run: a double-forked process
// in a session of its own that ignores SIGTERM is killed when the command
// exits, and when the timeout kills the container.
func TestCandidateLeavesNoProcess(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	// The daemon writes a second after the timeout, not at it: the timer
	// starts once the command runs, and under load the kill came after a
	// one-second sleep had ended (a flaky failure, not a survivor).
	daemon := `setsid sh -c 'trap "" TERM HUP INT; (trap "" TERM HUP INT; sleep 2; echo late > /workspace/late) & exit 0' </dev/null >/dev/null 2>&1 &`
	for _, tc := range []struct {
		name, script string
		timeout      time.Duration
		status       string
	}{
		{"command exits", daemon + " sleep 0.5; exit 0", 0, StatusExited},
		{"timeout", daemon + " sleep 60", time.Second, StatusTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			res, _, stderr := runIn(t, Config{Workspace: ws, Timeout: tc.timeout}, tc.script)
			if res.Status != tc.status {
				t.Fatalf("status %s, want %s (stderr %s)", res.Status, tc.status, stderr)
			}
			time.Sleep(3 * time.Second)
			if _, err := os.Stat(filepath.Join(ws, "late")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a process outlived the run: %v", err)
			}
		})
	}
}
