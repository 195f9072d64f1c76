package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// bundleFSBytes bounds the per-run tmpfs that holds a bundle: the rootfs
// skeleton (mount points and symlinks), the minimal /etc and libcontainer's
// state (state.json, exec.fifo) — a few kilobytes. The sealed package view
// is a tmpfs of its own, mounted inside.
const bundleFSBytes = 4 << 20

// mountBundle mounts a fresh tmpfs on the (empty) bundle directory, private
// and root-only, so that everything a run creates on the host lives in
// memory and disappears with one unmount instead of a removal file by file
// (the state root may be on a journalled disk: /run is ext4 on some hosts,
// and creating and removing the bundle there cost several milliseconds per
// run). unmount detaches it; the caller then removes the empty directory.
//
// Security: mode 0700 keeps the bundle (exec.fifo, the rootfs) away from
// other users as the state root's own 0700 does; nosuid,nodev,noexec because
// nothing in it is ever executed or opened as a device (the container's
// root holds only mount points; its /usr, /bin… are separate read-only
// binds); MS_PRIVATE so that nothing mounted under it (the package view)
// propagates to other mount namespaces sharing the host's /run, and a
// fixed size so that a run cannot fill the host's memory through it.
func mountBundle(bundle string) (unmount func(), err error) {
	opts := fmt.Sprintf("mode=0700,size=%d", bundleFSBytes)
	if err := unix.Mount("cleanroom-bundle", bundle, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return nil, fmt.Errorf("sandbox bundle tmpfs: %w", err)
	}
	unmount = func() { _ = unix.Unmount(bundle, unix.MNT_DETACH) }
	if err := unix.Mount("", bundle, "", unix.MS_PRIVATE, ""); err != nil {
		unmount()
		return nil, fmt.Errorf("sandbox bundle tmpfs: private: %w", err)
	}
	return unmount, nil
}

// primeCgroupAttach hides a kernel wait behind the work that precedes the
// container's start; it changes nothing and guarantees nothing.
//
// Why: every write to a cgroup.procs file takes the kernel's global
// cgroup_threadgroup_rwsem for writing, and the first writer after a quiet
// period waits for a full RCU grace period (rcu_sync_enter: 6–15 ms on
// this 2-core host, measured) before the lock is granted; writers that
// follow within a grace period do not wait. libcontainer's attach of the
// container's init (cgroups.WriteCgroupProc) is such a first writer, and
// every exec paid the grace period on its critical path. So, from the start
// of Exec until the container has started (stop), this writes its own PID
// into the cgroup.procs of the cgroup it is already in, once a millisecond:
// the first write waits for the grace period while Exec builds the network
// namespace, runs the mechanism check and prepares the rootfs; the next
// ones keep the fast path open for libcontainer's attach. Moving a process
// into the cgroup it is in is a no-op for the kernel (source and
// destination css_set are the same). Best effort: any error (no cgroup
// filesystem, read-only, not root) just means no priming. The favordynmods
// mount option would remove the wait for everyone, but remounting the
// host's cgroup hierarchies is not the sandbox's decision.
func primeCgroupAttach() (stop func()) {
	procs := ownCgroupProcs()
	if procs == "" {
		return func() {}
	}
	f, err := os.OpenFile(procs, os.O_WRONLY, 0)
	if err != nil {
		return func() {}
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		defer f.Close()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			// Each write is one migration request of its own.
			if _, err := f.Write(pid); err != nil {
				return
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(quit); <-finished }
}

// ownCgroupProcs returns the cgroup.procs file of this process's own cgroup:
// in the pids (else freezer) v1 hierarchy, or the unified one; "" if none
// is found.
func ownCgroupProcs() string {
	if cgroups.IsCgroup2UnifiedMode() {
		f, err := os.Open("/proc/self/cgroup")
		if err != nil {
			return ""
		}
		defer f.Close()
		s := bufio.NewScanner(f)
		for s.Scan() {
			if rel, ok := strings.CutPrefix(s.Text(), "0::"); ok && filepath.IsAbs(rel) {
				return filepath.Join("/sys/fs/cgroup", rel, "cgroup.procs")
			}
		}
		return ""
	}
	for _, sub := range []string{"pids", "freezer"} {
		if dir, err := cgroups.GetOwnCgroupPath(sub); err == nil {
			return filepath.Join(dir, "cgroup.procs")
		}
	}
	return ""
}
