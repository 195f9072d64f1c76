package experiment

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// RunRule names one rule of the run lifecycle (TRVM-FORMATS §5).
// errors.Is(err, rule) reports whether err (a *RunProblem, a *VerifyError, a
// *TransitionError or anything wrapping them) broke it. A rule is exported
// only where a caller outside experiment uses it (ErrRunFinished and
// ErrMeasurementEvidence: adapter makes both); the others are the
// package's own. The string values are stable short phrases; they appear
// in command output, where a caller outside sees them.
type RunRule string

// Error makes a RunRule usable as an errors.Is target.
func (r RunRule) Error() string { return string(r) }

// The rules of the run record, its receipts, its RESULT and its transitions.
// Each one closes a way for a status to be claimed without having happened.
const (
	// errNoRecord: no run record exists, so no subject is pinned.
	errNoRecord RunRule = "no run record"
	// errStateRoot: governance/ is not a directory of this world (a symbolic
	// link can point the authority at a copy revealed elsewhere).
	errStateRoot RunRule = "state root is not a directory of this world"
	// errRecordBytes: the record's bytes fail the strict reader; a record with
	// two readings has no single thing to check.
	errRecordBytes RunRule = "run record refused at the byte boundary"
	// errRunShape: an undeclared or missing member, or a member of the wrong
	// type, in the record, a receipt or a RESULT — a member nothing reads is
	// where evidence hides.
	errRunShape RunRule = "closed shape broken"
	// errRecordType: the record is not a TRVM-BLIND-IMPLEMENTATION-RUN-v3.
	errRecordType RunRule = "record type is not TRVM-BLIND-IMPLEMENTATION-RUN-v3"
	// errUnknownStatus: a status outside the five states.
	errUnknownStatus RunRule = "status is not a state"
	// errRole: a role outside {reference, candidate}; re-identifying a record
	// around any other word would make it legal.
	errRole RunRule = "role is not reference or candidate"
	// errLabel: an implementation label that is not an identifier; the label
	// names the archived observation file, so a path in it carries evidence
	// out of the archive.
	errLabel RunRule = "implementation label is not an identifier"
	// errDuplicateLabel: two subjects with one label have two readings.
	errDuplicateLabel RunRule = "implementation label appears twice"
	// errRunID: run_id does not recompute from the record; something moved
	// without the identity moving.
	errRunID RunRule = "run_id does not identify the record"

	// errReleaseUnreadable: SPEC-RELEASE.json is missing or refused.
	errReleaseUnreadable RunRule = "SPEC-RELEASE.json unreadable"
	// errReleaseNotVerified: at pin, the release record does not verify
	// against the package (a digest does not recompute); a run would pin an
	// identity the bytes do not have.
	errReleaseNotVerified RunRule = "release does not verify against the package"
	// errRunReleaseNotArchived: the selected release is not in
	// releases/<srel>.json (or differs from SPEC-RELEASE.json at pin).
	errRunReleaseNotArchived RunRule = "selected release not archived"
	// errReleaseDrift: a run in progress names another release than the tree;
	// a later release never silently moves a run.
	errReleaseDrift RunRule = "run's release is not the tree's release"
	// errContractRevision: blind_contract_revision differs from the release's
	// experiment_revision.
	errContractRevision RunRule = "blind_contract_revision is not the release's experiment_revision"
	// errInstrumentMissing: an instrument member is absent from experiment/.
	errInstrumentMissing RunRule = "instrument member missing"
	// errInstrumentDigest: the instrument moved after the run was pinned.
	errInstrumentDigest RunRule = "instrument_digest does not match the tree"
	// errPackageDigest: a subject's files moved after they were frozen.
	errPackageDigest RunRule = "package_digest does not match the tree"
	// errPackageFileAbsent: a file a subject froze is absent.
	errPackageFileAbsent RunRule = "frozen package file absent"
	// errOutsideWorld: a path the record names does not resolve inside the
	// world; a run may only authorize subjects that are part of it.
	errOutsideWorld RunRule = "path does not resolve inside the world"
	// errSubjectInState: a subject's files or binary overlap the run record,
	// the receipts or the holdout; a subject that froze the challenge set
	// would carry the answer key into its own sandbox.
	errSubjectInState RunRule = "subject names the state root's record, receipts or holdout"
	// errBinaryRequired: a candidate without a frozen executable, or a
	// binary_path without a binary_digest.
	errBinaryRequired RunRule = "frozen binary required"
	// errBinaryDigest: the executable's bytes are not the frozen ones.
	errBinaryDigest RunRule = "binary bytes do not match binary_digest"
	// errCommand: the command would execute something the run did not freeze.
	errCommand RunRule = "command executes something not frozen"
	// errNoCandidate: REVEALED or COMPLETE with no frozen candidate.
	errNoCandidate RunRule = "no frozen candidate"
	// errBlindPackage: the package has a walk problem or leak, or is not the
	// bytes the run pinned.
	errBlindPackage RunRule = "blind package problem"

	// errReceiptMissing: no receipt witnesses the record's status.
	errReceiptMissing RunRule = "no receipt witnesses the status"
	// errReceiptBytes: a receipt the chain needs fails the strict reader.
	errReceiptBytes RunRule = "receipt refused at the byte boundary"
	// errReceiptForm: a receipt's bytes are not the reference's rendering
	// of its body (JSON.stringify(body, null, 1) + "\n", §5.5 member
	// order). A receipt is written once, in that form: other bytes with the
	// same reading (re-indented, members reordered) were written by
	// something else, and a receipt's sha256 (shown in reports, signed by
	// its detached signature) must name one byte string per body.
	errReceiptForm RunRule = "receipt is not in the reference byte form"
	// errChain: the receipt chain is broken (wrong names, illegal step,
	// cycle, no PINNED within 64 steps, subjects changed, release moved).
	errChain RunRule = "receipt chain broken"
	// errReceiptExists: the receipt a transition would write already exists
	// with other bytes; receipts are never rewritten.
	errReceiptExists RunRule = "receipt exists with different bytes (dirty state root)"
	// errSignature: a detached receipt signature does not verify.
	errSignature RunRule = "receipt signature does not verify"

	// errResultMissing: a COMPLETE run without its RESULT.
	errResultMissing RunRule = "RESULT missing"
	// errResult: the RESULT does not match the record, its archive or the
	// replayed measurement.
	errResult RunRule = "RESULT does not verify"
	// errMeasuredRun: the measurement a completion would record was taken
	// under another record than the one it would complete.
	errMeasuredRun RunRule = "measurement was taken of another run"
	// errResultNotReplayed: the RESULT's totals could not be re-derived
	// (the committed challenge set is absent, or the frozen scorer could
	// not load or run); a terminal claim that cannot be re-derived is not
	// verified.
	errResultNotReplayed RunRule = "RESULT not replayed"

	// ErrRunFinished: the run is COMPLETE or ABORTED; nothing is measured
	// or moved after a terminal state (a new run is pinned instead).
	ErrRunFinished RunRule = "the run is finished"
	// ErrMeasurementEvidence: an archived measurement (an observation
	// document or its scored results, linked from the measurements log)
	// is missing, does not re-digest to the sha256 the log records, or does
	// not name the measurement that links it — the evidence was edited.
	ErrMeasurementEvidence RunRule = "archived measurement evidence does not verify"

	// errIllegalTransition: the state machine does not permit the step.
	errIllegalTransition RunRule = "transition not permitted"
	// errRunInProgress: pin while a non-terminal run exists.
	errRunInProgress RunRule = "a non-terminal run exists"
	// errProvenance: the freeze lacks files, binary or environment.
	errProvenance RunRule = "candidate provenance missing"
	// errHoldoutCommitment: the holdout does not match the release's
	// commitment.
	errHoldoutCommitment RunRule = "holdout does not match the release commitment"
	// errRunUnknown: --run names no run whose receipts are in the state
	// root.
	errRunUnknown RunRule = "no such run in the state root"
	// errRunAmbiguous: --run names a state several runs' histories share
	// (identical content is one identity, TRVM-FORMATS §5.2).
	errRunAmbiguous RunRule = "run_id names a state several runs share"
	// errRunNotArchived: the run's receipts exist but its record was never
	// archived beside them, so it cannot be verified as a whole.
	errRunNotArchived RunRule = "run record not archived"
	// errLocked: another operator holds the state root's lock.
	errLocked RunRule = "state root locked by another process"
)

