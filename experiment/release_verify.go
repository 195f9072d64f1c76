package experiment

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// Check statuses.
const (
	StatusOK         = "ok"
	StatusMismatch   = "mismatch"
	StatusNotPresent = "not-present" // holdout not given or absent: reported, not a failure (§3.5)
)

// Check is one verification: the recorded value, the recomputed one, and
// the files the record lists but the disk lacks (their recorded digests
// stood in for them).
type Check struct {
	Name       string   `json:"name"`
	Plane      Plane    `json:"plane"`
	Status     string   `json:"status"`
	OK         bool     `json:"ok"`
	Recorded   string   `json:"recorded,omitempty"`
	Recomputed string   `json:"recomputed,omitempty"`
	Missing    []string `json:"missing,omitempty"`
	Detail     string   `json:"detail,omitempty"`
}

// ReleaseReport is the result of VerifyRelease. OK is true only when every
// check passed and no recorded file is missing on disk.
type ReleaseReport struct {
	Package    string      `json:"package"`
	Record     string      `json:"record"`
	SpecRelID  string      `json:"spec_release_id"` // srel computed from the record
	OK         bool        `json:"ok"`
	Checks     []Check     `json:"checks"`
	Missing    []string    `json:"missing"`
	Recomputed *Recomputed `json:"-"`
	Release    *Release    `json:"-"`
}

