package sandboxinit

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The candidate's system-call filter: default-deny, in the spirit of the
// default seccomp profiles of Docker, containerd and Podman (allow what
// ordinary programs, toolchains and interpreters need: sh, git, gcc, go,
// node, python3), narrower where the sandbox needs less. What is allowed
// and why is listed with the lists themselves (allowedCommon and the
// per-architecture allowedArch); the rest of the policy:
//
//   - Only the native ABI of the architecture: a system call entering
//     through another (i386 or x32 on x86_64, arm32 on arm64) kills the
//     process. A second ABI would be a second allowlist to get right, and
//     no toolchain the sandbox runs needs one.
//   - A system call newer than every number this filter knows answers
//     ENOSYS, as on an older kernel, so that C libraries fall back; every
//     other call not listed answers EPERM.
//   - socket: AF_UNIX, AF_INET and AF_INET6, and AF_NETLINK with
//     NETLINK_ROUTE only (getaddrinfo's AI_ADDRCONFIG and Go's net package
//     read the interfaces through it; changing anything needs
//     CAP_NET_ADMIN over the network namespace, which the candidate does
//     not hold). Everything else fails with EPERM: AF_VSOCK (not network-
//     namespaced: a virtual machine's channel to its host, which neither
//     the netlink check nor the seal probe can see), AF_PACKET, and every
//     other family; and the type SOCK_PACKET in any family (the kernel
//     turns AF_INET's into an AF_PACKET socket after the filter has
//     judged the family). socketpair: AF_UNIX only.
//   - io_uring_setup, io_uring_enter and io_uring_register are not listed
//     (EPERM): io_uring performs network and file operations without the
//     system calls this filter judges, and has been a steady source of
//     kernel exploits (Docker, ChromeOS and Android disable it too).
//   - add_key, request_key and keyctl are not listed (EPERM): the kernel's
//     keyrings are shared beyond the candidate's namespaces.
//   - clone and unshare with CLONE_NEWUSER fail with EPERM: inside a user
//     namespace of its own the candidate would hold every capability over
//     namespaces of its own, and with them kernel code only privilege
//     reaches. clone3 answers ENOSYS (its flags are in memory, out of a
//     filter's reach), so C libraries fall back to clone.
//   - personality: only the values Docker's profile allows (query, Linux,
//     PER_LINUX32, UNAME26).
//   - Not listed, among others: ptrace, process_vm_readv/writev, kcmp,
//     pidfd_getfd (no debugger is needed to build and run a candidate),
//     bpf, perf_event_open, userfaultfd, fanotify_init, open_by_handle_at,
//     setns, chroot, swapon/off, reboot, kexec_*, init_module and friends,
//     acct, quotactl, settimeofday, clock_settime, adjtimex, syslog,
//     lookup_dcookie, mbind/set_mempolicy, modify_ldt, iopl, ioperm,
//     vhangup, name_to_handle_at, the io_uring and key calls above.
//
// One compromise, because the filter is installed by the container's init
// before libcontainer's own init runs (a later hook does not exist
// without runc's libseccomp build): the calls that init makes after it
// are allowed too (initOnly below: mount and the new mount API,
// umount2, pivot_root, sethostname). Each of them needs CAP_SYS_ADMIN
// over the candidate's namespaces, which the candidate never holds (no
// capabilities, no_new_privs, and no user namespace of its own to gain
// them in); the kernel refuses them with EPERM at its capability check.

// abiSyscalls is one architecture's native system-call ABI as the filter
// judges it (seccomp_data.arch and the numbers of the calls it inspects).
type abiSyscalls struct {
	arch       uint32
	x32Bit     uint32 // a number with this bit set is another ABI (x32); 0 if none
	allow      []uint32
	clone      uint32 // flags in the first argument
	unshare    uint32
	clone3     uint32 // flags in memory, which a filter cannot read
	socket     uint32
	socketpair uint32
	personal   uint32 // personality
}

// maxKnown is the highest system-call number this filter knows (the
// newest in golang.org/x/sys/unix for both architectures): anything above
// answers ENOSYS.
const maxKnown = 471

