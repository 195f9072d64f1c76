// Package cgprime hides a kernel wait that every container start pays:
// it keeps the kernel's cgroup attach lock warm while a container is
// being prepared. It changes nothing and guarantees nothing; it owns no
// security property and refuses nothing (any error just means no
// priming).
//
// Why: every write to a cgroup.procs file takes the kernel's global
// cgroup_threadgroup_rwsem for writing, and the first writer after a quiet
// period waits for a full RCU grace period (rcu_sync_enter) before the
// lock is granted — 6–15 ms on a 2-core host, measured — while holding
// cgroup_mutex; writers that follow within a grace period do not wait.
// libcontainer's attach of a container's init is such a first writer, on
// the critical path of every start. While primed, this package writes the
// process's own PID into the cgroup.procs of the cgroup the process is
// already in, once a millisecond: the first write pays the grace period
// while the caller does other work, the next ones keep the fast path open.
// Moving a process into the cgroup it is in is a no-op for the kernel
// (source and destination css_set are the same); the cgroup is resolved
// through /proc/self/mountinfo, as the cgroup libraries do, the write
// is only made after the process was found in that cgroup's list, and
// priming ends as soon as /proc/self/cgroup changes (someone moved the
// process: a write would move it back).
//
// Where RCU grace periods are expedited for the whole host
// (/sys/kernel/rcu_expedited is 1, rcu_normal is not) the wait is a fraction of a
// millisecond, and a write, a read and a wake-up every millisecond cost
// more than they hide: priming then makes no write at all.
//
// The package depends on the standard library and x/sys only, so that a
// program can start priming from an early package initialiser (Early).
// The favordynmods mount option would remove the wait for every process on
// the host, but remounting the host's cgroup hierarchies is not a
// sandbox's decision.
//
// # No API promise
//
// This package is cleanroom's own machinery, not an API: it is exported for
// the cleanroom binaries and their tests, and any identifier in it may
// change in any commit, without notice. docs/design.md lists the packages
// meant to be imported.
package cgprime
