package experiment

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// DefaultNote is the note an issued release carries when none is given.
// It is NON_AUTHORITATIVE: outside srel, free to say anything.
const DefaultNote = "Revision numbers are labels; the digests are the identity. This record is outside its own preimage: spec_release_id is computed from the release_core projection, which leaves out this note and the file lists."

// IssueOptions are the operator's inputs to a release: the three
// DECLARED_AND_BOUND revision labels, the holdout directory to commit to
// ("" or an absent directory commits "absent"), and the note.
type IssueOptions struct {
	SpecRevision         int
	ExperimentRevision   int
	PublicCorpusRevision int
	HoldoutDir           string
	// NoHoldout commits "absent" on purpose although the world pkgDir
	// belongs to has a holdout (HoldoutBeside); without it IssueRelease
	// refuses that (errHoldoutNotCommitted). It contradicts HoldoutDir.
	NoHoldout bool
	Note      string // DefaultNote when empty
}

// Issued is the result of IssueRelease.
type Issued struct {
	Release     *Release `json:"-"`
	ID          string   `json:"spec_release_id"`
	RecordPath  string   `json:"record"`
	ArchivePath string   `json:"archive"`
	// ArchiveExisted: the archive was already there with identical bytes
	// (re-issuing an unchanged release is not an error).
	ArchiveExisted bool     `json:"archive_existed"`
	Audit          []string `json:"audit"`
	// Verified is the verification of what was written (VerifyRelease);
	// every check passed, or IssueRelease refused with errIssuedNotVerified.
	Verified *ReleaseReport `json:"-"`
}

// BuildRelease computes a release from the package on disk without writing
// anything: protocols from the schema, every digest and list, the holdout
// commitment, and srel. A package that lacks a file its public manifest
// records is refused (errIncomplete): an issuer measures bytes, it does not
// copy recorded digests forward.
func BuildRelease(pkgDir string, opts IssueOptions) (*Release, error) {
	for _, r := range []struct {
		name string
		v    int
	}{{"spec revision", opts.SpecRevision}, {"experiment revision", opts.ExperimentRevision}, {"corpus revision", opts.PublicCorpusRevision}} {
		if r.v < 1 || r.v > maxSafeInteger {
			return nil, &ReleaseError{Pointer: r.name, Rule: errRevision, Detail: fmt.Sprint(r.v)}
		}
	}
	c, err := RecomputeRelease(pkgDir, opts.HoldoutDir)
	if err != nil {
		return nil, err
	}
	if c.ProtocolsError != "" {
		return nil, &ReleaseError{File: SchemaFile, Rule: errSchemaConstants, Detail: c.ProtocolsError}
	}
	if m := c.Missing(); len(m) > 0 {
		return nil, &ReleaseError{File: pkgDir, Rule: errIncomplete, Detail: strings.Join(m, ", ")}
	}
	if c.HoldoutError != "" {
		return nil, fmt.Errorf("holdout %s: %s", opts.HoldoutDir, c.HoldoutError)
	}
	commitment, entries := HoldoutAbsent, 0
	if c.HoldoutChecked {
		commitment, entries = c.HoldoutCommitment, c.HoldoutEntries
	}
	note := opts.Note
	if note == "" {
		note = DefaultNote
	}
	r := &Release{
		ReleaseType:          ReleaseType,
		Protocols:            c.Protocols,
		Note:                 note,
		SpecRevision:         opts.SpecRevision,
		SpecDigest:           c.Spec.Digest,
		SpecFiles:            c.Spec.Files,
		ExperimentRevision:   opts.ExperimentRevision,
		ExperimentDigest:     c.Experiment.Digest,
		ExperimentFiles:      c.Experiment.Files,
		PublicCorpusRevision: opts.PublicCorpusRevision,
		PublicCorpusDigest:   c.PublicCorpus.Digest,
		JCSUpstream: JCSUpstream{
			Repository: JCSRepository, Path: JCSPath, Commit: JCSCommit,
			Digest: c.JCS.Digest, Vectors: c.JCSVectors,
		},
		HoldoutCommitment: commitment,
		HoldoutEntries:    entries,
	}
	if r.SpecReleaseID, err = r.ID(); err != nil {
		return nil, err
	}
	return r, nil
}