// Why each group is allowed: the common runtimes' default profiles allow
// all of these to unprivileged containers.
var (
	// Files, directories, descriptors: every program.
	filesCommon = []uint32{
		unix.SYS_READ, unix.SYS_WRITE, unix.SYS_READV, unix.SYS_WRITEV, unix.SYS_PREAD64, unix.SYS_PWRITE64,
		unix.SYS_PREADV, unix.SYS_PWRITEV, unix.SYS_PREADV2, unix.SYS_PWRITEV2, unix.SYS_OPENAT, unix.SYS_OPENAT2,
		unix.SYS_CLOSE, unix.SYS_CLOSE_RANGE, unix.SYS_LSEEK, unix.SYS_FSTAT, unix.SYS_NEWFSTATAT, unix.SYS_STATX, unix.SYS_STATFS,
		unix.SYS_FSTATFS, unix.SYS_GETDENTS64, unix.SYS_GETCWD, unix.SYS_CHDIR, unix.SYS_FCHDIR, unix.SYS_MKDIRAT,
		unix.SYS_UNLINKAT, unix.SYS_RENAMEAT, unix.SYS_RENAMEAT2, unix.SYS_LINKAT, unix.SYS_SYMLINKAT,
		unix.SYS_READLINKAT, unix.SYS_FCHMOD, unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2, unix.SYS_FCHOWN,
		unix.SYS_FCHOWNAT, unix.SYS_FACCESSAT, unix.SYS_FACCESSAT2, unix.SYS_FTRUNCATE, unix.SYS_TRUNCATE,
		unix.SYS_FALLOCATE, unix.SYS_FSYNC, unix.SYS_FDATASYNC, unix.SYS_SYNC, unix.SYS_SYNCFS,
		unix.SYS_SYNC_FILE_RANGE, unix.SYS_UTIMENSAT, unix.SYS_UMASK, unix.SYS_FCNTL, unix.SYS_FLOCK,
		unix.SYS_DUP, unix.SYS_DUP3, unix.SYS_PIPE2, unix.SYS_FADVISE64, unix.SYS_READAHEAD,
		unix.SYS_COPY_FILE_RANGE, unix.SYS_SENDFILE, unix.SYS_SPLICE, unix.SYS_TEE, unix.SYS_VMSPLICE,
		unix.SYS_GETXATTR, unix.SYS_LGETXATTR, unix.SYS_FGETXATTR, unix.SYS_SETXATTR, unix.SYS_LSETXATTR,
		unix.SYS_FSETXATTR, unix.SYS_LISTXATTR, unix.SYS_LLISTXATTR, unix.SYS_FLISTXATTR, unix.SYS_REMOVEXATTR,
		unix.SYS_LREMOVEXATTR, unix.SYS_FREMOVEXATTR, unix.SYS_INOTIFY_INIT1, unix.SYS_INOTIFY_ADD_WATCH,
		unix.SYS_INOTIFY_RM_WATCH, unix.SYS_IOCTL, unix.SYS_MEMFD_CREATE, unix.SYS_CACHESTAT,
		// mkfifo (a device needs CAP_MKNOD, which the candidate lacks).
		unix.SYS_MKNODAT,
		// Asynchronous I/O (not io_uring): databases and some runtimes.
		unix.SYS_IO_SETUP, unix.SYS_IO_DESTROY, unix.SYS_IO_SUBMIT, unix.SYS_IO_CANCEL, unix.SYS_IO_GETEVENTS,
		unix.SYS_IO_PGETEVENTS,
	}
	// Memory: every runtime's allocator, JITs (node, the JVM), Go's
	// runtime.
	memoryCommon = []uint32{
		unix.SYS_BRK, unix.SYS_MMAP, unix.SYS_MUNMAP, unix.SYS_MPROTECT, unix.SYS_MREMAP, unix.SYS_MADVISE,
		unix.SYS_MSYNC, unix.SYS_MINCORE, unix.SYS_MLOCK, unix.SYS_MLOCK2, unix.SYS_MUNLOCK, unix.SYS_MLOCKALL,
		unix.SYS_MUNLOCKALL, unix.SYS_MEMBARRIER, unix.SYS_PKEY_ALLOC, unix.SYS_PKEY_FREE, unix.SYS_PKEY_MPROTECT,
		unix.SYS_MSEAL, unix.SYS_MAP_SHADOW_STACK,
	}
	// Processes, threads, credentials within the candidate's own user
	// namespace, signals, scheduling, limits.
	processCommon = []uint32{
		unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_EXIT, unix.SYS_EXIT_GROUP, unix.SYS_WAIT4, unix.SYS_WAITID,
		unix.SYS_KILL, unix.SYS_TKILL, unix.SYS_TGKILL, unix.SYS_GETPID, unix.SYS_GETPPID, unix.SYS_GETTID,
		unix.SYS_GETPGID, unix.SYS_SETPGID, unix.SYS_GETSID, unix.SYS_SETSID, unix.SYS_GETUID, unix.SYS_GETEUID,
		unix.SYS_GETGID, unix.SYS_GETEGID, unix.SYS_GETRESUID, unix.SYS_GETRESGID, unix.SYS_GETGROUPS,
		unix.SYS_SETUID, unix.SYS_SETGID, unix.SYS_SETREUID, unix.SYS_SETREGID, unix.SYS_SETRESUID,
		unix.SYS_SETRESGID, unix.SYS_SETGROUPS, unix.SYS_SETFSUID, unix.SYS_SETFSGID, unix.SYS_CAPGET,
		unix.SYS_CAPSET, unix.SYS_PRCTL, unix.SYS_SET_TID_ADDRESS, unix.SYS_SET_ROBUST_LIST,
		unix.SYS_GET_ROBUST_LIST, unix.SYS_RSEQ, unix.SYS_FUTEX, unix.SYS_FUTEX_WAITV, unix.SYS_FUTEX_WAKE,
		unix.SYS_FUTEX_WAIT, unix.SYS_FUTEX_REQUEUE, unix.SYS_RT_SIGACTION, unix.SYS_RT_SIGPROCMASK,
		unix.SYS_RT_SIGRETURN, unix.SYS_RT_SIGPENDING, unix.SYS_RT_SIGTIMEDWAIT, unix.SYS_RT_SIGQUEUEINFO,
		unix.SYS_RT_TGSIGQUEUEINFO, unix.SYS_RT_SIGSUSPEND, unix.SYS_SIGALTSTACK, unix.SYS_SCHED_YIELD,
		unix.SYS_SCHED_GETAFFINITY, unix.SYS_SCHED_SETAFFINITY, unix.SYS_SCHED_GETPARAM,
		unix.SYS_SCHED_SETPARAM, unix.SYS_SCHED_GETSCHEDULER, unix.SYS_SCHED_SETSCHEDULER,
		unix.SYS_SCHED_GET_PRIORITY_MAX, unix.SYS_SCHED_GET_PRIORITY_MIN, unix.SYS_SCHED_RR_GET_INTERVAL,
		unix.SYS_SCHED_GETATTR, unix.SYS_SCHED_SETATTR, unix.SYS_GETPRIORITY, unix.SYS_SETPRIORITY,
		unix.SYS_IOPRIO_GET, unix.SYS_IOPRIO_SET, unix.SYS_GETRLIMIT, unix.SYS_SETRLIMIT, unix.SYS_PRLIMIT64, unix.SYS_GETRUSAGE,
		unix.SYS_TIMES, unix.SYS_PIDFD_OPEN, unix.SYS_PIDFD_SEND_SIGNAL, unix.SYS_UNAME, unix.SYS_SYSINFO,
		unix.SYS_GETCPU, unix.SYS_GETRANDOM,
		// A filter of its own only narrows what this one allows (browsers'
		// and interpreters' sandboxes); Landlock likewise.
		unix.SYS_SECCOMP, unix.SYS_LANDLOCK_CREATE_RULESET, unix.SYS_LANDLOCK_ADD_RULE,
		unix.SYS_LANDLOCK_RESTRICT_SELF,
	}
	// Clocks, timers, waiting for events.
	timeCommon = []uint32{
		unix.SYS_CLOCK_GETTIME, unix.SYS_CLOCK_GETRES, unix.SYS_CLOCK_NANOSLEEP, unix.SYS_NANOSLEEP,
		unix.SYS_GETTIMEOFDAY, unix.SYS_TIMER_CREATE, unix.SYS_TIMER_SETTIME, unix.SYS_TIMER_GETTIME,
		unix.SYS_TIMER_GETOVERRUN, unix.SYS_TIMER_DELETE, unix.SYS_TIMERFD_CREATE, unix.SYS_TIMERFD_SETTIME,
		unix.SYS_TIMERFD_GETTIME, unix.SYS_GETITIMER, unix.SYS_SETITIMER, unix.SYS_EPOLL_CREATE1,
		unix.SYS_EPOLL_CTL, unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2, unix.SYS_EVENTFD2, unix.SYS_SIGNALFD4,
		unix.SYS_PPOLL, unix.SYS_PSELECT6,
	}
	// Sockets once made (socket and socketpair are judged by family), and
	// System V and POSIX IPC in the candidate's own IPC namespace.
	socketCommon = []uint32{
		unix.SYS_BIND, unix.SYS_LISTEN, unix.SYS_ACCEPT4, unix.SYS_CONNECT, unix.SYS_GETSOCKNAME,
		unix.SYS_GETPEERNAME, unix.SYS_SENDTO, unix.SYS_RECVFROM, unix.SYS_SENDMSG, unix.SYS_RECVMSG,
		unix.SYS_SENDMMSG, unix.SYS_RECVMMSG, unix.SYS_SHUTDOWN, unix.SYS_SETSOCKOPT, unix.SYS_GETSOCKOPT,
		unix.SYS_SHMGET, unix.SYS_SHMAT, unix.SYS_SHMDT, unix.SYS_SHMCTL, unix.SYS_SEMGET, unix.SYS_SEMOP,
		unix.SYS_SEMCTL, unix.SYS_SEMTIMEDOP, unix.SYS_MSGGET, unix.SYS_MSGSND, unix.SYS_MSGRCV, unix.SYS_MSGCTL,
		unix.SYS_MQ_OPEN, unix.SYS_MQ_UNLINK, unix.SYS_MQ_TIMEDSEND, unix.SYS_MQ_TIMEDRECEIVE, unix.SYS_MQ_NOTIFY,
		unix.SYS_MQ_GETSETATTR,
	}
	// initOnly: libcontainer's init makes these after the filter is
	// installed (building the root, the hostname). Each needs
	// CAP_SYS_ADMIN over the candidate's namespaces, which the candidate
	// never holds: see the compromise above.
	initOnly = []uint32{
		unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_MOUNT_SETATTR, unix.SYS_OPEN_TREE,
		unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_SETHOSTNAME,
	}
)

