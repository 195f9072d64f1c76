package sandboxinit

import (
	"encoding/binary"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// run interprets the classic BPF subset candidateFilter emits over one
// seccomp_data (nr, arch, the first argument).
func run(t *testing.T, prog []unix.SockFilter, nr, arch uint32, arg0 uint64) uint32 {
	t.Helper()
	data := make([]byte, 24)
	binary.NativeEndian.PutUint32(data[0:], nr)
	binary.NativeEndian.PutUint32(data[4:], arch)
	binary.NativeEndian.PutUint64(data[16:], arg0)
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			a = binary.NativeEndian.Uint32(data[in.K:])
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			a &= in.K
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if a == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			if a&in.K != 0 {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("instruction %d: opcode %#x", pc, in.Code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}

// Every ABI's add_key, request_key and keyctl fail with EPERM (x32's too),
// clone and unshare fail with EPERM when asked for a new user namespace and
// pass otherwise, clone3 fails with ENOSYS; neighbouring system calls pass.
func TestCandidateFilter(t *testing.T) {
	const (
		eperm  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		enosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
		allow  = unix.SECCOMP_RET_ALLOW
		x86_64 = unix.AUDIT_ARCH_X86_64
		i386   = unix.AUDIT_ARCH_I386
		fork   = uint64(unix.SIGCHLD)
		thread = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM
	)
	if runtime.GOARCH != "amd64" {
		t.Skipf("the cases are x86_64's and i386's numbers (GOARCH %s)", runtime.GOARCH)
	}
	abis, err := candidateABIs()
	if err != nil {
		t.Fatal(err)
	}
	prog := candidateFilter(abis)
	if len(prog) > 255 {
		t.Fatalf("%d instructions: jumps are 8 bits", len(prog))
	}
	for _, tc := range []struct {
		name     string
		arch, nr uint32
		arg0     uint64
		want     uint32
	}{
		{"x86_64 add_key", x86_64, 248, 0, eperm},
		{"x86_64 request_key", x86_64, 249, 0, eperm},
		{"x86_64 keyctl", x86_64, 250, 0, eperm},
		{"x32 keyctl", x86_64, 0x40000000 | 250, 0, eperm},
		{"i386 add_key", i386, 286, 0, eperm},
		{"i386 keyctl", i386, 288, 0, eperm},
		{"x86_64 read", x86_64, 0, 0, allow},
		{"x86_64 247", x86_64, 247, 0, allow},
		{"x86_64 251", x86_64, 251, 0, allow},
		{"i386 250 (not keyctl there)", i386, 250, 0, allow},
		{"x86_64 288 (not keyctl there)", x86_64, 288, 0, allow},
		{"x86_64 clone, a fork", x86_64, 56, fork, allow},
		{"x86_64 clone, a thread", x86_64, 56, thread, allow},
		{"x86_64 clone, new namespaces but a user one", x86_64, 56, unix.CLONE_NEWNS | unix.CLONE_NEWNET | fork, allow},
		{"x86_64 clone, a user namespace", x86_64, 56, unix.CLONE_NEWUSER | fork, eperm},
		{"x32 clone, a user namespace", x86_64, 0x40000000 | 56, unix.CLONE_NEWUSER | fork, eperm},
		{"x86_64 unshare, a user namespace", x86_64, 272, unix.CLONE_NEWUSER, eperm},
		{"x86_64 unshare, a mount namespace", x86_64, 272, unix.CLONE_NEWNS, allow},
		{"x86_64 unshare, user flag in the high half only", x86_64, 272, unix.CLONE_NEWUSER << 32, allow},
		{"x86_64 clone3", x86_64, 435, 0, enosys},
		{"i386 clone, a user namespace", i386, 120, unix.CLONE_NEWUSER | fork, eperm},
		{"i386 unshare, a user namespace", i386, 310, unix.CLONE_NEWUSER, eperm},
		{"i386 clone3", i386, 435, 0, enosys},
		{"i386 56 (not clone there)", i386, 56, unix.CLONE_NEWUSER, allow},
	} {
		if got := run(t, prog, tc.nr, tc.arch, tc.arg0); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
}

// A 32-bit x86 process on a 64-bit kernel can enter through the 64-bit ABI
// too: its filter judges both; an unknown architecture gets no filter (and
// the init refuses to start the candidate).
func TestCandidateABIs(t *testing.T) {
	abis, err := abisFor("386")
	if err != nil {
		t.Fatal(err)
	}
	prog := candidateFilter(abis)
	if got := run(t, prog, 250, unix.AUDIT_ARCH_X86_64, 0); got != unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM) {
		t.Errorf("386 build, 64-bit keyctl: %#x, want EPERM", got)
	}
	if got := run(t, prog, 288, unix.AUDIT_ARCH_I386, 0); got != unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM) {
		t.Errorf("386 build, 32-bit keyctl: %#x, want EPERM", got)
	}
	if _, err := abisFor("mips64"); err == nil {
		t.Error("a filter for an architecture it does not know")
	}
}
