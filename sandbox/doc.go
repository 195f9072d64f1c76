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
package sandbox
