package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The adversarial battery (issue 19, rerun): every attack class a hostile
// candidate has against the sandbox, each an attempt run inside a
// full-isolation container that prints NAME=RESULT (attack_test.go's
// runner), and each asserted to fail with the errno of the defence that
// stops it — the filter (EPERM for a call or family it refuses, ENOSYS for
// clone3), the kernel's capability checks (EPERM), the read-only mounts
// (EROFS), the mount and PID namespaces (EXDEV, ESRCH, ENOENT). The
// results are in docs/security/battery.md.

// sys makes one raw system call and returns its errno (nil on success);
// a descriptor it returns is closed.
func sys(nr uintptr, args ...uintptr) error {
	var a [6]uintptr
	copy(a[:], args)
	r, _, en := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	if en != 0 {
		return en
	}
	if returnsFD[nr] {
		unix.Close(int(r))
	}
	return nil
}

var returnsFD = map[uintptr]bool{
	unix.SYS_PERF_EVENT_OPEN: true, unix.SYS_BPF: true, unix.SYS_USERFAULTFD: true, unix.SYS_FSOPEN: true,
	unix.SYS_FSPICK: true, unix.SYS_OPEN_TREE: true, unix.SYS_FANOTIFY_INIT: true, unix.SYS_PIDFD_GETFD: true,
	unix.SYS_OPEN_BY_HANDLE_AT: true, unix.SYS_PIDFD_OPEN: true,
}

func cstr(s string) uintptr {
	p, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	return uintptr(unsafe.Pointer(p))
}

// allFamilies is every address family a socket could be asked for
// (AF_UNSPEC through AF_MCTP and a few beyond).
const allFamilies = 50

// allowedFamily is the filter's list: every other family must be refused
// by the filter itself (EPERM), whatever the socket type.
var allowedFamily = map[int]bool{unix.AF_UNIX: true, unix.AF_INET: true, unix.AF_INET6: true, unix.AF_NETLINK: true}

// socketEveryType tries socket(family, type, 0) for each type and returns
// EPERM only if every attempt failed with EPERM.
func socketEveryType(family int) error {
	for _, typ := range []int{unix.SOCK_STREAM, unix.SOCK_DGRAM, unix.SOCK_RAW, unix.SOCK_SEQPACKET, unix.SOCK_RDM, unix.SOCK_PACKET} {
		fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
		closeFD(fd, err)
		if err == nil {
			return fmt.Errorf("type %d: OK", typ)
		}
		if !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("type %d: %w", typ, err)
		}
	}
	return unix.EPERM
}

// rtnlWrite sends one NETLINK_ROUTE message of type typ (a request to
// change something: kind NEW, DEL or SET) for lo through send and returns
// the errno of the kernel's answer.
func rtnlWrite(typ uint16, send func(fd int, msg []byte) error) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// nlmsghdr (16) + a 32-byte body that parses as ifinfomsg, rtmsg,
	// ifaddrmsg… (lo is index 1); zeros beyond.
	msg := make([]byte, 16+32)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE)
	binary.NativeEndian.PutUint32(msg[8:], 1)
	binary.NativeEndian.PutUint32(msg[16+4:], 1) // ifi_index = lo
	if err := send(fd, msg); err != nil {
		return err
	}
	tv := unix.Timeval{Sec: 5}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	if n < 20 || binary.NativeEndian.Uint16(buf[4:]) != unix.NLMSG_ERROR {
		return fmt.Errorf("no error message in the answer (%d bytes)", n)
	}
	code := int32(binary.NativeEndian.Uint32(buf[16:]))
	if code == 0 {
		return nil
	}
	return unix.Errno(-code)
}

var rtnlSenders = map[string]func(fd int, msg []byte) error{
	"write": func(fd int, msg []byte) error { _, err := unix.Write(fd, msg); return err },
	"sendto": func(fd int, msg []byte) error {
		return unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
	},
	"sendmsg": func(fd int, msg []byte) error {
		return unix.Sendmsg(fd, msg, nil, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}, 0)
	},
	"sendmmsg": func(fd int, msg []byte) error {
		iov := unix.Iovec{Base: &msg[0]}
		iov.SetLen(len(msg))
		var hdr struct {
			unix.Msghdr
			n   uint32
			pad uint32
		}
		hdr.Iov, hdr.Iovlen = &iov, 1
		_, _, en := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdr)), 1, 0, 0, 0)
		if en != 0 {
			return en
		}
		return nil
	},
}