// RunProblem is one broken rule, with the world-relative file it concerns.
type RunProblem struct {
	Rule   RunRule
	File   string // world-relative path of the file concerned, "" if none
	Path   string // the member path the problem names (e.g. an absent file), "" if none
	Detail string
	Err    error // underlying cause, e.g. an *evidence.Error
}

func (p *RunProblem) Error() string { return problemText(p.File, "", string(p.Rule), p.Detail, p.Err) }

// problemText is the one spelling of a broken rule, for run and release
// problems alike: "file: " and the quoted JSON Pointer ("\"/x\": ") when
// they are known, the rule, then ": detail" and ": cause" when present.
func problemText(file, pointer, rule, detail string, err error) string {
	var b strings.Builder
	if file != "" {
		b.WriteString(file)
		b.WriteString(": ")
	}
	if pointer != "" {
		fmt.Fprintf(&b, "%q: ", pointer)
	}
	b.WriteString(rule)
	if detail != "" {
		b.WriteString(": ")
		b.WriteString(detail)
	}
	if err != nil {
		b.WriteString(": ")
		// The file is named once: a path error about it says only what
		// went wrong, not the (absolute) path again.
		if pe, ok := err.(*fs.PathError); ok && file != "" {
			err = pe.Err
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// Unwrap exposes the rule and the cause to errors.Is / errors.As.
func (p *RunProblem) Unwrap() []error {
	if p.Err != nil {
		return []error{p.Rule, p.Err}
	}
	return []error{p.Rule}
}

func problem(rule RunRule, file, format string, args ...any) *RunProblem {
	return &RunProblem{Rule: rule, File: file, Detail: fmt.Sprintf(format, args...)}
}

// runProblems returns the problems err carries (a *VerifyError's, or one
// *RunProblem), or err as one problem of rule about file.
func runProblems(err error, rule RunRule, file string) []*RunProblem {
	var ve *VerifyError
	if errors.As(err, &ve) {
		return ve.Problems
	}
	var p *RunProblem
	if errors.As(err, &p) {
		return []*RunProblem{p}
	}
	return []*RunProblem{{Rule: rule, File: file, Err: err}}
}

// VerifyError is a refusal because a run does not verify: every problem
// found, in check order. errors.Is matches any of the problems' rules.
type VerifyError struct {
	What     string // what was being done ("reveal", "verify")
	Problems []*RunProblem
}

func (e *VerifyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s refused: %d problem(s)", e.What, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap exposes every problem.
func (e *VerifyError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// TransitionError is a step the state machine refuses: From is the record's
// status, To the requested one.
type TransitionError struct {
	From, To Status
	Detail   string
}

func (e *TransitionError) Error() string {
	s := fmt.Sprintf("%s: %s → %s", errIllegalTransition, e.From, e.To)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap lets errors.Is(err, errIllegalTransition) match.
func (e *TransitionError) Unwrap() error { return errIllegalTransition }

// hasRule reports whether any problem broke rule.
func hasRule(ps []*RunProblem, rule RunRule) bool {
	for _, p := range ps {
		if errors.Is(p, rule) {
			return true
		}
	}
	return false
}

// FaultClass is Refused (internal/fault): a run broke a rule; Unusable when its cause
// is an input that could not be read at all, or when it names no run (or
// several): a --run that selects nothing is an argument that cannot be used.
func (e *RunProblem) FaultClass() fault.Class {
	if e.Rule == errRunUnknown || e.Rule == errRunAmbiguous {
		return fault.Unusable
	}
	return fault.RuleClass(e.Err)
}

// FaultClass is Refused (internal/fault): a record does not verify.
func (*VerifyError) FaultClass() fault.Class { return fault.Refused }

// FaultClass is Refused (internal/fault): a transition is not allowed.
func (*TransitionError) FaultClass() fault.Class { return fault.Refused }
