package sandboxinit

import (
	"encoding/binary"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// run interprets the classic BPF subset candidateFilter emits over one
// seccomp_data (nr, arch, the first and third arguments).
func run(t *testing.T, prog []unix.SockFilter, nr, arch uint32, arg0, arg2 uint64) uint32 {
	t.Helper()
	return runArgs(t, prog, nr, arch, arg0, 0, arg2)
}

// runArgs is run with the second argument too.
func runArgs(t *testing.T, prog []unix.SockFilter, nr, arch uint32, arg0, arg1, arg2 uint64) uint32 {
	t.Helper()
	data := make([]byte, 64)
	binary.NativeEndian.PutUint32(data[0:], nr)
	binary.NativeEndian.PutUint32(data[4:], arch)
	binary.NativeEndian.PutUint64(data[16:], arg0)
	binary.NativeEndian.PutUint64(data[24:], arg1)
	binary.NativeEndian.PutUint64(data[32:], arg2)
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		cond := func(ok bool) {
			if ok {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		}
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			a = binary.NativeEndian.Uint32(data[in.K:])
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(in.K)
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			cond(a == in.K)
		case unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K:
			cond(a > in.K)
		case unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			cond(a >= in.K)
		case unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			cond(a&in.K != 0)
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			a &= in.K
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("instruction %d: opcode %#x", pc, in.Code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}

// The policy, case by case on x86_64's numbers (written out, not taken
// from the lists): keyrings, io_uring, AF_VSOCK and AF_PACKET refused, a
// new user namespace refused, clone3 absent, another ABI killed; what
// ordinary programs and libcontainer's init need allowed.
func TestCandidateFilter(t *testing.T) {
	t.Parallel()
	const (
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		allow  = unix.SECCOMP_RET_ALLOW
		kill   = unix.SECCOMP_RET_KILL_PROCESS
		x86_64 = unix.AUDIT_ARCH_X86_64
		i386   = unix.AUDIT_ARCH_I386
		fork   = uint64(unix.SIGCHLD)
		thread = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM
	)
	if runtime.GOARCH != "amd64" {
		t.Skipf("the cases are x86_64's numbers (GOARCH %s)", runtime.GOARCH)
	}
	abi, err := candidateABIs()
	if err != nil {
		t.Fatal(err)
	}
	prog := candidateFilter(abi)
	if len(prog) > unix.BPF_MAXINSNS {
		t.Fatalf("%d instructions, the kernel takes %d", len(prog), unix.BPF_MAXINSNS)
	}
	for _, tc := range []struct {
		name       string
		arch, nr   uint32
		arg0, arg2 uint64
		want       uint32
	}{
		{"add_key", x86_64, 248, 0, 0, eperm},
		{"request_key", x86_64, 249, 0, 0, eperm},
		{"keyctl", x86_64, 250, 0, 0, eperm},
		{"io_uring_setup", x86_64, 425, 0, 0, eperm},
		{"io_uring_enter", x86_64, 426, 0, 0, eperm},
		{"io_uring_register", x86_64, 427, 0, 0, eperm},
		{"socket AF_VSOCK", x86_64, 41, 40, 0, eperm},
		{"socket AF_PACKET", x86_64, 41, 17, 0, eperm},
		{"socket AF_BLUETOOTH", x86_64, 41, 31, 0, eperm},
		{"socket AF_VSOCK, high half set", x86_64, 41, 1<<32 | 40, 0, eperm},
		{"socket AF_UNIX", x86_64, 41, 1, 0, allow},
		{"socket AF_INET", x86_64, 41, 2, 0, allow},
		{"socket AF_INET6", x86_64, 41, 10, 0, allow},
		{"socket AF_NETLINK NETLINK_ROUTE", x86_64, 41, 16, 0, allow},
		{"socket AF_NETLINK NETLINK_AUDIT", x86_64, 41, 16, 9, eperm},
		{"socket AF_NETLINK NETLINK_KOBJECT_UEVENT", x86_64, 41, 16, 15, eperm},
		{"socketpair AF_UNIX", x86_64, 53, 1, 0, allow},
		{"socketpair AF_INET", x86_64, 53, 2, 0, eperm},
		{"clone, a fork", x86_64, 56, fork, 0, allow},
		{"clone, a thread", x86_64, 56, thread, 0, allow},
		{"clone, new namespaces but a user one", x86_64, 56, unix.CLONE_NEWNS | unix.CLONE_NEWNET | fork, 0, allow},
		{"clone, a user namespace", x86_64, 56, unix.CLONE_NEWUSER | fork, 0, eperm},
		{"unshare, a user namespace", x86_64, 272, unix.CLONE_NEWUSER, 0, eperm},
		{"unshare, a mount namespace", x86_64, 272, unix.CLONE_NEWNS, 0, allow},
		{"clone3", x86_64, 435, 0, 0, enosys},
		{"read", x86_64, 0, 0, 0, allow},
		{"write", x86_64, 1, 0, 0, allow},
		{"futex", x86_64, 202, 0, 0, allow},
		{"execve", x86_64, 59, 0, 0, allow},
		{"arch_prctl", x86_64, 158, 0, 0, allow},
		{"mount (libcontainer's init; needs CAP_SYS_ADMIN)", x86_64, 165, 0, 0, allow},
		{"pivot_root (libcontainer's init)", x86_64, 155, 0, 0, allow},
		{"ptrace", x86_64, 101, 0, 0, eperm},
		{"bpf", x86_64, 321, 0, 0, eperm},
		{"perf_event_open", x86_64, 298, 0, 0, eperm},
		{"userfaultfd", x86_64, 323, 0, 0, eperm},
		{"setns", x86_64, 308, 0, 0, eperm},
		{"open_by_handle_at", x86_64, 304, 0, 0, eperm},
		{"init_module", x86_64, 175, 0, 0, eperm},
		{"personality, query", x86_64, 135, 0xffffffff, 0, allow},
		{"personality, ADDR_NO_RANDOMIZE", x86_64, 135, 0x0040000, 0, eperm},
		{"a number newer than the filter", x86_64, 472, 0, 0, enosys},
		{"x32 read", x86_64, 0x40000000, 0, 0, kill},
		{"x32 keyctl", x86_64, 0x40000000 | 250, 0, 0, kill},
		{"i386 read", i386, 3, 0, 0, kill},
		{"i386 keyctl", i386, 288, 0, 0, kill},
		{"arm64 read", unix.AUDIT_ARCH_AARCH64, 63, 0, 0, kill},
	} {
		if got := run(t, prog, tc.nr, tc.arch, tc.arg0, tc.arg2); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
	// The socket type: the kernel makes socket(AF_INET, SOCK_PACKET) an
	// AF_PACKET socket after the filter has judged the family.
	for _, tc := range []struct {
		name        string
		family, typ uint64
		want        uint32
	}{
		{"AF_INET SOCK_PACKET", unix.AF_INET, unix.SOCK_PACKET, eperm},
		{"AF_INET SOCK_PACKET|SOCK_CLOEXEC|SOCK_NONBLOCK", unix.AF_INET, unix.SOCK_PACKET | unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK, eperm},
		{"AF_INET6 SOCK_PACKET", unix.AF_INET6, unix.SOCK_PACKET, eperm},
		{"AF_UNIX SOCK_PACKET", unix.AF_UNIX, unix.SOCK_PACKET, eperm},
		{"AF_INET SOCK_STREAM|SOCK_NONBLOCK|SOCK_CLOEXEC", unix.AF_INET, unix.SOCK_STREAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, allow},
		{"AF_INET SOCK_DGRAM, high half set", unix.AF_INET, 1<<32 | unix.SOCK_DGRAM, allow},
		{"AF_INET SOCK_RAW (the kernel wants CAP_NET_RAW)", unix.AF_INET, unix.SOCK_RAW, allow},
		{"AF_UNIX SOCK_SEQPACKET", unix.AF_UNIX, unix.SOCK_SEQPACKET, allow},
	} {
		if got := runArgs(t, prog, 41, x86_64, tc.family, tc.typ, 0); got != tc.want {
			t.Errorf("socket %s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
}

// The search over the numbers agrees with the lists for every number the
// filter knows: a listed one is allowed, an unlisted one refused.
func TestCandidateFilterEveryNumber(t *testing.T) {
	t.Parallel()
	abi, err := candidateABIs()
	if err != nil {
		t.Skip(err)
	}
	prog := candidateFilter(abi)
	listed := map[uint32]bool{}
	for _, nr := range abi.allow {
		listed[nr] = true
	}
	special := map[uint32]bool{abi.clone: true, abi.unshare: true, abi.clone3: true, abi.socket: true, abi.socketpair: true, abi.personal: true}
	for nr := uint32(0); nr <= maxKnown; nr++ {
		if special[nr] {
			continue
		}
		want := uint32(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
		if listed[nr] {
			want = unix.SECCOMP_RET_ALLOW
		}
		if got := run(t, prog, nr, abi.arch, 0, 0); got != want {
			t.Errorf("system call %d: %#x, want %#x", nr, got, want)
		}
	}
}

// Only the running architecture has a filter (the init refuses to start
// the candidate without one).
func TestCandidateABIs(t *testing.T) {
	t.Parallel()
	for _, goarch := range []string{"mips64", "386", "riscv64"} {
		if goarch == runtime.GOARCH {
			continue
		}
		if _, err := abisFor(goarch); err == nil {
			t.Errorf("a filter for %s, built for %s", goarch, runtime.GOARCH)
		}
	}
}
