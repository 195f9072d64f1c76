// Package worldinit writes a new world: the minimal, working experiment a
// person starts from when the protocol under test is their own
// (`cleanroom world init DIR`).
//
// The world it writes has the layout every run command reads (the package
// at experiment.PackageDirName or the --root-label path, the state root
// governance/) and works as
// written: its scorer self-test passes, its example holdout (one challenge,
// id E1) checks against its recipe schema, a release can be issued from it
// with the holdout committed, and `run pin` pins its reference adapter — a
// Python program, declared in governance/reference-adapter.json and
// permitted by experiment/world.json — by default. Every file it writes
// says, in a comment or in a README beside it, what the operator changes.
//
// The files are templates of our own, embedded in the binary (template/):
// template/package/ is written at the package root, template/world/ at the
// world root, with {{PACKAGE}} replaced by the package's world-relative path.
//
// # What it refuses
//
// A target that exists and is not an empty directory (errNotEmpty), and a
// root label that is not a clean relative path, or names the state root or
// a path beneath it (errRootLabel). A label other than
// experiment.PackageDirName is written to the world root's
// cleanroom-package (experiment.PackageMarkerName), from which every run
// command locates the package; the blind package's root label, pinned in
// its bpkg id, is that label, so changing the file after a pin is a
// different package and refused.
//
// # Security considerations
//
// Nothing is written in place: the whole world is written into a staging
// directory beside the target and renamed over it in one step
// (internal/durable), so an interrupted init leaves either nothing or a
// whole world, never a half-written one, and never mixes its files with
// someone else's — the kernel refuses to replace a directory that gained
// an entry after it was looked at.
package worldinit