// rtnlEveryWrite sends every rtnetlink message type that changes state
// (kind NEW, DEL, SET: type&3 != 2) and returns EPERM only if the kernel
// refused each with EPERM, or with EOPNOTSUPP for a type no handler is
// registered for (the answer says which of those there were).
func rtnlEveryWrite() error {
	var unhandled []string
	for typ := uint16(unix.RTM_BASE); typ < 128; typ++ {
		if typ&3 == 2 { // GET: reading the candidate's own namespace
			continue
		}
		err := rtnlWrite(typ, rtnlSenders["sendmsg"])
		if errors.Is(err, unix.EOPNOTSUPP) {
			unhandled = append(unhandled, strconv.Itoa(int(typ)))
			continue
		}
		if !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("type %d: %v", typ, err)
		}
	}
	if len(unhandled) > 40 {
		return fmt.Errorf("no handler for %d types: the sweep proves nothing", len(unhandled))
	}
	return unix.EPERM
}

// errEmpty: a read that returned nothing (a masked file).
var errEmpty = errors.New("empty")

func readSome(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := f.Read(make([]byte, 64))
	if n > 0 {
		return nil
	}
	if err != nil && err.Error() != "EOF" {
		return err
	}
	return errEmpty
}

func writeFile(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write([]byte("1\n"))
	return err
}

func ioctlInt(fd int, req uint) error {
	c := byte('x')
	_, _, en := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(unsafe.Pointer(&c)))
	if en != 0 {
		return en
	}
	return nil
}

func openIoctl(p string, req uint) error {
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return ioctlInt(fd, req)
}

func hostPID() int {
	n, _ := strconv.Atoi(os.Getenv("BATTERY_HOST_PID"))
	return n
}

