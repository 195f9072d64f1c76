// Package holdout owns the measurement of a blind run: the committed
// challenge set (a holdout directory of INDEX.json plus one file per
// challenge, or a JSON array of challenges), the scorer of observation
// documents, the interop comparison of two or more implementations, the
// synthetic fixture self-test, and the findings register and questions log
// a person fills in when implementations disagree.
//
// # The scorer loads no protocol code
//
// [Score] evaluates eight predicate operators (EQ NEQ HOLDS MOVES
// REFUSAL_SET_EQ VERDICT_EQ OUTCOME_EQ LT) over an observation document and
// knows nothing about the protocol the document talks about. Each path
// resolves against exactly one root per operator, with no fallback; a path
// that does not resolve is UNRESOLVED, which is neither a pass nor a fail and
// makes the verdict FAIL. Values compare through their canonical encoding.
//
// # What it refuses
//
// A document is REFUSED — not scored at all — when any challenge violates the
// recipe schema, the document violates the observation schema (including the
// x-sorted extension), its implementation label or release is not the one
// expected, or an observation's fixture_root is not the challenge's declared
// root. Both schemas are read from the pinned package at run time
// ([LoadSchemas]); the binary embeds none, so the instrument that scores is
// the one the release digests. A holdout directory is refused when its
// INDEX.json and files disagree, when it holds anything but the indexed
// files, or when a challenge names an unknown recipe operator.
//
// # Findings and questions
//
// [Compare] deep-compares two observation documents, every member, and
// reports each difference as an UNCLASSIFIED_FINDING; [CompareAll] does every
// pair, and fewer than two documents is NOT MEASURED, never PASS. The
// findings register ([Register], governance/findings/) records each finding
// once, by an id derived from the release, the two implementations, the path
// and both values, and a person's classification into one of the world's
// finding classes (those experiment/world.json declares, given by
// experiment.World.FindingsRegister, or the reference protocol's six
// [Classes]); [Register.Outstanding] is
// what blocks completion. The questions
// log ([AskQuestion], governance/questions/) keeps the contract's fields.
// The self-test's fixture files are shape-checked before anything is
// scored; a malformed one is errFixture, never a panic. The interop
// check changes the one member synthetic-expected.json's interop_mutation
// names ({path, value}; absent: the reference protocol's
// S1.candidate.D.artifact_root) and expects exactly one finding there; a
// declaration that does not change exactly one existing member is
// errInteropMutation.
// [LoadInstrument] loads what measures a run (schemas, self-test, committed
// challenge set, scorer) for both adapter.MeasureRun and experiment's
// replay of a COMPLETE run from its archive (`run verify`), against what
// the release committed ([Committed]: [LoadCommitted] authenticates the
// bytes it read with [DigestOf] before it parses one).
//
// # Where it sits
//
// The package knows nothing of runs or releases (it imports no
// experiment): experiment imports it, so verifying a COMPLETE run replays
// the scorer directly.
//
// # Security considerations
//
// Every document crosses the strict reader (evidence.Read) before anything
// else looks at it: a duplicate member could otherwise attribute one
// measurement two ways. Holdout files and log entries are opened beneath
// their directory through an os.Root, O_NOFOLLOW|O_NONBLOCK, and must be
// regular files (checked on the descriptor), so a symlink cannot substitute a
// file outside the committed tree and a FIFO is refused rather than waited
// on; every read is bounded by evidence.MaxSize. The findings register and
// the questions log are append-only: each entry is published with
// internal/durable (never replacing a name, fsync'd, renamed into place),
// and names the digest of the entry before it, so an edit to any earlier
// entry breaks the chain; a temporary file an interrupted append left is
// ignored.
package holdout
