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
package experiment
