package sandboxinit

import (
	"encoding/binary"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// run interprets the classic BPF subset keyringFilter emits over one
// seccomp_data (nr, arch).
func run(t *testing.T, prog []unix.SockFilter, nr, arch uint32) uint32 {
	t.Helper()
	data := make([]byte, 8)
	binary.NativeEndian.PutUint32(data[0:], nr)
	binary.NativeEndian.PutUint32(data[4:], arch)
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
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("instruction %d: opcode %#x", pc, in.Code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}

// Every ABI's add_key, request_key and keyctl fail with EPERM (x32's too);
// neighbouring system calls pass.
func TestKeyringFilter(t *testing.T) {
	const deny = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	if runtime.GOARCH != "amd64" {
		t.Skipf("the cases are x86_64's and i386's numbers (GOARCH %s)", runtime.GOARCH)
	}
	abis, err := keyringABIs()
	if err != nil {
		t.Fatal(err)
	}
	prog := keyringFilter(abis)
	for _, tc := range []struct {
		name     string
		arch, nr uint32
		want     uint32
	}{
		{"x86_64 add_key", unix.AUDIT_ARCH_X86_64, 248, deny},
		{"x86_64 request_key", unix.AUDIT_ARCH_X86_64, 249, deny},
		{"x86_64 keyctl", unix.AUDIT_ARCH_X86_64, 250, deny},
		{"x32 keyctl", unix.AUDIT_ARCH_X86_64, 0x40000000 | 250, deny},
		{"i386 add_key", unix.AUDIT_ARCH_I386, 286, deny},
		{"i386 keyctl", unix.AUDIT_ARCH_I386, 288, deny},
		{"x86_64 read", unix.AUDIT_ARCH_X86_64, 0, unix.SECCOMP_RET_ALLOW},
		{"x86_64 247", unix.AUDIT_ARCH_X86_64, 247, unix.SECCOMP_RET_ALLOW},
		{"x86_64 251", unix.AUDIT_ARCH_X86_64, 251, unix.SECCOMP_RET_ALLOW},
		{"i386 250 (not keyctl there)", unix.AUDIT_ARCH_I386, 250, unix.SECCOMP_RET_ALLOW},
		{"x86_64 288 (not keyctl there)", unix.AUDIT_ARCH_X86_64, 288, unix.SECCOMP_RET_ALLOW},
	} {
		if got := run(t, prog, tc.nr, tc.arch); got != tc.want {
			t.Errorf("%s: %#x, want %#x", tc.name, got, tc.want)
		}
	}
}
