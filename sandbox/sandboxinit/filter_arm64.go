package sandboxinit

import "golang.org/x/sys/unix"

// arm64: its ABI (arm32 processes are another, refused); the generic
// system-call table has nothing the common lists lack.
const (
	nativeArch = unix.AUDIT_ARCH_AARCH64
	x32Bit     = 0
)

var allowedArch []uint32
