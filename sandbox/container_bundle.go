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
