package sandboxinit

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// abiSyscalls are the system calls the candidate filter judges, for one
// system call ABI (seccomp_data.arch); mask is and-ed with the number first
// (x32's numbers are x86_64's with bit 30 set).
type abiSyscalls struct {
	arch    uint32
	mask    uint32
	keyring [3]uint32 // add_key, request_key, keyctl
	clone   uint32    // flags in the first argument
	unshare uint32
	clone3  uint32 // flags in memory, which a filter cannot read
}

// candidateABIs lists every ABI a process of this architecture can enter
// the kernel through.
func candidateABIs() ([]abiSyscalls, error) { return abisFor(runtime.GOARCH) }

// abisFor is candidateABIs for the architecture goarch.
func abisFor(goarch string) ([]abiSyscalls, error) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		// The flag test reads the low half of the first argument at the
		// little-endian offset.
		return nil, fmt.Errorf("no candidate filter for big-endian %s", goarch)
	}
	i386 := abiSyscalls{arch: unix.AUDIT_ARCH_I386, mask: ^uint32(0), keyring: [3]uint32{286, 287, 288}, clone: 120, unshare: 310, clone3: 435}
	x86_64 := abiSyscalls{arch: unix.AUDIT_ARCH_X86_64, mask: ^uint32(0x40000000), keyring: [3]uint32{248, 249, 250}, clone: 56, unshare: 272, clone3: 435}
	switch goarch {
	case "amd64":
		return []abiSyscalls{x86_64, i386}, nil
	case "386":
		// On a 64-bit kernel a 32-bit process can still enter through the
		// 64-bit ABI (a far jump to a 64-bit code segment): both are judged.
		return []abiSyscalls{i386, x86_64}, nil
	case "arm64":
		return []abiSyscalls{
			{arch: unix.AUDIT_ARCH_AARCH64, mask: ^uint32(0), keyring: [3]uint32{217, 218, 219}, clone: 220, unshare: 97, clone3: 435},
			{arch: unix.AUDIT_ARCH_ARM, mask: ^uint32(0), keyring: [3]uint32{309, 310, 311}, clone: 120, unshare: 337, clone3: 435},
		}, nil
	}
	return nil, fmt.Errorf("no candidate filter for %s", goarch)
}

// candidateFilter is the seccomp program: on every ABI the key system
// calls fail with EPERM, clone and unshare asking for a new user namespace
// fail with EPERM, clone3 fails with ENOSYS (so the C library falls back to
// clone, whose flags the filter can read), and everything else is allowed.
func candidateFilter(abis []abiSyscalls) []unix.SockFilter {
	const (
		offNr   = 0  // seccomp_data.nr
		offArch = 4  // seccomp_data.arch
		offArg0 = 16 // the low half of seccomp_data.args[0] (little-endian)
	)
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jeq := func(k uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k}
	}
	var prog []unix.SockFilter
	// The jumps whose true branch is one of the two denials at the end.
	var toEPERM, toENOSYS []int
	for _, abi := range abis {
		prog = append(prog, stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArch))
		archJump := len(prog)
		prog = append(prog, jeq(abi.arch),
			stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offNr),
			stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, abi.mask))
		for _, nr := range abi.keyring {
			toEPERM = append(toEPERM, len(prog))
			prog = append(prog, jeq(nr))
		}
		toENOSYS = append(toENOSYS, len(prog))
		prog = append(prog, jeq(abi.clone3))
		// clone or unshare: on to the flag test (two and one ahead).
		prog = append(prog, jeq(abi.clone))
		prog[len(prog)-1].Jt = 2
		prog = append(prog, jeq(abi.unshare))
		prog[len(prog)-1].Jt = 1
		prog = append(prog, stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW))
		prog = append(prog, stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offArg0))
		toEPERM = append(toEPERM, len(prog))
		prog = append(prog, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: unix.CLONE_NEWUSER})
		prog = append(prog, stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW))
		// Another ABI: on to the next block.
		prog[archJump].Jf = uint8(len(prog) - archJump - 1)
	}
	prog = append(prog, stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW))
	eperm := len(prog)
	prog = append(prog, stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM)))
	enosys := len(prog)
	prog = append(prog, stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS)))
	for _, i := range toEPERM {
		prog[i].Jt = uint8(eperm - i - 1)
	}
	for _, i := range toENOSYS {
		prog[i].Jt = uint8(enosys - i - 1)
	}
	return prog
}

// denyToCandidate installs the candidate filter on every thread of the
// calling process; it is inherited by the command across exec and by every
// process the command starts.
//
// Security: the kernel's keyrings are not namespaced by the candidate's
// mount, pid or network namespace. Running as uid 0 of the host's user
// namespace, the candidate could otherwise read and add keys in root's user
// keyring (host secrets cached there, and keys that outlive the run) and in
// the harness's session keyring, and request_key could start the host's
// key upcall helper with arguments of its choosing. A new user namespace
// would give the candidate every capability over namespaces of its own:
// no way out of the sandbox by itself, but the kernel code only privilege
// reaches (nf_tables, mounting file systems, …) is where container escapes
// have been found, so it is closed as the common container runtimes close
// it (clone3 answers ENOSYS because its flags are out of a filter's reach).
func denyToCandidate() error {
	abis, err := candidateABIs()
	if err != nil {
		return err
	}
	filter := candidateFilter(abis)
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("seccomp candidate filter: %w", errno)
	}
	return nil
}
