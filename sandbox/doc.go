// Package sandbox owns the namespaces and isolation cleanroom runs code in:
// the candidate container (runc's libcontainer: new mount, pid, ipc, uts and
// network namespaces, a read-only root built from host binds, no
// capabilities, no_new_privs, cgroup limits, a wall-clock timeout), the
// mechanism-level network isolation check (netlink, from the candidate's
// network namespace), the seal probe from the candidate's vantage, and
// allowlisted egress (a veth pair with host routes only and a host-side
// filter). It refuses to start a container whose isolation it could not
// establish and verify: a failed or partial check is never a pass.
//
// # Security Considerations
//
// The container runs as uid 0 with every capability dropped and
// no_new_privs set; it cannot change its own network namespace (no
// CAP_NET_ADMIN) or remount its root. The isolation check and the probe
// run before the candidate starts; continuity between the probe and the
// candidate's run is limited to checking that the candidate's process is in
// the very network namespace that was checked (same inode), not that the
// host left that namespace untouched in between.
//
// # The sealed view (seal*.go, mount*.go)
//
// The clean room's view of a package is established, not checked for:
// SealedCommand re-executes the binary with new mount and network namespaces
// created at clone time (never unshare(2) from a running Go program, which
// moves one thread); the child marks inherited descriptors close-on-exec,
// makes / private recursively, mounts a fresh size-limited tmpfs
// (nosuid,nodev,noexec, mode 0755), lets the caller emit into it, and
// remounts it read-only first at the superblock (MS_REMOUNT|MS_RDONLY
// without MS_BIND: the objects themselves become immutable through every
// name) and then at the mount point. AssertSealed then asks the kernel:
// exactly one tmpfs mount at the path, "ro" in the per-mount and the
// superblock options of /proc/self/mountinfo, nosuid/nodev/noexec, no
// shared: peer group, statfs ST_RDONLY, st_dev equal to the mount's, and a
// create that fails with EROFS. ExecUnprivileged then replaces the process
// with one holding no capability in any set, with no_new_privs and locked
// securebits. It refuses (fails closed) on any doubt. It does not defend
// against a CAP_SYS_ADMIN holder in the view's own mount namespace (who
// could remount it read-write), nor against the host's root.
package sandbox
