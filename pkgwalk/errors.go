package pkgwalk

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// Rule names one rule a package, a view or a manifest can break. Each rule
// is an exported sentinel: errors.Is(err, pkgwalk.ErrSymlink) reports whether
// err (a *RefusalError, a Problems list or anything wrapping them) broke it.
// The string values are stable short phrases; they appear in command output.
type Rule string

// Error makes a Rule usable as an errors.Is target.
func (r Rule) Error() string { return string(r) }

// The rules of the package walk (TRVM-FORMATS §4.1), of a view and of a
// manifest. Each one closes a way to deliver bytes the digest does not see.
const (
	// Entry types: only regular files and directories carry bytes a digest
	// measures; everything else is a name that can deliver other bytes later.
	ErrSymlink Rule = "symbolic link" // even one pointing inside the package: a special case is a place to hide
	errFIFO    Rule = "FIFO (not a regular file)"
	errSocket  Rule = "socket (not a regular file)"
	errDevice  Rule = "device (not a regular file)"
	errOther   Rule = "not a regular file or directory"

	// errHardLink: a file with a second name outside the package changes
	// when that name is written, after every digest was right.
	errHardLink Rule = "filesystem links (nlink != 1)"
	// errMountPoint: another filesystem mounted inside the package is not
	// the object that was measured, and RESOLVE_NO_XDEV will not enter it.
	errMountPoint Rule = "mount point inside the package (different filesystem)"
	// errBadSegment: a segment outside [A-Za-z0-9._+-], ".", ".." or empty
	// means different things on different systems and tools.
	errBadSegment Rule = "path segment outside [A-Za-z0-9._+-] (or . / .. / empty)"
	// errNotNFC: two byte sequences for one visible name.
	errNotNFC Rule = "path segment not NFC"
	// errCaseCollision: two names differing only by ASCII case are one object
	// on a case-insensitive filesystem.
	errCaseCollision Rule = "two paths equal after ASCII case-folding"
	// ErrEmptyDir: an empty directory carries no bytes for the digest to
	// notice, yet its name is something the implementer reads.
	ErrEmptyDir Rule = "directory that no manifested file lives in"
	// errRootSymlink: a symlink standing in for the root can be re-pointed
	// after it was checked.
	errRootSymlink Rule = "root is itself a symbolic link"
	errRootNotDir  Rule = "root is not a directory"
	// errUnreadable: an entry the walk could not open or read cannot be
	// measured, so it cannot be delivered.
	errUnreadable Rule = "unreadable entry"
	// errChanged: the entry changed while it was being measured (it vanished,
	// was swapped, grew or shrank); a digest of it would describe no instant.
	errChanged Rule = "changed while being read"
	// errTooLarge: a file too large to hold in memory (MaxKeptFile) cannot
	// be served from a verified copy or checked against the holdout.
	errTooLarge Rule = "file too large to hold in memory"

	// Leaks (TRVM-FORMATS §4.1): material that must never reach the
	// implementer, whatever the bpkg says.
	errLeakPath           Rule = "leak: path names governance/, ledger, brief, review, node_modules or .."
	errLeakHoldoutCopy    Rule = "leak: byte-identical to a holdout file"
	errLeakChallengeShape Rule = "leak: JSON that looks like a holdout challenge"
	// errLeakCommittedChallenge: the file carries a challenge of the
	// holdout being committed — whole, or its id with its predicates or
	// its recipe, reformatted or not (committed.go) — whatever its id
	// looks like. The blind package would carry the answer key.
	errLeakCommittedChallenge Rule = "leak: carries a committed holdout challenge"

	// View and emission rules: the tree is exactly the manifest.
	errNotInManifest  Rule = "file not in the manifest"
	errMissingFile    Rule = "manifested file missing"
	errDigestMismatch Rule = "sha256 differs from the manifest"
	ErrNotPinned      Rule = "package is not the pinned bpkg"
	errDestNotEmpty   Rule = "destination is not an empty directory"
	ErrOutputInside   Rule = "output path inside the package"

	// Manifest document rules.
	errBadManifest Rule = "malformed manifest"
	errManifestID  Rule = "recorded blind_package_id does not match the manifest"
	errBadID       Rule = "not a blind_package_id (bpkg- and 64 lowercase hex digits)"
)

// RefusalError is one problem: the path (relative to the walked root, "/"
// separated, "." for the root itself), the rule it breaks and an optional
// detail (a symlink's target, the colliding path, …).
type RefusalError struct {
	Path   string
	Rule   Rule
	Detail string
}

func (e *RefusalError) Error() string {
	// %q: a hostile name must not write control characters to a terminal.
	if e.Detail == "" {
		return fmt.Sprintf("%q: %s", e.Path, e.Rule)
	}
	return fmt.Sprintf("%q: %s (%s)", e.Path, e.Rule, e.Detail)
}

// Unwrap lets errors.Is match the Rule.
func (e *RefusalError) Unwrap() error { return e.Rule }

// LeakRules are the rules that keep the holdout and the harness's own
// material out of a package (TRVM-FORMATS §4.1, and the committed-challenge
// rule); release issue --holdout refuses a package breaking any of them.
var LeakRules = []Rule{errLeakPath, errLeakHoldoutCopy, errLeakChallengeShape, errLeakCommittedChallenge}

// Problems is every problem of one tree, sorted by path then rule. As an
// error it lists them all; errors.Is matches any one's Rule.
type Problems []*RefusalError

func (p Problems) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d problem(s):", len(p))
	for _, e := range p {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap returns every problem, so errors.Is and errors.As see each one.
func (p Problems) Unwrap() []error {
	out := make([]error, len(p))
	for i, e := range p {
		out[i] = e
	}
	return out
}

// Has reports whether any problem breaks rule r.
func (p Problems) Has(r Rule) bool {
	return slices.ContainsFunc(p, func(e *RefusalError) bool { return e.Rule == r })
}

func sortProblems(p Problems) Problems {
	slices.SortFunc(p, func(a, b *RefusalError) int {
		if c := evidence.CompareUTF16(a.Path, b.Path); c != 0 {
			return c
		}
		if c := strings.Compare(string(a.Rule), string(b.Rule)); c != 0 {
			return c
		}
		return strings.Compare(a.Detail, b.Detail)
	})
	// The same problem found twice (e.g. a FIFO seen by type and again by
	// a failed open) is listed once.
	return slices.CompactFunc(p, func(a, b *RefusalError) bool { return *a == *b })
}

// FaultClass is Refused (internal/fault): a package rule — except the two
// about the root itself: a root (or an emit destination) that is not a
// directory, a dangling or any other symbolic link included, is an argument
// that cannot be used as one (Unusable, exit 2), as ENOTDIR is everywhere.
func (r Rule) FaultClass() fault.Class {
	if r == errRootSymlink || r == errRootNotDir {
		return fault.Unusable
	}
	return fault.Refused
}

// FaultClass is Refused (internal/fault): a package broke a rule.
func (e *RefusalError) FaultClass() fault.Class { return e.Rule.FaultClass() }

// FaultClass is Refused (internal/fault): a package broke rules.
// Unusable when every problem is (the root alone).
func (p Problems) FaultClass() fault.Class {
	for _, e := range p {
		if e.FaultClass() != fault.Unusable {
			return fault.Refused
		}
	}
	if len(p) == 0 {
		return fault.Refused
	}
	return fault.Unusable
}
