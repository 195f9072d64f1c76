// Package durable is cleanroom's one way to put bytes on disk that must
// survive a crash: evidence files that are never rewritten (receipts,
// RESULTs, archives, log entries, manifests) and records replaced whole.
//
// Every write goes to a temporary file beside the target (named with
// [TempPrefix], so a verifier can recognise what an interrupted write left
// behind), is fsynced, then moved into place by a rename relative to a
// descriptor of the directory, and the directory is fsynced. A name never
// holds partial bytes. [Create] never replaces anything (renameat2
// RENAME_NOREPLACE; where renameat2 takes no flags — gVisor's runsc
// 20221219 answers EINVAL — link(2), which never replaces either, then
// the temporary name removed; see noreplace.go for a directory); [Replace]
// swaps whole files atomically. A whole directory is written into a
// [StageDir] beside its name and published by [CreateDir] the same way: a
// reader sees all of it or none.
//
// Directories are opened refusing a symbolic link (fsx.OpenDir) and
// temporary files are created O_CREAT|O_EXCL|O_NOFOLLOW beneath that
// descriptor, so a symlink planted at the directory or the temporary name
// cannot redirect a write.
//
// It refuses a name that is not a plain file name (errBadName) and
// [MkdirAll] over anything but a directory (syscall.ENOTDIR). It owns no
// policy about what is written: callers decide whether an existing name is
// a retry or a conflict.
//
// # Security Considerations
//
// Only the last component of dir is opened without following a symbolic
// link; the components above it are resolved by the kernel as usual, so a
// caller that must stay beneath a root checks the root itself (as
// experiment does for its state root). [MkdirAll] works on paths.
package durable