// battery is the rerun's attacks beyond attack_test.go's, by class.
var battery = map[string]func(string) error{
	// Sockets: the family is judged by the filter.
	"socketpair_netlink": func(string) error {
		_, err := unix.Socketpair(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
		return err
	},
	"socketpair_inet": func(string) error { _, err := unix.Socketpair(unix.AF_INET, unix.SOCK_STREAM, 0); return err },
	"socketpair_vsock": func(string) error {
		_, err := unix.Socketpair(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
		return err
	},
	// The kernel turns socket(AF_INET, SOCK_PACKET) into an AF_PACKET
	// socket after the filter has judged AF_INET.
	"inet_sock_packet": func(string) error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_PACKET, int(htons(unix.ETH_P_ALL)))
		closeFD(fd, err)
		return err
	},
	"raw6_socket": func(string) error {
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW, unix.IPPROTO_RAW)
		closeFD(fd, err)
		return err
	},
	"rtnl_every_write": func(string) error { return rtnlEveryWrite() },
	// Process inspection of anything, even the candidate's own.
	"ptrace_attach": func(string) error { return sys(unix.SYS_PTRACE, unix.PTRACE_ATTACH, 1) },
	"ptrace_seize":  func(string) error { return sys(unix.SYS_PTRACE, unix.PTRACE_SEIZE, 1) },
	"process_vm_readv": func(string) error {
		b := make([]byte, 8)
		iov := unix.Iovec{Base: &b[0]}
		iov.SetLen(8)
		return sys(unix.SYS_PROCESS_VM_READV, 1, uintptr(unsafe.Pointer(&iov)), 1, uintptr(unsafe.Pointer(&iov)), 1, 0)
	},
	"process_vm_writev": func(string) error {
		b := make([]byte, 8)
		iov := unix.Iovec{Base: &b[0]}
		iov.SetLen(8)
		return sys(unix.SYS_PROCESS_VM_WRITEV, 1, uintptr(unsafe.Pointer(&iov)), 1, uintptr(unsafe.Pointer(&iov)), 1, 0)
	},
	"kcmp":        func(string) error { return sys(unix.SYS_KCMP, 1, 1, 0, 0, 0) },
	"pidfd_getfd": func(string) error { return sys(unix.SYS_PIDFD_GETFD, 0, 0, 0) },
	// Kernel subsystems with a history of exploits.
	"perf_event_open": func(string) error {
		attr := make([]byte, 128) // PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES
		binary.NativeEndian.PutUint32(attr[4:], 128)
		return sys(unix.SYS_PERF_EVENT_OPEN, uintptr(unsafe.Pointer(&attr[0])), 0, ^uintptr(0), ^uintptr(0), 0)
	},
	"bpf_map_create": func(string) error {
		attr := make([]byte, 72) // BPF_MAP_TYPE_ARRAY, key 4, value 4, 1 entry
		binary.NativeEndian.PutUint32(attr[0:], 2)
		binary.NativeEndian.PutUint32(attr[4:], 4)
		binary.NativeEndian.PutUint32(attr[8:], 4)
		binary.NativeEndian.PutUint32(attr[12:], 1)
		return sys(unix.SYS_BPF, 0, uintptr(unsafe.Pointer(&attr[0])), 72)
	},
	"userfaultfd":   func(string) error { return sys(unix.SYS_USERFAULTFD, unix.O_CLOEXEC) },
	"keyctl_join":   func(string) error { return sys(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0) },
	"request_key":   func(d string) error { return sys(unix.SYS_REQUEST_KEY, cstr("user"), cstr(d), 0, 0) },
	"fanotify_init": func(string) error { return sys(unix.SYS_FANOTIFY_INIT, 0, 0) },
	// New namespaces: the filter refuses a user namespace; every other
	// kind needs CAP_SYS_ADMIN, which the candidate does not hold.
	"unshare_mnt":    func(string) error { return unix.Unshare(unix.CLONE_NEWNS) },
	"unshare_net":    func(string) error { return unix.Unshare(unix.CLONE_NEWNET) },
	"unshare_pid":    func(string) error { return unix.Unshare(unix.CLONE_NEWPID) },
	"unshare_ipc":    func(string) error { return unix.Unshare(unix.CLONE_NEWIPC) },
	"unshare_uts":    func(string) error { return unix.Unshare(unix.CLONE_NEWUTS) },
	"unshare_cgroup": func(string) error { return unix.Unshare(unix.CLONE_NEWCGROUP) },
	"unshare_time":   func(string) error { return unix.Unshare(unix.CLONE_NEWTIME) },
	"unshare_user_mnt": func(string) error {
		return unix.Unshare(unix.CLONE_NEWUSER | unix.CLONE_NEWNS)
	},
	"clone_newns": func(string) error {
		pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWNET}})
		if err == nil {
			syscall.Wait4(pid, nil, 0, nil)
		}
		return err
	},
	"setns_net": func(string) error {
		fd, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Setns(fd, 0)
	},
	// Mounts: the filter lets libcontainer's init make them; the kernel
	// refuses the capability-less candidate.
	"mount_bind":     func(string) error { return unix.Mount("/workspace", "/tmp", "", unix.MS_BIND, "") },
	"remount_usr_rw": func(string) error { return unix.Mount("", "/usr", "", unix.MS_REMOUNT|unix.MS_BIND, "") },
	"umount_proc":    func(string) error { return unix.Unmount("/proc", unix.MNT_DETACH) },
	"umount_etc":     func(string) error { return unix.Unmount("/etc", 0) },
	"pivot_root":     func(string) error { return unix.PivotRoot("/tmp", "/tmp") },
	"open_tree_clone": func(string) error {
		return sys(unix.SYS_OPEN_TREE, atFDCWD, cstr("/usr"), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	},
	"move_mount": func(string) error {
		return sys(unix.SYS_MOVE_MOUNT, atFDCWD, cstr("/workspace"), atFDCWD, cstr("/tmp"), 0)
	},
	"fsopen": func(string) error { return sys(unix.SYS_FSOPEN, cstr("tmpfs"), unix.FSOPEN_CLOEXEC) },
	"fspick": func(string) error { return sys(unix.SYS_FSPICK, atFDCWD, cstr("/usr"), unix.FSPICK_CLOEXEC) },
	"mount_setattr_rw": func(string) error {
		attr := unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		return unix.MountSetattr(unix.AT_FDCWD, "/usr", 0, &attr)
	},
	"chroot": func(string) error { return unix.Chroot("/tmp") },
	// The kernel itself, the machine, the clock.
	"kexec_load":      func(string) error { return sys(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0) },
	"kexec_file_load": func(string) error { return sys(unix.SYS_KEXEC_FILE_LOAD, 0, 0, 0, 0, 0) },
	"init_module":     func(string) error { return sys(unix.SYS_INIT_MODULE, 0, 0, cstr("")) },
	"finit_module":    func(string) error { return sys(unix.SYS_FINIT_MODULE, 0, cstr(""), 0) },
	"delete_module":   func(string) error { return sys(unix.SYS_DELETE_MODULE, cstr("vsock"), 0) },
	"reboot":          func(string) error { return unix.Reboot(unix.LINUX_REBOOT_CMD_CAD_OFF) },
	"swapon":          func(string) error { return sys(unix.SYS_SWAPON, cstr("/tmp/swap"), 0) },
	"acct":            func(string) error { return sys(unix.SYS_ACCT, cstr("/tmp/acct")) },
	"syslog_read":     func(string) error { return sys(unix.SYS_SYSLOG, 3, uintptr(unsafe.Pointer(&make([]byte, 64)[0])), 64) },
	"settimeofday":    func(string) error { tv := unix.Timeval{Sec: 1}; return unix.Settimeofday(&tv) },
	"clock_settime": func(string) error {
		ts := unix.Timespec{Sec: 1}
		return sys(unix.SYS_CLOCK_SETTIME, unix.CLOCK_REALTIME, uintptr(unsafe.Pointer(&ts)))
	},
	"adjtimex": func(string) error {
		var tx unix.Timex
		tx.Modes = 1 // ADJ_OFFSET
		_, err := unix.Adjtimex(&tx)
		return err
	},
	"open_by_handle_at": func(string) error { return sys(unix.SYS_OPEN_BY_HANDLE_AT, atFDCWD, 0, 0) },
	"name_to_handle_at": func(string) error {
		return sys(unix.SYS_NAME_TO_HANDLE_AT, atFDCWD, cstr("/"), 0, 0, 0)
	},
	"quotactl":      func(string) error { return sys(unix.SYS_QUOTACTL, 0, 0, 0, 0) },
	"vhangup":       func(string) error { return sys(unix.SYS_VHANGUP) },
	"set_mempolicy": func(string) error { return sys(unix.SYS_SET_MEMPOLICY, 0, 0, 0) },
	// Privilege: capabilities, rlimits, set-id.
	"capset_all": func(string) error {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		data := [2]unix.CapUserData{{Effective: ^uint32(0), Permitted: ^uint32(0)}, {Effective: ^uint32(0), Permitted: ^uint32(0)}}
		return unix.Capset(&hdr, &data[0])
	},
	"ambient_raise": func(string) error {
		return unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, unix.CAP_SYS_ADMIN, 0, 0)
	},
	"clear_no_new_privs": func(string) error { return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0) },
	"raise_core_limit": func(string) error {
		return unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY})
	},
	"raise_nofile": func(string) error {
		return unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 1 << 20, Max: 1 << 20})
	},
	"prctl_set_mm":  func(string) error { return unix.Prctl(unix.PR_SET_MM, unix.PR_SET_MM_START_CODE, 0x1000, 0, 0) },
	"write_uid_map": func(string) error { return writeFile("/proc/self/uid_map") },
	"personality_no_aslr": func(string) error {
		return sys(unix.SYS_PERSONALITY, 0x0040000) // ADDR_NO_RANDOMIZE
	},
	"personality_read_exec": func(string) error {
		return sys(unix.SYS_PERSONALITY, 0x0400000) // READ_IMPLIES_EXEC
	},
	// The scheduler: a real-time busy loop would starve the host's CPUs
	// past the CPU quota's period; a negative nice takes CAP_SYS_NICE.
	"sched_fifo": func(string) error {
		prio := struct{ p int32 }{1}
		return sys(unix.SYS_SCHED_SETSCHEDULER, 0, 1 /* SCHED_FIFO */, uintptr(unsafe.Pointer(&prio)))
	},
	"sched_deadline": func(string) error {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: 6 /* SCHED_DEADLINE */, Runtime: 10e6, Deadline: 30e6, Period: 30e6}
		return unix.SchedSetAttr(0, &attr, 0)
	},
	"nice_negative": func(string) error { return unix.Setpriority(unix.PRIO_PROCESS, 0, -20) },
	"ioprio_realtime": func(string) error {
		return sys(unix.SYS_IOPRIO_SET, 1 /* IOPRIO_WHO_PROCESS */, 0, 1<<13 /* IOPRIO_CLASS_RT */)
	},
	"sethostname": func(string) error { return unix.Sethostname([]byte("host")) },
	// File capabilities: a capability set stored on a file it made would
	// be honoured by the next exec (in its namespace, or the host's).
	"setxattr_capability": func(string) error {
		if err := os.WriteFile("/workspace/capfile", []byte("x"), 0o755); err != nil {
			return err
		}
		// vfs_cap_data v2: CAP_SYS_ADMIN permitted and effective.
		v := make([]byte, 20)
		binary.LittleEndian.PutUint32(v[0:], 0x02000001)
		binary.LittleEndian.PutUint32(v[4:], 1<<unix.CAP_SYS_ADMIN)
		return unix.Setxattr("/workspace/capfile", "security.capability", v, 0)
	},
	"setxattr_trusted": func(string) error {
		if err := os.WriteFile("/workspace/trustedfile", []byte("x"), 0o644); err != nil {
			return err
		}
		return unix.Setxattr("/workspace/trustedfile", "trusted.x", []byte("x"), 0)
	},
	"so_mark":        func(string) error { return setsockoptInt(unix.SOL_SOCKET, unix.SO_MARK, 1) },
	"ip_transparent": func(string) error { return setsockoptInt(unix.SOL_IP, unix.IP_TRANSPARENT, 1) },
	// Devices and terminals.
	"mknod_char":  func(string) error { return unix.Mknod("/tmp/mem", unix.S_IFCHR|0o600, int(unix.Mkdev(1, 1))) },
	"mknod_ws":    func(string) error { return unix.Mknod("/workspace/null", unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))) },
	"dev_mem":     func(string) error { return readSome("/dev/mem") },
	"dev_kmsg":    func(string) error { return readSome("/dev/kmsg") },
	"dev_console": func(string) error { return readSome("/dev/console") },
	"dev_tty":     func(string) error { return openIoctl("/dev/tty", unix.TIOCSTI) },
	"dev_tty0":    func(string) error { return openIoctl("/dev/tty0", unix.TIOCSTI) },
	"tiocsti_0":   func(string) error { return ioctlInt(0, unix.TIOCSTI) },
	"tiocsti_1":   func(string) error { return ioctlInt(1, unix.TIOCSTI) },
	"tiocsti_2":   func(string) error { return ioctlInt(2, unix.TIOCSTI) },
	"tioclinux_0": func(string) error { return ioctlInt(0, unix.TIOCLINUX) },
	"tioclinux_2": func(string) error { return ioctlInt(2, unix.TIOCLINUX) },
	"open_ptmx":   func(string) error { return readSome("/dev/ptmx") },
	// Kernel tunables and interfaces through /proc and /sys.
	"proc_sys_hostname":   func(string) error { return writeFile("/proc/sys/kernel/hostname") },
	"proc_sys_drop_cache": func(string) error { return writeFile("/proc/sys/vm/drop_caches") },
	"proc_sys_ip_forward": func(string) error { return writeFile("/proc/sys/net/ipv4/ip_forward") },
	"proc_sysrq_trigger":  func(string) error { return writeFile("/proc/sysrq-trigger") },
	"proc_kcore":          func(string) error { return readSome("/proc/kcore") },
	"proc_keys":           func(string) error { return readSome("/proc/keys") },
	"proc_timer_list":     func(string) error { return readSome("/proc/timer_list") },
	"proc_1_mem_host":     func(string) error { return readSome("/proc/" + strconv.Itoa(hostPID()) + "/mem") },
	"sys_kernel":          func(string) error { _, err := os.ReadDir("/sys/kernel"); return err },
	"sys_cgroup_procs":    func(string) error { return writeFile("/sys/fs/cgroup/cgroup.procs") },
	// Host files by other routes: a hard link across the read-only
	// binds, the state root, the host's mount table.
	"hardlink_usr": func(string) error { return unix.Link("/usr/bin/env", "/workspace/env-link") },
	"hardlink_etc": func(string) error { return unix.Link("/etc/passwd", "/workspace/passwd-link") },
	"state_root":   func(string) error { _, err := os.ReadDir("/run/cleanroom-sandbox"); return err },
	"proc_self_root_escape": func(string) error {
		// /proc/1/root is the candidate's own root: nothing of the host.
		_, err := os.Stat("/proc/1/root/etc/shadow")
		return err
	},
	// Processes of the host: another PID namespace.
	"kill_host_pid":  func(string) error { return unix.Kill(hostPID(), unix.SIGKILL) },
	"kill_all":       func(string) error { return unix.Kill(-1, unix.SIGKILL) },
	"pidfd_host_pid": func(string) error { return sys(unix.SYS_PIDFD_OPEN, uintptr(hostPID()), 0) },
	// A system call this filter does not know answers ENOSYS.
	"unknown_syscall": func(string) error { return sys(1000) },
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func setsockoptInt(level, opt, v int) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.SetsockoptInt(fd, level, opt, v)
}

