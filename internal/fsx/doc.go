// Package fsx is cleanroom's one way to open a name relative to a
// directory descriptor safely against a tree someone else controls: the
// flags that make the lookup safe (no symbolic or magic link followed,
// nothing outside the directory, no mount crossed), each explained once,
// and the retry of an interrupted lookup, in one place.
//
// The lookup is openat2(2) with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
// RESOLVE_NO_MAGICLINKS|RESOLVE_NO_XDEV. Where the kernel has no openat2
// (it answers ENOSYS: Linux before 5.6, and gVisor — Debian's runsc
// 20221219, the runtime people choose for untrusted code on Kubernetes),
// probed once, the same rules are enforced by a walk one component at a
// time from the directory descriptor (walk.go), with the same answers
// (ELOOP, EXDEV, ENOTDIR, ENOENT, EINVAL). Any other refusal of openat2
// (EPERM from a seccomp filter) is returned as it is.
//
// Callers decide on fstat of the descriptor they get back and read from
// that same descriptor, never from the path again (a rename between a check
// by path and an open by path would defeat the check). Reading the bytes
// with a size bound is evidence.ReadOpenFile's job; fsx only opens.
//
// # Security considerations
//
// The walk is not path resolution: it never re-resolves a string after a
// check. Each directory is opened O_PATH|O_NOFOLLOW beneath the
// descriptor of its parent and typed by statx on that descriptor; a
// symbolic link is refused (or, with FollowInside, its text is walked in
// its place, at most 40 links, never an absolute one, never a /proc link);
// ".." returns to the descriptor the walk came from and is refused at the
// start; a component on another mount is refused. Swapping a component
// (a rename, a symlink put in its place) after the walk opened it changes
// nothing: the walk holds the descriptor it checked. The last component is
// checked through its own O_PATH descriptor and then opened by name with
// O_NOFOLLOW; a different inode there (a swap between the two) is EAGAIN,
// retried once. Falling back to the walk is therefore not the downgrade a
// fallback to path resolution would be. What it sees less well: a mount
// is known by its mount id where the kernel reports one (statx
// STATX_MNT_ID, or name_to_handle_at), else by device number alone, so in
// gVisor a bind mount of a directory of the same filesystem is not told
// apart from a plain directory (overlayfs gives files their layer's
// device: a file there is taken to be on its overlay).
//
// It imports the standard library and golang.org/x/sys only, so every
// package of the module may use it (deps_test.go).
package fsx