// candidateABIs is the native ABI of this architecture.
func candidateABIs() (abiSyscalls, error) { return abisFor(runtime.GOARCH) }

// abisFor is candidateABIs for the architecture goarch: the numbers are
// this build's (golang.org/x/sys/unix), so only the running
// architecture has a filter.
func abisFor(goarch string) (abiSyscalls, error) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		// The argument tests read the low half at the little-endian offset.
		return abiSyscalls{}, fmt.Errorf("no candidate filter for big-endian %s", goarch)
	}
	if goarch != runtime.GOARCH || nativeArch == 0 {
		return abiSyscalls{}, fmt.Errorf("no candidate filter for %s", goarch)
	}
	allow := slices.Concat(filesCommon, memoryCommon, processCommon, timeCommon, socketCommon, initOnly, allowedArch)
	return abiSyscalls{
		arch: nativeArch, x32Bit: x32Bit, allow: allow,
		clone: unix.SYS_CLONE, unshare: unix.SYS_UNSHARE, clone3: unix.SYS_CLONE3,
		socket: unix.SYS_SOCKET, socketpair: unix.SYS_SOCKETPAIR, personal: unix.SYS_PERSONALITY,
	}, nil
}

// Actions the program returns.
const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	retKill   = unix.SECCOMP_RET_KILL_PROCESS
)