// IssueRelease builds the release (BuildRelease), audits the srel formula
// on it (AuditFormula), writes the archive releases/<srel>.json and
// then SPEC-RELEASE.json, both in the reference byte form. The archive is
// created exclusively: an existing archive with identical bytes is
// accepted, one with different bytes is refused (errArchiveConflict) before
// anything is written. Each file is written to a temporary name, fsynced,
// and moved into place, so a reader sees the old bytes or the new, never a
// part; the archive is written first so SPEC-RELEASE.json never names a
// release that has no archive. Finally it verifies what it wrote
// (VerifyRelease): a package that changed while it was measured is
// reported (errIssuedNotVerified) rather than left for the pin to find.
// In a world whose holdout exists, it must be committed (opts.HoldoutDir)
// or declined on purpose (opts.NoHoldout): errHoldoutNotCommitted.
func IssueRelease(pkgDir string, opts IssueOptions) (*Issued, error) {
	if opts.NoHoldout && opts.HoldoutDir != "" {
		return nil, fmt.Errorf("issue options: a holdout directory (%s) and NoHoldout contradict each other", opts.HoldoutDir)
	}
	// A release that silently commits "absent" in a world with a holdout
	// would open no challenge set at reveal: nothing could be measured.
	if h := HoldoutBeside(pkgDir); h != "" && opts.HoldoutDir == "" && !opts.NoHoldout {
		return nil, &ReleaseError{File: h, Rule: errHoldoutNotCommitted,
			Detail: "pass --holdout " + h + " to commit it, or --no-holdout to commit \"absent\" on purpose"}
	}
	r, err := BuildRelease(pkgDir, opts)
	if err != nil {
		return nil, err
	}
	// The leak rules against the holdout being committed run now, before
	// anything is archived: a release whose package carries the answer key
	// would otherwise be archived and then refused at every pin.
	if opts.HoldoutDir != "" {
		if err := leakCheck(pkgDir, opts.HoldoutDir); err != nil {
			return nil, err
		}
	}
	audit, err := AuditFormula(r)
	if err != nil {
		return nil, err
	}
	b, err := r.Bytes()
	if err != nil {
		return nil, err
	}
	// Round trip: the bytes written must read back to the same record
	// through the strict reader, or the record would say something other
	// than what was computed.
	back, err := ParseRelease(b)
	if err != nil {
		return nil, fmt.Errorf("issued record does not read back: %w", err)
	}
	if id, _ := back.ID(); id != r.SpecReleaseID {
		return nil, fmt.Errorf("issued record reads back as %s, not %s", id, r.SpecReleaseID)
	}
	r.Raw = b
	out := &Issued{Release: r, ID: r.SpecReleaseID, RecordPath: filepath.Join(pkgDir, ReleaseFile),
		ArchivePath: ArchivePath(pkgDir, r.SpecReleaseID), Audit: audit}

	// Refuse a conflicting archive before writing anything.
	existing, err := readRegular(out.ArchivePath)
	switch {
	case err == nil && !bytes.Equal(existing, b):
		return nil, &ReleaseError{File: out.ArchivePath, Rule: errArchiveConflict,
			Detail: fmt.Sprintf("first difference at byte %d; an archived release is never overwritten", firstDiff(existing, b))}
	case err == nil:
		out.ArchiveExisted = true
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("reading archive: %w", err)
	}
	if !out.ArchiveExisted {
		if err := mkdirDurable(filepath.Join(pkgDir, ReleasesDir)); err != nil {
			return nil, fmt.Errorf("creating releases/: %w", err)
		}
		same, err := publishArchive(out.ArchivePath, b)
		if err != nil {
			return nil, err
		}
		out.ArchiveExisted = same
	}
	if err := replaceAtomic(pkgDir, ReleaseFile, b); err != nil {
		return nil, err
	}
	// Verify what was written, as any later reader will: a package that
	// changed while it was being measured fails here, not at pin time.
	rep, err := VerifyRelease(pkgDir, opts.HoldoutDir)
	if err != nil {
		return nil, fmt.Errorf("verifying the issued release: %w", err)
	}
	if !rep.OK {
		return nil, &ReleaseError{File: out.RecordPath, Rule: errIssuedNotVerified, Detail: strings.Join(rep.Failed(), ", ")}
	}
	out.Verified = rep
	return out, nil
}

// publishArchive creates pkgDir/releases/<srel>.json exclusively with the
// package's one durable writer (createExclusive: temporary file, fsync,
// RENAME_NOREPLACE, fsync of the directory). An archive that appeared
// meanwhile with identical bytes reports same=true; with different bytes,
// errArchiveConflict.
func publishArchive(path string, b []byte) (same bool, err error) {
	same, err = createExclusive(filepath.Dir(path), filepath.Base(path), b, path)
	if errors.Is(err, errReceiptExists) {
		return false, &ReleaseError{File: path, Rule: errArchiveConflict, Detail: "written concurrently with different bytes"}
	}
	return same, err
}