func init() {
	for name, f := range battery {
		attacks[name] = f
	}
	for af := range allFamilies {
		if allowedFamily[af] {
			continue
		}
		attacks[fmt.Sprintf("socket_af%d", af)] = func(string) error { return socketEveryType(af) }
	}
	// NETLINK_ROUTE is the one netlink protocol allowed.
	for proto := 1; proto < 32; proto++ {
		attacks[fmt.Sprintf("netlink_proto%d", proto)] = func(string) error {
			fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
			closeFD(fd, err)
			return err
		}
	}
	for name, send := range rtnlSenders {
		attacks["rtnl_setlink_"+name] = func(string) error { return rtnlWrite(unix.RTM_NEWLINK, send) }
	}
}

// batteryWant is what each attack of the battery must end with: the
// errno of the defence named in the comment.
func batteryWant() map[string]string {
	want := map[string]string{
		// The filter.
		"socketpair_netlink": "EPERM", "socketpair_inet": "EPERM", "socketpair_vsock": "EPERM",
		"inet_sock_packet": "EPERM", // the filter (type SOCK_PACKET), and CAP_NET_RAW behind it
		"ptrace_attach":    "EPERM", "ptrace_seize": "EPERM", "process_vm_readv": "EPERM",
		"process_vm_writev": "EPERM", "kcmp": "EPERM", "pidfd_getfd": "EPERM",
		"perf_event_open": "EPERM", "bpf_map_create": "EPERM", "userfaultfd": "EPERM",
		"keyctl_join": "EPERM", "request_key": "EPERM", "fanotify_init": "EPERM",
		"unshare_user_mnt": "EPERM", "setns_net": "EPERM", "fspick": "EPERM", "chroot": "EPERM",
		"kexec_load": "EPERM", "kexec_file_load": "EPERM", "init_module": "EPERM",
		"finit_module": "EPERM", "delete_module": "EPERM", "reboot": "EPERM", "swapon": "EPERM",
		"acct": "EPERM", "syslog_read": "EPERM", "settimeofday": "EPERM", "clock_settime": "EPERM",
		"adjtimex": "EPERM", "open_by_handle_at": "EPERM", "name_to_handle_at": "EPERM",
		"quotactl": "EPERM", "vhangup": "EPERM", "set_mempolicy": "EPERM",
		"personality_no_aslr": "EPERM", "personality_read_exec": "EPERM",
		"unknown_syscall": "ENOSYS",
		// No capability (CAP_NET_RAW, CAP_NET_ADMIN over the host-owned
		// network namespace; CAP_SYS_ADMIN, CAP_MKNOD, CAP_SYS_RESOURCE,
		// CAP_SYS_PTRACE in the candidate's own user namespace).
		"raw6_socket": "EPERM", "rtnl_every_write": "EPERM",
		"rtnl_setlink_write": "EPERM", "rtnl_setlink_sendto": "EPERM",
		"rtnl_setlink_sendmsg": "EPERM", "rtnl_setlink_sendmmsg": "EPERM",
		"unshare_mnt": "EPERM", "unshare_net": "EPERM", "unshare_pid": "EPERM",
		"unshare_ipc": "EPERM", "unshare_uts": "EPERM", "unshare_cgroup": "EPERM",
		"unshare_time": "EPERM", "clone_newns": "EPERM",
		"mount_bind": "EPERM", "remount_usr_rw": "EPERM", "umount_proc": "EPERM",
		"umount_etc": "EPERM", "pivot_root": "EPERM", "open_tree_clone": "EPERM",
		"move_mount": "EPERM", "fsopen": "EPERM", "mount_setattr_rw": "EPERM",
		"capset_all": "EPERM", "ambient_raise": "EPERM", "raise_core_limit": "EPERM",
		"raise_nofile": "EPERM", "prctl_set_mm": "EPERM", "write_uid_map": "EPERM",
		"mknod_char": "EPERM", "mknod_ws": "EPERM",
		"sched_fifo": "EPERM", "sched_deadline": "EPERM", "nice_negative": "EACCES", "ioprio_realtime": "EPERM",
		"sethostname": "EPERM", "setxattr_capability": "EPERM", "setxattr_trusted": "EPERM",
		"so_mark": "EPERM", "ip_transparent": "EPERM",
		"clear_no_new_privs": "EINVAL", // cannot be unset once set
		// Devices: only null, zero, full, random, urandom, tty exist, and
		// no terminal is the candidate's (stdio are pipes, no
		// controlling terminal).
		"dev_mem": "ENOENT", "dev_kmsg": "ENOENT", "dev_console": "ENOENT", "dev_tty0": "ENOENT",
		"dev_tty": "ENXIO", "open_ptmx": "ENOENT",
		"tiocsti_0": "ENOTTY", "tiocsti_1": "ENOTTY", "tiocsti_2": "ENOTTY",
		"tioclinux_0": "ENOTTY", "tioclinux_2": "ENOTTY",
		// /proc/sys and friends are read-only, the leaky files masked,
		// /sys absent.
		// (/proc/sys's files are host root's, a uid the candidate's
		// namespace does not map: EACCES comes before EROFS.)
		"proc_sys_hostname": "EACCES", "proc_sys_drop_cache": "EACCES", "proc_sys_ip_forward": "EACCES",
		"proc_keys":       "error:empty",
		"proc_timer_list": "error:empty", "sys_kernel": "ENOENT", "sys_cgroup_procs": "ENOENT",
		// Another mount namespace and root.
		"hardlink_usr": "EXDEV", "hardlink_etc": "EXDEV", "state_root": "ENOENT",
		"proc_self_root_escape": "ENOENT",
		// Another PID namespace.
		"proc_1_mem_host": "ENOENT", "kill_host_pid": "ESRCH", "kill_all": "ESRCH", "pidfd_host_pid": "ESRCH",
	}
	// Kernels without magic SysRq or /proc/kcore have neither file.
	want["proc_sysrq_trigger"], want["proc_kcore"] = "EACCES", "error:empty"
	if _, err := os.Stat("/proc/sysrq-trigger"); errors.Is(err, os.ErrNotExist) {
		want["proc_sysrq_trigger"] = "ENOENT"
	}
	if _, err := os.Stat("/proc/kcore"); errors.Is(err, os.ErrNotExist) {
		want["proc_kcore"] = "ENOENT"
	}
	for af := range allFamilies {
		if !allowedFamily[af] {
			want[fmt.Sprintf("socket_af%d", af)] = "EPERM"
		}
	}
	for proto := 1; proto < 32; proto++ {
		want[fmt.Sprintf("netlink_proto%d", proto)] = "EPERM"
	}
	return want
}

