// Package adapter runs the adapters of a blind run as data: each adapter
// of the run record is a command plus the digests of that implementation's
// package files and binary, never code cleanroom links.
//
// Before an adapter runs, [Execute] stages a private view — a fresh
// directory holding exactly the adapter's frozen package files, its frozen
// binary and the release package (docs/spec/proof-wire), laid out at their
// world-relative paths — hashing each byte it copies, and refuses to run
// unless the staged files recompute the recorded package_digest and
// binary_digest. The bytes that were hashed are the bytes that run: nothing
// is re-read from the world afterwards. It then substitutes {{CHALLENGES}}
// and {{OUT}}, hands the invocation to a [Runner] and reads the output
// document through the strict reader and the scorer.
//
// [MeasureRun] measures a whole run (verification, self-test, committed
// challenges, every adapter, interop, findings, the measurements log) and
// [CompleteRun] adds the COMPLETE transition when everything holds. Every
// measurement is evidence: each observation document read and its scored
// results (experiment.TypeScored: every predicate with op, path, expected,
// observed and verdict) are archived in governance/evidence/ under their
// SHA-256 (create-exclusive, fsync'd) before the measurements-log entry
// that links them is appended, whatever becomes of the run. The log is
// part of the state root: experiment reads it (ReadMeasurements) and
// experiment.Verify re-digests what it links (VerifyOptions.Evidence, run
// verify). A finished run is not
// measured again (experiment.ErrRunFinished).
//
// # What it refuses
//
//   - a candidate before the chain witnesses REVEALED: the challenge file
//     is not even written (errNotRevealed);
//   - a package or binary whose bytes no longer match the freeze
//     (errPackageDigest, errBinaryDigest);
//   - a command that points outside the frozen files (errCommand);
//   - a frozen file in the staged I/O directory cleanroom-io/, where the
//     challenges and the output go (errReservedPath);
//   - a release package that cannot be staged as verified, e.g. one holding
//     a symlink (errReleasePackage);
//   - a non-zero exit, a signal, a timeout, an OOM kill (errExit,
//     errTimeout), an output that is missing, not a regular file, too large
//     or not strictly readable (errOutput), or that the scorer refuses
//     (holdout's rules, including an observation naming another
//     implementation or release).
//
// Every one of these is an ABSENT measurement recorded with its rule —
// never a zero, never a partial score.
//
// # Security considerations
//
// The candidate is untrusted code. [SandboxRunner] runs it through
// sandbox.Exec (no network, memory, pid and time limits, only /usr and the
// staged view visible). [UnsandboxedRunner] runs it as a plain child process
// with a timeout and a minimal environment: it exists for machines without
// the sandbox, must be chosen explicitly (--no-sandbox), and every
// measurement it produces says Sandboxed=false. The output is read beneath
// the staging directory through an os.Root with O_NOFOLLOW, so a candidate
// that replaces its output with a symlink cannot make cleanroom read a file
// outside the view. A measurements-log entry is only a name:
// experiment.ReadArchived opens nothing but evidence/<the linked sha256>.json, beneath the state
// root without following a link, so an edited entry cannot steer a read
// to the record, the holdout or outside the world.
//
// # No API promise
//
// This package is cleanroom's own machinery, not an API: it is exported for
// the cleanroom binaries and their tests, and any identifier in it may
// change in any commit, without notice. docs/design.md lists the packages
// meant to be imported.
package adapter
