// Package pkgwalk owns the blind package: what may be in it, its manifest
// and identity (bpkg), emitting it from the manifest, and verifying a view
// of it.
//
// (The walk, emit and view verification are being built; this file says
// what the package will own.) Walks use file descriptors, never paths
// re-resolved after a check: the root is opened O_DIRECTORY|O_NOFOLLOW and
// every entry with openat2 beneath it, and each decision is made on fstat
// of the descriptor that is then read. The path-list digest of
// TRVM-FORMATS §3.1 lives here as the one function every digest uses.
package pkgwalk