// TestAdversarialBattery runs every attack of the battery in one
// full-isolation container and asserts each one's errno; then, from the
// host, that nothing it tried reached the host: the host process it
// signalled lives, no key, no file outside the workspace.
func TestAdversarialBattery(t *testing.T) {
	needSandbox(t)
	ws := t.TempDir()
	bin := copySelf(t, ws)
	token := fmt.Sprintf("cleanroom-battery-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { removeHostKeys(t, token) })
	// A host process with a PID the candidate could guess (not 1: a
	// number the candidate's namespace is unlikely to hold).
	victim := exec.Command("sleep", "60")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = victim.Process.Kill(); _ = victim.Wait() }()
	t.Setenv("CLEANROOM_BATTERY_SECRET", "must-not-reach")
	want := batteryWant()
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	script := bin + " attack " + token + " " + strings.Join(names, " ") + `
echo env=$(env | grep -c CLEANROOM_BATTERY_SECRET)`
	res, out, stderr := runIn(t, Config{Workspace: ws, Env: []string{"BATTERY_HOST_PID=" + strconv.Itoa(victim.Process.Pid)}}, script)
	if res.Status != StatusExited || res.ExitCode != 0 {
		t.Fatalf("status %s/%d, stderr %s", res.Status, res.ExitCode, stderr)
	}
	got := keyValues(out)
	t.Logf("%d attacks", len(names))
	for _, n := range names {
		if g := got[n]; g != want[n] {
			t.Errorf("%s: %q, want %s", n, g, want[n])
		}
	}
	if got["env"] != "0" {
		t.Errorf("the harness's environment reached the candidate (%q)", got["env"])
	}
	if err := victim.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the host process the candidate signalled is gone: %v", err)
	}
	for _, p := range []string{"env-link", "passwd-link", "null"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s was made in the workspace", p)
		}
	}
}