// Failed returns the names of the checks that failed.
func (r *ReleaseReport) Failed() []string {
	var out []string
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

// OnlyMissingFiles reports whether every check passed except files_present:
// every digest recomputed to its recorded value, some of it from recorded
// digests of files the disk lacks (as with the .mjs files left out of the
// shared TRVM worlds).
func (r *ReleaseReport) OnlyMissingFiles() bool {
	f := r.Failed()
	return len(f) == 1 && f[0] == "files_present"
}

// VerifyRelease reads pkgDir/SPEC-RELEASE.json and checks it against the
// package: the byte form, the CHECKED protocols, every DERIVED digest and
// file list recomputed from disk, the jcs_upstream constants and counts,
// the holdout commitment (when holdoutDir is given), srel recomputed from
// the record, the archive releases/<srel>.json byte-identical to the
// record, and that every listed file is present. The error is non-nil only
// when the check could not be carried out (an unreadable or malformed
// record, a package with a symlink or special file); a mismatch is a
// failed Check, not an error.
func VerifyRelease(pkgDir, holdoutDir string) (*ReleaseReport, error) {
	recPath := filepath.Join(pkgDir, ReleaseFile)
	b, err := readRegular(recPath)
	if err != nil {
		return nil, fmt.Errorf("reading release record: %w", err)
	}
	rel, err := ParseRelease(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", recPath, err)
	}
	c, err := RecomputeAgainst(pkgDir, holdoutDir, rel)
	if err != nil {
		return nil, err
	}
	rep := &ReleaseReport{Package: pkgDir, Record: recPath, Recomputed: c, Release: rel}
	add := func(ch Check) {
		ch.OK = ch.Status == StatusOK || ch.Status == StatusNotPresent
		rep.Checks = append(rep.Checks, ch)
	}
	eq := func(name string, plane Plane, recorded, recomputed string, missing []string, detail string) {
		st := StatusOK
		if recorded != recomputed {
			st = StatusMismatch
		}
		add(Check{Name: name, Plane: plane, Status: st, Recorded: recorded, Recomputed: recomputed, Missing: missing, Detail: detail})
	}

	// Byte form: the record is exactly what Bytes writes, so two tools
	// issuing the same release write the same bytes (and the archive
	// comparison below compares like with like).
	want, err := rel.Bytes()
	if err != nil {
		return nil, err
	}
	if bytes.Equal(want, b) {
		add(Check{Name: "byte_form", Plane: PlaneDerived, Status: StatusOK})
	} else {
		add(Check{Name: "byte_form", Plane: PlaneDerived, Status: StatusMismatch,
			Detail: fmt.Sprintf("not JSON.stringify(r, null, 1)+\"\\n\" in §3.6 member order (first difference at byte %d)", firstDiff(want, b))})
	}

	// CHECKED plane.
	eq("protocols.wire", PlaneChecked, rel.Protocols.Wire, WireProtocol, nil, "")
	if c.ProtocolsError != "" {
		for _, n := range []string{"protocols.verified_claim", "protocols.nested_composition"} {
			add(Check{Name: n, Plane: PlaneChecked, Status: StatusMismatch, Detail: c.ProtocolsError})
		}
	} else {
		eq("protocols.verified_claim", PlaneChecked, rel.Protocols.VerifiedClaim, c.Protocols.VerifiedClaim, nil, SchemaFile+" constants.certificate_protocol")
		eq("protocols.nested_composition", PlaneChecked, rel.Protocols.NestedComposition, c.Protocols.NestedComposition, nil, SchemaFile+" constants.protocol")
	}

	// DERIVED plane: digests and the lists they are computed from.
	eq("spec_digest", PlaneDerived, rel.SpecDigest, c.Spec.Digest, c.Spec.Missing, "")
	listCheck(add, "spec_files", rel.SpecFiles, c.Spec)
	eq("experiment_digest", PlaneDerived, rel.ExperimentDigest, c.Experiment.Digest, c.Experiment.Missing, "")
	listCheck(add, "experiment_files", rel.ExperimentFiles, c.Experiment)
	eq("public_corpus_digest", PlaneDerived, rel.PublicCorpusDigest, c.PublicCorpus.Digest, c.PublicCorpus.Missing, "")
	eq("jcs_upstream.digest", PlaneDerived, rel.JCSUpstream.Digest, c.JCS.Digest, c.JCS.Missing, "")
	eq("jcs_upstream.vectors", PlaneDerived, strconv.Itoa(rel.JCSUpstream.Vectors), strconv.Itoa(c.JCSVectors), nil, "*.json files in vectors/jcs-upstream/input/")
	eq("jcs_upstream.repository", PlaneDerived, rel.JCSUpstream.Repository, JCSRepository, nil, "constant")
	eq("jcs_upstream.path", PlaneDerived, rel.JCSUpstream.Path, JCSPath, nil, "constant")
	eq("jcs_upstream.commit", PlaneDerived, rel.JCSUpstream.Commit, JCSCommit, nil, "constant")

	switch {
	case !c.HoldoutChecked:
		add(Check{Name: "holdout", Plane: PlaneDerived, Status: StatusNotPresent, Recorded: rel.HoldoutCommitment,
			Detail: "NOT PRESENT: no holdout directory given; the commitment was not checked"})
	case c.HoldoutError != "":
		add(Check{Name: "holdout_commitment", Plane: PlaneDerived, Status: StatusMismatch, Recorded: rel.HoldoutCommitment, Detail: c.HoldoutError})
	case c.HoldoutCommitment == HoldoutAbsent && rel.HoldoutCommitment != HoldoutAbsent:
		add(Check{Name: "holdout", Plane: PlaneDerived, Status: StatusNotPresent, Recorded: rel.HoldoutCommitment,
			Detail: "NOT PRESENT: the holdout directory does not exist; the commitment was not checked"})
	default:
		eq("holdout_commitment", PlaneDerived, rel.HoldoutCommitment, c.HoldoutCommitment, nil, "")
		eq("holdout_entries", PlaneDerived, strconv.Itoa(rel.HoldoutEntries), strconv.Itoa(c.HoldoutEntries), nil, "")
	}

	// Identity: srel from the record's own core (binds the DECLARED
	// revisions and the CHECKED protocols), and the immutable archive.
	srel, err := rel.ID()
	if err != nil {
		return nil, err
	}
	rep.SpecRelID = srel
	eq("spec_release_id", PlaneDerived, rel.SpecReleaseID, srel, nil, "")
	arch := ArchivePath(pkgDir, srel)
	ab, err := readRegular(arch)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		add(Check{Name: "archive", Plane: PlaneDerived, Status: StatusMismatch, Detail: "releases/" + srel + ".json is absent"})
	case err != nil:
		add(Check{Name: "archive", Plane: PlaneDerived, Status: StatusMismatch, Detail: err.Error()})
	case !bytes.Equal(ab, b):
		add(Check{Name: "archive", Plane: PlaneDerived, Status: StatusMismatch,
			Recorded: pkgwalk.SHA256Hex(b), Recomputed: pkgwalk.SHA256Hex(ab),
			Detail: fmt.Sprintf("releases/%s.json differs from %s (first difference at byte %d)", srel, ReleaseFile, firstDiff(b, ab))})
	default:
		add(Check{Name: "archive", Plane: PlaneDerived, Status: StatusOK, Detail: "releases/" + srel + ".json byte-identical"})
	}

	rep.Missing = c.Missing()
	if rep.Missing == nil {
		rep.Missing = []string{}
	}
	if len(rep.Missing) == 0 {
		add(Check{Name: "files_present", Plane: PlaneDerived, Status: StatusOK})
	} else {
		add(Check{Name: "files_present", Plane: PlaneDerived, Status: StatusMismatch, Missing: rep.Missing,
			Detail: fmt.Sprintf("%d listed file(s) absent on disk; their recorded sha256 stood in for them", len(rep.Missing))})
	}
	rep.OK = len(rep.Failed()) == 0
	return rep, nil
}

// listCheck compares a recorded file list with the recomputed one and
// names the first few paths that differ.
func listCheck(add func(Check), name string, recorded []pkgwalk.FileDigest, s Surface) {
	rd, cd := pkgwalk.PathListDigest(recorded), s.Digest
	ch := Check{Name: name, Plane: PlaneDerived, Status: StatusOK, Recorded: rd, Recomputed: cd}
	if rd != cd || len(recorded) != len(s.Files) {
		ch.Status = StatusMismatch
		ch.Detail = listDifference(recorded, s.Files)
	}
	add(ch)
}

// listDifference names the paths that are only in a, only in b, or differ.
func listDifference(a, b []pkgwalk.FileDigest) string {
	var out []string
	for _, d := range fileDeltas(a, b) {
		switch {
		case d.New == "":
			out = append(out, "only recorded: "+d.Path)
		case d.Old == "":
			out = append(out, "only on disk: "+d.Path)
		default:
			out = append(out, "changed: "+d.Path)
		}
	}
	if len(out) > 8 {
		out = append(out[:8], fmt.Sprintf("… and %d more", len(out)-8))
	}
	s, _ := evidence.CanonicalString(out)
	return s
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