// asm builds a classic BPF program whose far jumps are BPF_JA (a 32-bit
// offset) to named labels, so that no conditional jump needs more than
// its 8-bit reach.
type asm struct {
	prog   []unix.SockFilter
	labels map[string]int
	fix    map[int]string // index of a BPF_JA → its label
}

func (a *asm) op(code uint16, k uint32, jt, jf uint8) {
	a.prog = append(a.prog, unix.SockFilter{Code: code, K: k, Jt: jt, Jf: jf})
}
func (a *asm) ld(off uint32) { a.op(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off, 0, 0) }
func (a *asm) ret(k uint32)  { a.op(unix.BPF_RET|unix.BPF_K, k, 0, 0) }
func (a *asm) label(name string) {
	a.labels[name] = len(a.prog)
}
func (a *asm) ja(label string) {
	a.fix[len(a.prog)] = label
	a.op(unix.BPF_JMP|unix.BPF_JA, 0, 0, 0)
}

// jeq jumps to label when the accumulator is k, else falls through.
func (a *asm) jeq(k uint32, label string) {
	a.op(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, k, 0, 1)
	a.ja(label)
}

// jset jumps to label when the accumulator has any bit of k set.
func (a *asm) jset(k uint32, label string) {
	a.op(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, k, 0, 1)
	a.ja(label)
}

func (a *asm) done() []unix.SockFilter {
	for i, l := range a.fix {
		a.prog[i].K = uint32(a.labels[l] - i - 1)
	}
	return a.prog
}

// seccomp_data offsets: the number, the architecture, the low halves of
// the arguments (little-endian).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
	offArg2 = 32
)

// sockTypeMask is the kernel's SOCK_TYPE_MASK: the type in socket()'s
// second argument, without SOCK_NONBLOCK and SOCK_CLOEXEC.
const sockTypeMask = 0xf

// Labels of the program's shared actions.
const (
	lAllow, lEPERM, lENOSYS, lKill = "allow", "eperm", "enosys", "kill"
)

