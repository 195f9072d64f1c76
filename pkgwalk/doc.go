// Package pkgwalk owns the blind package: what may be in it, its manifest
// and identity (bpkg), emitting it from the manifest, and verifying a view
// of it (TRVM-FORMATS §4).
//
// A package is a directory of regular files and the directories they
// imply, nothing else. Walk measures one and reports every problem at once,
// sorted, each a *RefusalError naming the path and the Rule (one exported
// sentinel per rule, matched with errors.Is): a symlink (even to a file
// inside), FIFO, socket or device; a file with a second link; a mount
// inside the package; a path segment outside [A-Za-z0-9._+-], "." or "..",
// or not NFC; two paths equal after ASCII case-folding; a directory no file
// lives in; a root that is a symlink or not a directory; and the leaks
// (governance/, ledger, brief, review, node_modules or ".." in a path; a
// file byte-identical to a holdout file; a file carrying a committed
// challenge of the holdout, whole or its id with its predicates or recipe,
// however reformatted (committed.go); JSON shaped like a holdout
// challenge). NewManifest and Manifest.ID give the TRVM-BLIND-PACKAGE-v1
// manifest and its bpkg, hashed over the canonical bytes of the evidence
// package. Emit delivers a package into an empty destination file by file
// and refuses unless what it delivered is the pinned bpkg; Deliver does
// the same copy without measuring it, for a caller that measures it later;
// VerifyView checks that a tree is exactly a manifest and returns its bytes
// in memory, and OpenView does so against a pin alone (OpenViewAt from a
// directory the caller opened). DigestOfPaths and ListRegularFiles give the release and
// instrument digests the same walk. The path-list digest of TRVM-FORMATS
// §3.1 (PathListDigest) is the one function every such digest uses.
//
// Files are opened, read and hashed by one worker per core (WalkOptions
// Workers); directories are read in order by one goroutine. Where the CPU
// has the x86 SHA extensions each worker hashes two files at a time
// (internal/sha2x: the rounds of two SHA-256 streams interleaved on one
// core, nearly twice one stream's rate; padding and the final digest are
// crypto/sha256's, and the tests check every digest against it); elsewhere
// it uses crypto/sha256 alone. A file held in memory (KeepBytes, a JSON
// file for the challenge-shape rule) larger than MaxKeptFile is refused
// rather than held.
//
// Emit measures what it delivered, not what it read: a structural walk of
// the source (every rule that needs no bytes, all problems reported before
// anything is written), then a kernel-side copy of each file
// (copy_file_range, from the descriptor that was checked to a file created
// O_EXCL beneath a directory it made; exactly the fstat'ed size, a source
// with a byte more or fewer refused), then the full walk of the
// destination (every rule, content rules included, every byte hashed),
// whose manifest must be the pinned bpkg. A refused emit removes what it
// created. The source's bytes are never held in memory, so a package is
// not limited by memory; the price is that a wrong pin, a leak in file
// contents or a source changed during the copy is found after the copy,
// and undone, rather than before it.
//
// pkgwalk does not mount, remount or isolate anything (that is sandbox/),
// does not decide which bpkg is pinned (experiment/), and never repairs a
// package: it refuses.
//
// # Security considerations
//
// Walks use file descriptors, never paths re-resolved after a check. The
// root is opened O_DIRECTORY|O_NOFOLLOW; each entry is first typed by the
// type getdents64 reports on its parent's descriptor (fstatat with
// AT_SYMLINK_NOFOLLOW on that descriptor where the filesystem reports none),
// so a device node is refused without being opened, and regular files and
// directories are then opened with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|
// RESOLVE_NO_MAGICLINKS|RESOLVE_NO_XDEV, O_NOFOLLOW|O_NONBLOCK); the
// decision (type, nlink, device) is made on fstat of that descriptor and
// the bytes hashed are read from it, through a reader limited to the size
// fstat gave plus one byte, so a file that grows or shrinks while read is
// refused. An entry swapped between the directory read and the openat2 is
// caught by the second check. The unsafe form this replaces — lstat(path), then
// open(path) — lets a rename between the two deliver other bytes.
//
// What a walk cannot establish: that nobody writes a file after it was
// read. A digest is a statement about bytes at an instant. That is why the
// clean room emits into a fresh tmpfs (new inodes, one link each, no older
// descriptor), makes it read-only at the superblock, and only then
// measures the view with OpenViewAt (every rule, every byte hashed, the pin
// checked), from the descriptor the seal was asserted on, and serves the
// bytes it returned, never the disk. Its copy
// is Deliver's, measured once, after it can no longer change. A
// walk of a tree that is being modified is not a snapshot: it measures only
// bytes it read from checked descriptors (a swapped-in symlink or FIFO is
// refused, never followed or waited on), but a rename racing the walk can
// move a name it already passed. A file's realpath cannot leave the root:
// nothing is resolved except names beneath an open directory, with
// RESOLVE_BENEATH and no symlink (a walk resolves one name beneath its
// parent's descriptor; Emit's copy resolves a file's package path beneath
// the source root's). Where the kernel has no openat2 (Linux before 5.6,
// gVisor) internal/fsx enforces the same rules with a walk from
// descriptors (O_PATH|O_NOFOLLOW per component); an openat2 forbidden by a
// seccomp filter (EPERM) makes the walk refuse to run rather than fall
// back to path resolution.
// Symlinks in the path leading to a root are followed (only the final
// component is checked); callers pass paths they chose.
//
// Emit's guarantee is on the destination: the bytes it reports as the
// pinned bpkg are the bytes its final walk read from the delivered files,
// through the destination descriptor it held from the start (a rename of
// the destination path meanwhile changes nothing it measures). A source
// changed between the structural walk and the copy, or a destination file
// changed between the copy and the final walk, gives other digests and is
// refused (ErrNotPinned, naming both ids); a source file swapped for a
// symlink, FIFO or second link is refused when it is opened for the copy.
// The final walk does not make the destination immutable afterwards, which
// is why the clean room does not rely on it: it seals a Deliver'ed copy
// read-only and measures that (OpenViewAt).
package pkgwalk