// CoreLeaves lists the JSON Pointers of the release_core leaves (§3.7): a
// change to any of them must move srel, a change anywhere else must not.
// It is the audit's statement of the formula, written independently of the
// projection code it audits.
var CoreLeaves = []string{
	"/release_type", "/protocols/wire", "/protocols/verified_claim", "/protocols/nested_composition",
	"/spec_revision", "/spec_digest", "/experiment_revision", "/experiment_digest",
	"/public_corpus_revision", "/public_corpus_digest",
	"/jcs_upstream/repository", "/jcs_upstream/commit", "/jcs_upstream/digest", "/jcs_upstream/vectors",
	"/holdout_commitment", "/holdout_entries",
}

// AuditFormula audits srel both ways on r (§3.7): it perturbs every leaf of
// the record — each core leaf, the note, every path and digest in the file
// lists, jcs_upstream.path and spec_release_id — recomputes srel from the
// perturbed record, and checks that srel moved exactly for the core leaves.
// It returns one line per leaf.
func AuditFormula(r *Release) ([]string, error) {
	base, err := srelOf(coreOf(r.Object()))
	if err != nil {
		return nil, err
	}
	core := map[string]bool{}
	for _, p := range CoreLeaves {
		core[p] = true
	}
	root := r.Object()
	var lines []string
	var bad []string
	seen := map[string]bool{}
	var walk func(v any, ptr string, set func(any)) error
	walk = func(v any, ptr string, set func(any)) error {
		switch x := v.(type) {
		case *evidence.Object:
			for i := range x.Members {
				m := &x.Members[i]
				if err := walk(m.Value, ptr+"/"+escapePointer(m.Name), func(nv any) { m.Value = nv }); err != nil {
					return err
				}
			}
			return nil
		case []any:
			for i := range x {
				if err := walk(x[i], fmt.Sprintf("%s/%d", ptr, i), func(nv any) { x[i] = nv }); err != nil {
					return err
				}
			}
			return nil
		}
		set(perturb(v))
		moved, err := srelOf(coreOf(root))
		set(v)
		if err != nil {
			return err
		}
		seen[ptr] = true
		did := moved != base
		switch {
		case core[ptr] && !did:
			bad = append(bad, ptr+": core leaf did not move srel")
		case !core[ptr] && did:
			bad = append(bad, ptr+": non-core leaf moved srel")
		}
		verb := "does not move srel"
		if did {
			verb = "moves srel"
		}
		lines = append(lines, ptr+" "+verb)
		return nil
	}
	if err := walk(root, "", nil); err != nil {
		return nil, err
	}
	for _, p := range CoreLeaves {
		if !seen[p] {
			bad = append(bad, p+": core leaf not in the record")
		}
	}
	if len(bad) > 0 {
		return lines, &ReleaseError{Rule: errFormulaAudit, Detail: strings.Join(bad, "; ")}
	}
	return lines, nil
}

// perturb returns a different value of the same type.
func perturb(v any) any {
	switch x := v.(type) {
	case string:
		return x + "~"
	case int:
		return x + 1
	case float64:
		return x + 1
	case bool:
		return !x
	}
	return "perturbed"
}

// leakCheck walks the package with the holdout's leak rules
// (pkgwalk.LeakRules) and refuses every leak, each naming its file and
// (for a committed challenge) the challenge, as errPackageLeak.
func leakCheck(pkgDir, holdoutDir string) error {
	tree, err := pkgwalk.Walk(pkgDir, pkgwalk.WalkOptions{HoldoutDir: holdoutDir})
	if err != nil {
		return fmt.Errorf("walking the package for leaks: %w", err)
	}
	var leaks pkgwalk.Problems
	for _, p := range tree.Problems {
		if slices.Contains(pkgwalk.LeakRules, p.Rule) {
			leaks = append(leaks, p)
		}
	}
	if len(leaks) == 0 {
		return nil
	}
	paths := make([]string, len(leaks))
	for i, p := range leaks {
		paths[i] = p.Path
	}
	return &ReleaseError{File: pkgDir, Rule: errPackageLeak, Detail: strings.Join(paths, ", "), Err: leaks}
}

// HoldoutBeside returns the governance/holdout directory of the world
// whose package pkgDir is (the world root above it whose package label,
// PackageDirName or its cleanroom-package, names pkgDir), when it exists
// as a directory, else "".
func HoldoutBeside(pkgDir string) string {
	abs, err := filepath.Abs(pkgDir)
	if err != nil {
		return ""
	}
	for root := filepath.Dir(abs); ; root = filepath.Dir(root) {
		if w, err := OpenWorld(root); err == nil && filepath.Join(root, filepath.FromSlash(w.PackageLabel())) == abs {
			if fi, err := os.Stat(w.HoldoutDir()); err == nil && fi.IsDir() {
				return filepath.Join(root, StateDirName, HoldoutDirName)
			}
			return ""
		}
		if filepath.Dir(root) == root {
			return ""
		}
	}
}
