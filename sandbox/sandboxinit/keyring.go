package sandboxinit

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// keyringSyscalls are add_key, request_key and keyctl for one system call
// ABI (seccomp_data.arch); mask is and-ed with the number first (x32's
// numbers are x86_64's with bit 30 set).
type keyringSyscalls struct {
	arch uint32
	mask uint32
	nrs  [3]uint32
}

// keyringABIs lists every ABI a process of this architecture can enter the
// kernel through.
func keyringABIs() ([]keyringSyscalls, error) {
	i386 := keyringSyscalls{arch: unix.AUDIT_ARCH_I386, mask: ^uint32(0), nrs: [3]uint32{286, 287, 288}}
	switch runtime.GOARCH {
	case "amd64":
		return []keyringSyscalls{
			{arch: unix.AUDIT_ARCH_X86_64, mask: ^uint32(0x40000000), nrs: [3]uint32{248, 249, 250}},
			i386,
		}, nil
	case "386":
		return []keyringSyscalls{i386}, nil
	case "arm64":
		return []keyringSyscalls{
			{arch: unix.AUDIT_ARCH_AARCH64, mask: ^uint32(0), nrs: [3]uint32{217, 218, 219}},
			{arch: unix.AUDIT_ARCH_ARM, mask: ^uint32(0), nrs: [3]uint32{309, 310, 311}},
		}, nil
	}
	return nil, fmt.Errorf("no keyring filter for %s", runtime.GOARCH)
}

// keyringFilter is the seccomp program: the key system calls of every ABI
// fail with EPERM, everything else is allowed.
func keyringFilter(abis []keyringSyscalls) []unix.SockFilter {
	const (
		offNr   = 0 // seccomp_data.nr
		offArch = 4 // seccomp_data.arch
	)
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	var prog []unix.SockFilter
	var toDeny []int // the jumps whose true branch is the EPERM return
	for _, abi := range abis {
		prog = append(prog, stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArch))
		archJump := len(prog)
		prog = append(prog,
			unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: abi.arch},
			stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offNr),
			stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, abi.mask))
		for _, nr := range abi.nrs {
			toDeny = append(toDeny, len(prog))
			prog = append(prog, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: nr})
		}
		prog = append(prog, stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW))
		// Another ABI: on to the next block.
		prog[archJump].Jf = uint8(len(prog) - archJump - 1)
	}
	prog = append(prog, stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW))
	deny := len(prog)
	prog = append(prog, stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM)))
	for _, i := range toDeny {
		prog[i].Jt = uint8(deny - i - 1)
	}
	return prog
}

// denyKeyrings installs the keyring filter on every thread of the calling
// process; it is inherited by the command across exec and by every process
// the command starts.
//
// Security: the kernel's keyrings are not namespaced by the candidate's
// mount, pid or network namespace. Running as uid 0 of the host's user
// namespace, the candidate could otherwise read and add keys in root's user
// keyring (host secrets cached there, and keys that outlive the run) and in
// the harness's session keyring, and request_key could start the host's
// key upcall helper with arguments of its choosing.
func denyKeyrings() error {
	abis, err := keyringABIs()
	if err != nil {
		return err
	}
	filter := keyringFilter(abis)
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("seccomp keyring filter: %w", errno)
	}
	return nil
}