// atFDCWD is AT_FDCWD as a system-call argument.
var atFDCWD = func() uintptr { v := unix.AT_FDCWD; return uintptr(v) }()

// Traps a candidate leaves in the workspace for the host: links to host
// files (/etc/shadow, /etc, a set-uid-root binary), a FIFO, a socket. The
// post-run scrub and the next run's hand-over of the same workspace walk
// by descriptor without following a link: no host file changes owner or
// mode, the FIFO and the socket are named. And no mount of the
// candidate's view where a program could lie honours set-id bits
// (nosuid on each; those without it are device nodes, /dev/null over a
// masked /proc file, or an empty read-only tmpfs over a masked
// directory), besides no_new_privs and the user namespace.
func TestWorkspaceTraps(t *testing.T) {
	// Mounts without nosuid, less device nodes and empty read-only ones.
	const suidMounts = `echo suid_mounts=$(grep -v nosuid /proc/self/mountinfo | while read -r _ _ _ _ mp opts _; do
  [ -c "$mp" ] && continue
  case "$opts" in ro,*) [ -z "$(ls -A "$mp")" ] && continue;; esac
  echo "$mp"; done | tr '\n' ' ')`
	needSandbox(t)
	ws := t.TempDir()
	setuid := "/usr/bin/su"
	before := map[string]unix.Stat_t{}
	for _, p := range []string{"/etc/shadow", "/etc", setuid} {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Skipf("%s: %v", p, err)
		}
		before[p] = st
	}
	if before[setuid].Mode&unix.S_ISUID == 0 || before[setuid].Uid != 0 {
		t.Skipf("%s is not set-uid root here", setuid)
	}
	script := `cd /workspace && ln -s /etc/shadow shadow && ln -s /etc etcdir && ln -s ` + setuid + ` su &&
mkdir d && ln -s / d/root && chmod 4755 su 2>/dev/null; mkfifo fifo &&
python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("/workspace/sock")' &&
echo x > f && ln f d/f-link && chmod 6755 f &&
` + suidMounts
	for run := 1; run <= 2; run++ {
		if run == 2 {
			// The same workspace again: the hand-over walks it first.
			script = `ls /workspace >/dev/null && ` + suidMounts
			if err := CheckNewWorkspace(ws, testStateDir(t)); err != nil {
				t.Fatalf("run 2: the workspace run 1 made is refused: %v", err)
			}
		}
		res, out, stderr := runIn(t, Config{Workspace: ws}, script)
		if res.ExitCode != 0 {
			t.Fatalf("run %d: exit %d: %s", run, res.ExitCode, stderr)
		}
		if g := keyValues(out)["suid_mounts"]; g != "" {
			t.Errorf("run %d: mounts without nosuid: %s", run, g)
		}
		for p, b := range before {
			var st unix.Stat_t
			if err := unix.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if st.Uid != b.Uid || st.Gid != b.Gid || st.Mode != b.Mode {
				t.Errorf("run %d: host %s changed: %d:%d %#o, was %d:%d %#o", run, p, st.Uid, st.Gid, st.Mode, b.Uid, b.Gid, b.Mode)
			}
		}
		if run == 1 {
			got := map[string]string{}
			for _, f := range res.Workspace {
				got[f.Path] = f.Rule
			}
			want := map[string]string{"fifo": RuleSpecialFile, "sock": RuleSpecialFile, "f": RuleSetID}
			if len(got) != len(want) || got["fifo"] != want["fifo"] || got["sock"] != want["sock"] || got["f"] != want["f"] {
				t.Errorf("findings %+v, want %v (links are not findings: the walk never follows them)", res.Workspace, want)
			}
		}
	}
	// The set-id file and its second name: bits gone, owner the
	// candidate's.
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(ws, "f"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 || st.Uid != CandidateUID {
		t.Errorf("f: %d %#o, want uid %d without set-id bits", st.Uid, st.Mode, CandidateUID)
	}
}

// Memory by another route: the candidate's tmpfs mounts (/dev/shm, /tmp,
// /dev) are charged to its memory cgroup, so filling one past the limit
// ends the run as OOM rather than growing the host's memory.
func TestTmpfsCountsAgainstMemory(t *testing.T) {
	needSandbox(t)
	for _, dir := range []string{"/dev/shm", "/tmp", "/dev"} {
		t.Run(dir, func(t *testing.T) {
			res, out, stderr := runIn(t, Config{Memory: 32 << 20}, `head -c 60000000 /dev/zero > `+dir+`/fill; echo survived=$?`)
			if res.Status != StatusOOM {
				t.Errorf("status %s (%s %s), want %s", res.Status, out, stderr, StatusOOM)
			}
		})
	}
}
