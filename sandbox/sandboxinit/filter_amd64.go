package sandboxinit

import "golang.org/x/sys/unix"

// x86_64: its ABI, the x32 bit, and the older forms of the common calls
// that x86_64 (unlike the generic table arm64 uses) still has and C
// libraries and static binaries still make.
const (
	nativeArch = unix.AUDIT_ARCH_X86_64
	x32Bit     = 0x40000000
)

var allowedArch = []uint32{
	unix.SYS_OPEN, unix.SYS_CREAT, unix.SYS_STAT, unix.SYS_LSTAT, unix.SYS_ACCESS,
	unix.SYS_MKDIR, unix.SYS_RMDIR, unix.SYS_UNLINK, unix.SYS_RENAME, unix.SYS_LINK, unix.SYS_SYMLINK,
	unix.SYS_READLINK, unix.SYS_CHMOD, unix.SYS_CHOWN, unix.SYS_LCHOWN, unix.SYS_UTIME, unix.SYS_UTIMES,
	unix.SYS_FUTIMESAT, unix.SYS_MKNOD, unix.SYS_DUP2, unix.SYS_PIPE, unix.SYS_FORK, unix.SYS_VFORK,
	unix.SYS_GETDENTS, unix.SYS_GETPGRP, unix.SYS_INOTIFY_INIT, unix.SYS_EPOLL_WAIT,
	unix.SYS_EPOLL_CREATE, unix.SYS_EVENTFD, unix.SYS_SIGNALFD, unix.SYS_POLL, unix.SYS_SELECT, unix.SYS_PAUSE,
	unix.SYS_ALARM, unix.SYS_TIME, unix.SYS_ACCEPT, unix.SYS_REMAP_FILE_PAGES,
	// Thread-local storage setup of every x86_64 process.
	unix.SYS_ARCH_PRCTL,
}