// candidateFilter is the seccomp program (see the policy at the top of
// this file): a binary search over the allowed numbers, then the argument
// checks, then the shared returns.
func candidateFilter(abi abiSyscalls) []unix.SockFilter {
	a := &asm{labels: map[string]int{}, fix: map[int]string{}}
	// Another ABI (i386, arm32) numbers calls differently: entering
	// through it would slip past the native allowlist.
	a.ld(offArch)
	a.op(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, abi.arch, 1, 0)
	a.ja(lKill)
	a.ld(offNr)
	if abi.x32Bit != 0 {
		// x32 shares x86_64's arch value: its numbers (bit 30 set) would
		// otherwise be a second, unjudged ABI.
		a.jset(abi.x32Bit, lKill)
	}
	// Above every number known: ENOSYS, as an older kernel answers.
	a.op(unix.BPF_JMP|unix.BPF_JGT|unix.BPF_K, maxKnown, 0, 1)
	a.ja(lENOSYS)

	cases := map[uint32]string{}
	for _, nr := range abi.allow {
		cases[nr] = lAllow
	}
	cases[abi.clone], cases[abi.unshare] = "newuser", "newuser"
	cases[abi.clone3] = lENOSYS
	cases[abi.socket], cases[abi.socketpair], cases[abi.personal] = "socket", "socketpair", "personality"
	nrs := make([]uint32, 0, len(cases))
	for nr := range cases {
		nrs = append(nrs, nr)
	}
	slices.Sort(nrs)
	a.search(nrs, cases, 0)

	// clone and unshare: not with a new user namespace.
	a.label("newuser")
	a.ld(offArg0)
	a.jset(unix.CLONE_NEWUSER, lEPERM)
	a.ja(lAllow)
	a.label("socket")
	// The type first: the kernel turns socket(AF_INET, SOCK_PACKET) into
	// an AF_PACKET socket after this filter has judged AF_INET (only
	// CAP_NET_RAW stood behind it). SOCK_PACKET in any family is refused.
	a.ld(offArg1)
	a.op(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, sockTypeMask, 0, 0)
	a.jeq(unix.SOCK_PACKET, lEPERM)
	a.ld(offArg0)
	a.jeq(unix.AF_UNIX, lAllow)
	a.jeq(unix.AF_INET, lAllow)
	a.jeq(unix.AF_INET6, lAllow)
	a.jeq(unix.AF_NETLINK, "netlink")
	a.ja(lEPERM)
	a.label("netlink")
	a.ld(offArg2)
	a.jeq(unix.NETLINK_ROUTE, lAllow)
	a.ja(lEPERM)
	a.label("socketpair")
	a.ld(offArg0)
	a.jeq(unix.AF_UNIX, lAllow)
	a.ja(lEPERM)
	a.label("personality")
	a.ld(offArg0)
	for _, p := range []uint32{0, 0x8, 0x20000, 0x20008, 0xffffffff} {
		a.jeq(p, lAllow)
	}
	a.ja(lEPERM)

	a.label(lAllow)
	a.ret(retAllow)
	a.label(lEPERM)
	a.ret(retEPERM)
	a.label(lENOSYS)
	a.ret(retENOSYS)
	a.label(lKill)
	a.ret(retKill)
	return a.done()
}

// search emits a binary search over the sorted numbers nrs (the
// accumulator holds the system-call number); an unlisted number goes to
// EPERM.
func (a *asm) search(nrs []uint32, cases map[uint32]string, depth int) {
	if len(nrs) <= 4 {
		for _, nr := range nrs {
			a.jeq(nr, cases[nr])
		}
		a.ja(lEPERM)
		return
	}
	mid := len(nrs) / 2
	right := fmt.Sprintf("r%d.%d", depth, nrs[mid])
	// nr >= nrs[mid]: the right half.
	a.op(unix.BPF_JMP|unix.BPF_JGE|unix.BPF_K, nrs[mid], 0, 1)
	a.ja(right)
	a.search(nrs[:mid], cases, depth+1)
	a.label(right)
	a.search(nrs[mid:], cases, depth+1)
}

// denyToCandidate installs the candidate filter on every thread of the
// calling process; it is inherited by the command across exec and by every
// process the command starts.
//
// Security: see the policy at the top of this file. In short: the kernel
// code a candidate can reach is what ordinary programs need, and nothing
// that crosses the candidate's namespaces (keyrings, AF_VSOCK, io_uring,
// a user namespace of its own).
func denyToCandidate() error {
	abi, err := candidateABIs()
	if err != nil {
		return err
	}
	filter := candidateFilter(abi)
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("seccomp candidate filter: %w", errno)
	}
	return nil
}
