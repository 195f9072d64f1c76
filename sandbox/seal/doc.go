// Package seal establishes and asserts the clean room's sealed view and the
// privileges of the process that serves it. It depends on nothing but the
// standard library and golang.org/x/sys/unix, so that the room's own small
// binary (cmd/cleanroom-room) can link it without the container runtime.
//
// The clean room's view of a package is established, not checked for:
// SealedCommand re-executes the binary with new mount and network namespaces
// created at clone time (never unshare(2) from a running Go program, which
// moves one thread); the child marks inherited descriptors close-on-exec,
// makes / private recursively, mounts a fresh size-limited tmpfs
// (nosuid,nodev,noexec, mode 0755), lets the caller emit into it, and
// remounts it read-only first at the superblock (MS_REMOUNT|MS_RDONLY
// without MS_BIND: the objects themselves become immutable through every
// name) and then at the mount point. OpenSealed then opens the mount point
// once and asks the kernel about that descriptor (AssertSealedAt): exactly
// one tmpfs mount at the path, "ro" in the per-mount and the superblock
// options of /proc/self/mountinfo, nosuid/nodev/noexec, no shared: peer
// group; and on the descriptor fstatfs ST_RDONLY, st_dev equal to the
// mount's, statx's mount ID equal to the entry's and the mount-root
// attribute (Linux 5.8), and a create beneath it that fails with EROFS.
// The view is then read through that descriptor, never by its path again. ExecUnprivileged then replaces the process
// with one holding no capability in any set, with no_new_privs and locked
// securebits. It refuses (fails closed) on any doubt. It does not defend
// against a CAP_SYS_ADMIN holder in the view's own mount namespace (who
// could remount it read-write), nor against the host's root.
//
// # No API promise
//
// This package is cleanroom's own machinery, not an API: it is exported for
// the cleanroom binaries and their tests, and any identifier in it may
// change in any commit, without notice. docs/design.md lists the packages
// meant to be imported.
package seal
