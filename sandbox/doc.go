// Package sandbox owns the namespaces and isolation cleanroom runs code in:
// the candidate container (runc's libcontainer: new user, mount, pid, ipc,
// uts, cgroup and network namespaces, a read-only root built from host binds, no
// capabilities, no_new_privs, cgroup limits, a wall-clock timeout), the
// mechanism-level network isolation check (netlink, from the candidate's
// network namespace), the seal probe from the candidate's vantage, and
// allowlisted egress (a veth pair with host routes only and a host-side
// filter). It refuses to start a container whose isolation it could not
// establish and verify: a failed or partial check is never a pass.
//
// # Security Considerations
//
// The candidate runs in a user namespace of its own, as uid 0 inside and
// host uid CandidateUID (2147352576, with its 65536 uids and gids a range
// the sandbox keeps for itself) outside, with every capability dropped and
// no_new_privs set; Exec reads the uids of the candidate's first process
// from the host's /proc before the command starts and refuses anything but
// CandidateUID (errHostRoot). It cannot change its own network namespace
// (the namespace belongs to the host's user namespace) or remount its
// root. The workspace is chowned to CandidateUID before the run (not an
// idmapped mount: one mapping the workspace's owner, root for the
// workspaces cleanroom makes, would store what the candidate creates as
// root's on the host); after it, once every process of the candidate is
// gone, set-uid and set-gid bits are stripped and FIFOs, sockets and
// devices are named (Result.Workspace, RuleSpecialFile; RuleUnwalked when
// the walk could not finish): the caller refuses to read the workspace
// when WorkspaceRefused(Result.Workspace) holds, the one check of both
// rules. A cgroup namespace hides the host's cgroup paths.
//
// A default-deny seccomp filter (installed by sandboxinit before
// libcontainer's init runs, and inherited by the command) allows what
// ordinary programs, toolchains and interpreters need and refuses the
// rest: socket families other than AF_UNIX, AF_INET, AF_INET6 and
// NETLINK_ROUTE (AF_VSOCK is not network-namespaced: neither the check nor
// the probe below sees it) and the type SOCK_PACKET, io_uring, the kernel keyrings (not
// namespaced), a new user namespace, ptrace, bpf, other ABIs; the policy
// and the lists are in sandboxinit/filter.go. It allows the init's own
// mount calls, which need a capability the candidate never holds.
//
// Paths: Config.Workspace and Config.Package are refused (PathRefusal,
// errHostPath) when they are a system tree, inside one or a parent of one,
// the state root, inside it or a parent of it, or a symlink; the bind uses
// the path with its parents' links resolved. `sandbox exec` adds that a
// workspace must be empty or one a run made its own (CheckNewWorkspace).
//
// Streams: the candidate's stdin is /dev/null or a pipe Exec copies into,
// its stdout and stderr pipes Exec copies out of (bounded by Stdio.Limit,
// terminal control sequences escaped when the writer is a terminal):
// never a descriptor of the caller's, through which /proc/self/fd/N would
// reach the host file behind it.
//
// The isolation check and the probe
// run before the candidate starts; continuity between the probe and the
// candidate's run is limited to checking that the candidate's process is in
// the very network namespace that was checked (same inode), not that the
// host left that namespace untouched in between.
//
// One Config describes a run; Config.Spec renders it as an OCI runtime
// spec and Exec hands that spec to runc's own converter (specconv), so the
// container is what `runc run` would make of the same config.json. The
// network namespace is created by cleanroom, not libcontainer, so that it
// can be checked and probed before the command starts; the container
// joins it.
//
// What the check proves: only lo (or lo and the egress veth) exists; no
// route in any table is a default route (netlink reports those as
// 0.0.0.0/0, not nil); only the routes the allowlist implies exist; the
// policy rules are the kernel's defaults; route lookups to public
// addresses fail with ENETUNREACH (no packet is sent); for allowlisted
// runs the host-side nftables table is present with its reject rules. An
// interrupted netlink dump is retried and never counted as a pass. What
// the probe proves: a TCP connection to the sealed address from inside
// that namespace failed at the transport layer. Neither says anything
// about AF_UNIX sockets reachable through bind mounts (none are bound: the
// root holds only /usr, /lib*, /bin, /sbin, a generated /etc, the
// workspace and Config.Binds, read-only under /opt), nor about the
// listeners a caller opens in the namespace through Config.Vantage after
// the check (room agent's proxy on lo and its abstract relay socket: no
// link, no route, only sockets whose other ends the caller owns), nor
// about the host's own integrity.
//
// Descriptors: libcontainer marks every descriptor of the harness ≥ 3
// close-on-exec before starting the container (CVE-2024-21626) and closes
// the rest in the init; the tests assert that only 0–2, pipes and
// /dev/null, reach the command. The harness's terminal is never passed as
// stdin (TIOCSTI).
//
// Harness death: libcontainer's init is a grandchild that does not inherit
// its parent-death signal, so sandboxinit (linked by every binary that runs
// containers) sets PR_SET_PDEATHSIG to SIGKILL in the container's init
// before libcontainer's init runs; it survives the exec of the command. If
// the harness is killed, the kernel kills the container's PID 1 and with
// it every task. An OCI bundle, run by another runtime's init, starts this
// binary as a shim (bound read-only at /.cleanroom/shim) that sets the
// same signal and execs the command.
// The cgroups and the bundle of such a run (its directory under the state
// root, with the run's tmpfs still mounted on it), and an allowlisted run's
// host filter table, are left behind; GC (`cleanroom sandbox gc`) removes
// them. Each run holds an flock on a file
// in its tmpfs for its whole life, taken while the state root is held
// shared; GC holds the root exclusively and takes each run's lock without
// waiting, so it removes only runs whose owner is gone, and leaves whole
// (and names) a run whose cgroup still has processes.
//
// State: each run mounts a fresh tmpfs (mode 0710, group CandidateUID so
// that the container's init can pass through to its root; nosuid, nodev,
// noexec, 4 MiB) on its own directory under the state root (default
// /run/cleanroom-sandbox, itself 0710 and group CandidateUID, its parents
// searchable by CandidateUID, opened without following symlinks)
// and keeps there the
// rootfs skeleton, the generated /etc and libcontainer's state; one
// unmount removes it all. The state root's own filesystem is not trusted
// to be tmpfs (it is ext4 on some hosts, where a removal file by file cost
// milliseconds per run), and nothing is shared between runs. The state
// root is a private mount: if the mount it lies on is in a shared peer
// group (systemd's /run), the first run binds it onto itself and makes the
// bind private (under an exclusive flock on the root, so concurrent runs
// bind once), so a run's tmpfs and the package view in it are private from
// their creation and never appear in another mount namespace. The last run
// to end (or GC, once no run is left) detaches that bind again, and only a
// bind of the state root onto itself: a normal exit leaves no mount. Before the
// container starts, Exec keeps the kernel's cgroup attach lock warm
// (package cgprime): a no-op migration of its own process into its own
// cgroup, so the RCU grace period the first attach waits for is spent
// while the namespace is built and checked (not where grace periods are
// expedited: the wait is then short); nothing is weakened by it.
//
// Rootless mode: a process that is not host root runs its command again
// through EnterRootless, in a user namespace of its own (its uid and gid
// mapped to 0, nothing else) and a private mount namespace; there Exec
// does what it does as root, with these differences: the candidate's
// user namespace maps its 0 to that one id (the user's uid on the host,
// which hostUID checks is not 0); no host cgroup is writable, so a
// delegated cgroup v2 subtree is used when there is one and per-process
// rlimits (RLIMIT_DATA, RLIMIT_NPROC) stand in otherwise, set by the
// limits stage (sandboxinit.LimitsArg) at the command's exec so that they
// never bound the container's own Go init; the state root
// is a tmpfs mounted in that mount namespace, so a killed run leaves
// nothing; an allowlist is refused (errRootless: its veth and filter live
// in the host's network namespace); the workspace must be empty. The
// namespaces the candidate runs in belong to the user's user namespace,
// so every process of that user could enter them: rootless mode trusts
// the user's other processes as root mode trusts root. CheckMode finds
// the mode by doing what a rootless run needs (probeRootless) and names
// the sysctl that forbids it.
//
// The clean room's sealed view is package seal (sandbox/seal), which this
// package uses for the mount-table reading of its own checks.
//
// # No API promise
//
// This package is cleanroom's own machinery, not an API: it is exported for
// the cleanroom binaries and their tests, and any identifier in it may
// change in any commit, without notice. docs/design.md lists the packages
// meant to be imported.
package sandbox
