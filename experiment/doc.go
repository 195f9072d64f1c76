// Package experiment owns the experiment's two records: the release (what a
// run is pinned to) and the run itself.
//
// # Releases
//
// A release is the record SPEC-RELEASE.json (TRVM-PROOF-WIRE-SPEC-RELEASE-v1,
// TRVM-FORMATS §3) at the root of a release package, archived immutably as
// releases/<srel>.json. This package reads it through the strict evidence
// reader with a closed shape (an unknown, missing or mistyped member is a
// refusal naming the JSON Pointer), recomputes every digest it records from
// the package on disk with the one path-list digest (pkgwalk.PathListDigest),
// computes its identity srel from the explicit release_core projection, and
// issues new releases in the reference byte form without a hand-written hash
// anywhere. Fields belong to planes: CHECKED (release type and protocols,
// compared with constants and the package's schema), DECLARED_AND_BOUND (the
// three revision labels, bound by srel), DERIVED (digests, file lists,
// jcs_upstream, holdout fields, srel: recomputed) and NON_AUTHORITATIVE
// (note: free text, outside every identity).
//
// It refuses to overwrite an archived release with different bytes, to
// issue a release from a package that has a symbolic link or special file in
// it, and to read a record of another release type. It does not decide
// whether a change between two releases is substantive for a run in
// progress: DiffReleases shows which identities moved; aborting a run is a
// human act.
//
// Security considerations (releases): recorded paths (spec_files,
// experiment_files, the public manifest's CAS entries) are only ever
// compared as strings with the paths found by the walk; they are never
// opened, so a record cannot steer a read outside the package. The files
// are listed by pkgwalk.ListRegularFiles (descriptor walk, no symlink
// followed, special files refused); the few files read again for their
// content (the schema, the public manifest, the holdout INDEX.json) must
// hash to what the walk digested, so a swap between the two reads is
// caught. A file the record lists but the disk lacks is named, never
// silently skipped: its recorded digest stands in only so the other digests
// can still be checked, and verification fails unless the caller accepts
// missing files explicitly.
//
// # Runs
//
// A run is the record governance/blind-run.json of a world
// (TRVM-BLIND-IMPLEMENTATION-RUN-v3, TRVM-FORMATS §5): it pins the release
// (srel), the delivered package (bpkg), the measuring instrument
// (instrument_digest) and the subjects (adapters, each with its package
// digest and, for a candidate, its binary digest and environment). Its
// identity run_id hashes a line-oriented preimage (TRVM-BLIND-RUN-CORE-v1,
// not JSON) that includes the status, so every transition changes it. The
// state machine is PINNED → CANDIDATE_FROZEN → REVEALED → COMPLETE, with
// ABORTED from any non-terminal state; Pin, Freeze, Reveal, Abort and
// Complete are its only writers. Each writes an immutable receipt
// (TRVM-BLIND-RUN-RECEIPT-v2) before the record, and Verify (verifyRun,
// §5.7) believes a status only when a chain of receipts walks back from it
// to PINNED. Each transition also archives the record it writes at
// governance/receipts/<run_id>/blind-run.json, believed only when its content
// recomputes that run_id, so every run stays addressable after the record
// names another (Runs, SelectRun); identical content is one identity, and
// runs that repeat a state share its receipt. Records, receipts and RESULTs
// are read through the strict evidence reader with closed shapes; a record
// with two readings is refused before any other check.
//
// It refuses: a reveal before the freeze; a freeze without source files,
// binary and environment; a pin while a run is in flight, of a package with
// a walk problem or leak, or of a release that is not archived and
// verified; any transition from a run that does not verify as it stands
// (abort excepted: a run that cannot be aborted when broken is a trap); a
// path a subject names that resolves outside the world or is spelled with
// a "." or ".." segment; a label that is not
// an identifier; rewriting a receipt or RESULT with other bytes. It does not
// score: a COMPLETE run's RESULT is re-derived by replaying the holdout's
// scorer over the archived observations (replayRun). It does not measure
// either: adapter takes the measurements and appends them to the
// measurements log, whose format and reader are this package's
// (ReadMeasurements, ReadArchived), so that Verify re-digests what the log
// links (VerifyOptions.Evidence) without importing the sandbox.
//
// Security considerations, runs: the state root is always <world>/governance
// (a selectable state root would be a selectable authority). Receipts and
// RESULTs are published with RENAME_NOREPLACE from an fsync'd temporary
// file, so a name never holds partial bytes and an existing one is never
// replaced; the record is replaced atomically; the directory is fsync'd
// after each. A transition holds an exclusive flock on the state root
// directory, released by the kernel if the holder dies. State files are
// opened with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) from the state
// root, so a planted symlink cannot stand in for a receipt. Not defended:
// an operator with write access to the world can delete history (verify
// then fails; it cannot be made to pass), and receipt times are file
// modification times, which that operator can also set.
package experiment
