package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// bundleFSBytes bounds the per-run tmpfs that holds a bundle: the rootfs
// skeleton (mount points and symlinks), the minimal /etc and libcontainer's
// state (state.json, exec.fifo) — a few kilobytes. The sealed package view
// is a tmpfs of its own, mounted inside.
const bundleFSBytes = 4 << 20

// bundleSource is the source name of a run's tmpfs in mountinfo: `sandbox
// gc` detaches only mounts that carry it.
const bundleSource = "cleanroom-bundle"

// mountBundle mounts a fresh tmpfs on the (empty) bundle directory, private
// and reachable by root and the container's init only, so that everything a run creates on the host lives in
// memory and disappears with one unmount instead of a removal file by file
// (the state root may be on a journalled disk: /run is ext4 on some hosts,
// and creating and removing the bundle there cost several milliseconds per
// run). unmount detaches it; the caller then removes the empty directory.
//
// Security: mode 0710, group CandidateUID, keeps the bundle (exec.fifo, the
// rootfs, the package view) away from other users as the state root's own
// 0710 does, and lets the container's init (host uid and gid CandidateUID)
// pass through to its root; nosuid,nodev,noexec because
// nothing in it is ever executed or opened as a device (the container's
// root holds only mount points; its /usr, /bin… are separate read-only
// binds); and a fixed size so that a run cannot fill the host's memory
// through it. It is private from its creation because the state root is
// (privateStateRoot: a mount made beneath a private mount joins no peer
// group), so neither it nor the package view mounted in it ever appears in
// another mount namespace.
func mountBundle(bundle string) (unmount func(), err error) {
	opts := fmt.Sprintf("mode=0710,uid=0,gid=%d,size=%d", candidateID(), bundleFSBytes)
	if err := unix.Mount(bundleSource, bundle, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return nil, fmt.Errorf("sandbox bundle tmpfs: %w", err)
	}
	return func() { _ = unix.Unmount(bundle, unix.MNT_DETACH) }, nil
}
