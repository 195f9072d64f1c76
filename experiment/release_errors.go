package experiment

import "github.com/cleanroom-dev/cleanroom/internal/fault"

// ReleaseRule names one rule a release record, a release package or an
// issue request can break. errors.Is(err, errUnknownMember) reports whether
// err (a *ReleaseError or anything wrapping one) broke it; no caller outside
// experiment branches on one, and the rule's text is in the error.
type ReleaseRule string

// Error makes a ReleaseRule usable as an errors.Is target.
func (r ReleaseRule) Error() string { return string(r) }

// The release rules. Their string values are stable: they appear in command
// output and tests.
const (
	// Shape of SPEC-RELEASE.json (TRVM-FORMATS §3.6): a closed shape, so a
	// member no reader checks cannot ride along inside an identity's record.
	errUnknownMember ReleaseRule = "unknown member"
	errMissingMember ReleaseRule = "missing member"
	errFieldType     ReleaseRule = "wrong type"
	// errReleaseType: a record of another type is another format; reading it
	// as this one would give its bytes a meaning nobody signed up for.
	errReleaseType ReleaseRule = "release type is not TRVM-PROOF-WIRE-SPEC-RELEASE-v1"
	// errRevision: revision labels are positive integers (DECLARED_AND_BOUND).
	errRevision ReleaseRule = "revision is not a positive integer"
	// errCount: a count (holdout_entries, jcs_upstream.vectors) is a
	// non-negative integer.
	errCount ReleaseRule = "count is not a non-negative integer"
	// errDigestForm: digests are 64 lowercase hex digits (srel adds "srel-");
	// any other spelling would be a second name for one identity.
	errDigestForm ReleaseRule = "not a lowercase hex SHA-256"
	// errFileList: file lists are sorted by path, paths unique and non-empty.
	errFileList ReleaseRule = "file list not sorted, unique and non-empty-pathed"

	// Package and holdout.
	// errHoldoutCount: the holdout tree must hold exactly INDEX.json entries
	// + 1 files, so a file cannot hide beside the committed challenges.
	errHoldoutCount ReleaseRule = "holdout tree does not hold entries + 1 files"
	// errHoldoutIndex: INDEX.json is missing, unreadable or has no entries array.
	errHoldoutIndex ReleaseRule = "holdout INDEX.json unreadable"
	// errSchemaConstants: the CHECKED plane reads the protocols from
	// schema/nested-composition-v2.json; without it there is nothing to check.
	errSchemaConstants ReleaseRule = "schema constants unreadable"

	// Issue.
	// errArchiveConflict: an archived release is immutable; a different
	// record under the same srel would give one identity two meanings.
	errArchiveConflict ReleaseRule = "archive exists with different bytes"
	// errIncomplete: a release is issued from the bytes on disk only; a file
	// the package names but lacks cannot be measured.
	errIncomplete ReleaseRule = "package is missing files it records"
	// errIssuedNotVerified: the record just written does not verify against
	// the package (it changed while it was being measured).
	errIssuedNotVerified ReleaseRule = "issued release does not verify"
	// errFormulaAudit: the srel formula failed its own audit (a core leaf did
	// not move srel, or a non-core one did).
	errFormulaAudit ReleaseRule = "srel formula audit failed"
	// errPackageLeak: issuing with a holdout, the package breaks a leak
	// rule against it (pkgwalk.LeakRules: a copy of a holdout file, a
	// committed challenge, a challenge-shaped JSON, a leaking path). Such a
	// release would be archived and then refused at every pin.
	errPackageLeak ReleaseRule = "package leaks the holdout"
	// errHoldoutNotCommitted: release issue without --holdout in a world
	// whose governance/holdout exists would silently commit "absent", and
	// reveal could then open no challenge set. --no-holdout says it is
	// meant.
	errHoldoutNotCommitted ReleaseRule = "the world's holdout exists and is not committed"
)

// ReleaseError is one refusal: the file, the JSON Pointer inside it (or a
// path inside the package), the rule, a detail and the cause, if any (an
// evidence refusal, an I/O error), kept for errors.Is / errors.As.
type ReleaseError struct {
	File    string
	Pointer string
	Rule    ReleaseRule
	Detail  string
	Err     error
}

func (e *ReleaseError) Error() string {
	return problemText(e.File, e.Pointer, string(e.Rule), e.Detail, e.Err)
}

// Unwrap exposes the cause (errors.Is(err, evidence.ClassDuplicateName)).
func (e *ReleaseError) Unwrap() error { return e.Err }

// Is lets errors.Is match a *ReleaseError against its rule.
func (e *ReleaseError) Is(target error) bool {
	r, ok := target.(ReleaseRule)
	return ok && r == e.Rule
}

// FaultClass is Refused (internal/fault): a release broke a rule; Unusable when its cause
// is an input that could not be read at all.
func (e *ReleaseError) FaultClass() fault.Class { return fault.RuleClass(e.Err) }
