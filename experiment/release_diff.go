package experiment

import (
	"fmt"
	"strconv"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// Change is one difference between two releases: the field (a JSON Pointer,
// or a file-list pointer with the path), its plane, whether it is inside
// release_core (a core change moves srel: it is substantive for a pinned
// run), and the old and new values ("" for a file added or removed).
type Change struct {
	Field string `json:"field"`
	Plane Plane  `json:"plane"`
	Core  bool   `json:"core"`
	Old   string `json:"old"`
	New   string `json:"new"`
}

// DiffReleases lists every difference between a and b, in the member order
// of §3.6; file lists are compared by path. Whether a change is substantive
// for a run in progress is the operator's call: the diff only shows which
// identities moved and why.
func DiffReleases(a, b *Release) []Change {
	var out []Change
	str := func(field string, plane Plane, core bool, x, y string) {
		if x != y {
			out = append(out, Change{Field: field, Plane: plane, Core: core, Old: x, New: y})
		}
	}
	num := func(field string, plane Plane, core bool, x, y int) {
		str(field, plane, core, strconv.Itoa(x), strconv.Itoa(y))
	}
	str("/release_type", PlaneChecked, true, a.ReleaseType, b.ReleaseType)
	str("/protocols/wire", PlaneChecked, true, a.Protocols.Wire, b.Protocols.Wire)
	str("/protocols/verified_claim", PlaneChecked, true, a.Protocols.VerifiedClaim, b.Protocols.VerifiedClaim)
	str("/protocols/nested_composition", PlaneChecked, true, a.Protocols.NestedComposition, b.Protocols.NestedComposition)
	str("/note", PlaneNonAuthoritative, false, a.Note, b.Note)
	num("/spec_revision", PlaneDeclared, true, a.SpecRevision, b.SpecRevision)
	str("/spec_digest", PlaneDerived, true, a.SpecDigest, b.SpecDigest)
	out = append(out, diffFiles("/spec_files", a.SpecFiles, b.SpecFiles)...)
	num("/experiment_revision", PlaneDeclared, true, a.ExperimentRevision, b.ExperimentRevision)
	str("/experiment_digest", PlaneDerived, true, a.ExperimentDigest, b.ExperimentDigest)
	out = append(out, diffFiles("/experiment_files", a.ExperimentFiles, b.ExperimentFiles)...)
	num("/public_corpus_revision", PlaneDeclared, true, a.PublicCorpusRevision, b.PublicCorpusRevision)
	str("/public_corpus_digest", PlaneDerived, true, a.PublicCorpusDigest, b.PublicCorpusDigest)
	str("/jcs_upstream/repository", PlaneDerived, true, a.JCSUpstream.Repository, b.JCSUpstream.Repository)
	str("/jcs_upstream/path", PlaneDerived, false, a.JCSUpstream.Path, b.JCSUpstream.Path)
	str("/jcs_upstream/commit", PlaneDerived, true, a.JCSUpstream.Commit, b.JCSUpstream.Commit)
	str("/jcs_upstream/digest", PlaneDerived, true, a.JCSUpstream.Digest, b.JCSUpstream.Digest)
	num("/jcs_upstream/vectors", PlaneDerived, true, a.JCSUpstream.Vectors, b.JCSUpstream.Vectors)
	str("/holdout_commitment", PlaneDerived, true, a.HoldoutCommitment, b.HoldoutCommitment)
	num("/holdout_entries", PlaneDerived, true, a.HoldoutEntries, b.HoldoutEntries)
	str("/spec_release_id", PlaneDerived, false, a.SpecReleaseID, b.SpecReleaseID)
	return out
}

// diffFiles compares two file lists by path: changed, removed (New ""),
// added (Old "").
func diffFiles(field string, a, b []pkgwalk.FileDigest) []Change {
	var out []Change
	for _, d := range fileDeltas(a, b) {
		out = append(out, Change{Field: fmt.Sprintf("%s[%s]", field, d.Path), Plane: PlaneDerived, Old: d.Old, New: d.New})
	}
	return out
}

// fileDelta is one path whose digest differs between two file lists: Old
// is "" when only the second list has it, New "" when only the first does.
type fileDelta struct{ Path, Old, New string }

// fileDeltas lists, by path, what differs between a and b: a's changed and
// removed paths in a's order, then b's added paths in b's order.
func fileDeltas(a, b []pkgwalk.FileDigest) []fileDelta {
	am, bm := map[string]string{}, map[string]string{}
	for _, f := range a {
		am[f.Path] = f.SHA256
	}
	for _, f := range b {
		bm[f.Path] = f.SHA256
	}
	var out []fileDelta
	for _, f := range a {
		if s, ok := bm[f.Path]; !ok || s != f.SHA256 {
			out = append(out, fileDelta{Path: f.Path, Old: f.SHA256, New: s})
		}
	}
	for _, f := range b {
		if _, ok := am[f.Path]; !ok {
			out = append(out, fileDelta{Path: f.Path, New: f.SHA256})
		}
	}
	return out
}
