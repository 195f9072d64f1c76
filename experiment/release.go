package experiment

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/ident"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// Constants of the release record (TRVM-FORMATS §3.4, §3.6).
const (
	ReleaseType    = "TRVM-PROOF-WIRE-SPEC-RELEASE-v1"
	WireProtocol   = "TRVM-PROOF-WIRE-v1"
	ReleaseFile    = "SPEC-RELEASE.json"
	ReleasesDir    = "releases"
	SchemaFile     = "schema/nested-composition-v2.json"
	JCSRepository  = "github.com/cyberphone/json-canonicalization"
	JCSPath        = "testdata/"
	JCSCommit      = "19d51d7fe467d4706a3ff08adf8a748f29fc21e0"
	HoldoutAbsent  = "absent"
	SrelPrefix     = ident.Srel
	maxSafeInteger = 1<<53 - 1
)

// Plane is the field plane of a release member (TRVM-FORMATS §3.6).
type Plane string

// The four planes.
const (
	PlaneChecked          Plane = "CHECKED"            // compared with constants and the package's schema
	PlaneDeclared         Plane = "DECLARED_AND_BOUND" // operator's labels, bound by srel
	PlaneDerived          Plane = "DERIVED"            // recomputed from the package
	PlaneNonAuthoritative Plane = "NON_AUTHORITATIVE"  // free text, in no identity
)

// Protocols is the CHECKED protocols member.
type Protocols struct {
	Wire              string `json:"wire"`
	VerifiedClaim     string `json:"verified_claim"`
	NestedComposition string `json:"nested_composition"`
}

// JCSUpstream is the pinned JCS import: three constants and two derived values.
type JCSUpstream struct {
	Repository string `json:"repository"`
	Path       string `json:"path"`
	Commit     string `json:"commit"`
	Digest     string `json:"digest"`
	Vectors    int    `json:"vectors"`
}

// Release is a TRVM-PROOF-WIRE-SPEC-RELEASE-v1 record. Raw holds the bytes
// it was read from (nil for a record built in memory).
type Release struct {
	ReleaseType          string
	Protocols            Protocols
	Note                 string
	SpecRevision         int
	SpecDigest           string
	SpecFiles            []pkgwalk.FileDigest
	ExperimentRevision   int
	ExperimentDigest     string
	ExperimentFiles      []pkgwalk.FileDigest
	PublicCorpusRevision int
	PublicCorpusDigest   string
	JCSUpstream          JCSUpstream
	HoldoutCommitment    string
	HoldoutEntries       int
	SpecReleaseID        string

	Raw []byte
}

// ReadRelease reads and parses the release record at path (see
// ParseRelease). The file must be a regular file: a symbolic link is not
// followed and a FIFO cannot stall the read.
func ReadRelease(path string) (*Release, error) {
	b, err := readRegular(path)
	if err != nil {
		return nil, fmt.Errorf("reading release record: %w", err)
	}
	r, err := ParseRelease(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// ParseRelease reads a release record through the strict evidence reader
// and checks its closed shape: every member of §3.6 present with its type,
// nothing else; release_type the one this package reads; revisions positive
// integers; counts non-negative integers; digests lowercase hex; file lists
// sorted with unique paths. Every problem found is returned (errors.Join of
// *ReleaseError). Member order and whitespace are not checked here: the
// byte form is a verify check, so a re-indented record can still be named.
func ParseRelease(b []byte) (*Release, error) {
	obj, err := evidence.ReadObject(b)
	if err != nil {
		return nil, err
	}
	p := &shapeReader{}
	r := &Release{Raw: b}
	p.closed(obj, "", releaseMembers)
	r.ReleaseType = p.str(obj, "", "release_type")
	if v, ok := obj.Get("release_type"); ok {
		if s, isStr := v.(string); isStr && s != ReleaseType {
			p.add("/release_type", errReleaseType, fmt.Sprintf("%q", s))
		}
	}
	if po := p.object(obj, "", "protocols"); po != nil {
		p.closed(po, "/protocols", []string{"wire", "verified_claim", "nested_composition"})
		r.Protocols = Protocols{
			Wire:              p.str(po, "/protocols", "wire"),
			VerifiedClaim:     p.str(po, "/protocols", "verified_claim"),
			NestedComposition: p.str(po, "/protocols", "nested_composition"),
		}
	}
	r.Note = p.str(obj, "", "note")
	r.SpecRevision = p.integer(obj, "", "spec_revision", 1, errRevision)
	r.SpecDigest = p.digest(obj, "", "spec_digest")
	r.SpecFiles = p.files(obj, "spec_files")
	r.ExperimentRevision = p.integer(obj, "", "experiment_revision", 1, errRevision)
	r.ExperimentDigest = p.digest(obj, "", "experiment_digest")
	r.ExperimentFiles = p.files(obj, "experiment_files")
	r.PublicCorpusRevision = p.integer(obj, "", "public_corpus_revision", 1, errRevision)
	r.PublicCorpusDigest = p.digest(obj, "", "public_corpus_digest")
	if jo := p.object(obj, "", "jcs_upstream"); jo != nil {
		p.closed(jo, "/jcs_upstream", []string{"repository", "path", "commit", "digest", "vectors"})
		r.JCSUpstream = JCSUpstream{
			Repository: p.str(jo, "/jcs_upstream", "repository"),
			Path:       p.str(jo, "/jcs_upstream", "path"),
			Commit:     p.str(jo, "/jcs_upstream", "commit"),
			Digest:     p.digest(jo, "/jcs_upstream", "digest"),
			Vectors:    p.integer(jo, "/jcs_upstream", "vectors", 0, errCount),
		}
	}
	r.HoldoutCommitment = p.str(obj, "", "holdout_commitment")
	if r.HoldoutCommitment != HoldoutAbsent && obj.Has("holdout_commitment") && !ident.IsDigest(r.HoldoutCommitment) {
		p.add("/holdout_commitment", errDigestForm, fmt.Sprintf("%q is neither a digest nor %q", r.HoldoutCommitment, HoldoutAbsent))
	}
	r.HoldoutEntries = p.integer(obj, "", "holdout_entries", 0, errCount)
	r.SpecReleaseID = p.str(obj, "", "spec_release_id")
	if obj.Has("spec_release_id") && !ident.Is(SrelPrefix, r.SpecReleaseID) {
		p.add("/spec_release_id", errDigestForm, fmt.Sprintf("%q is not srel- + 64 hex", r.SpecReleaseID))
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return r, nil
}

// releaseMembers is the member order of §3.6, used for the closed-shape
// check and for writing.
var releaseMembers = []string{
	"release_type", "protocols", "note", "spec_revision", "spec_digest", "spec_files",
	"experiment_revision", "experiment_digest", "experiment_files", "public_corpus_revision",
	"public_corpus_digest", "jcs_upstream", "holdout_commitment", "holdout_entries", "spec_release_id",
}

// Object returns the record as an *evidence.Object in the member order of
// §3.6 (the order its bytes are written in).
func (r *Release) Object() *evidence.Object {
	files := func(fs []pkgwalk.FileDigest) []any {
		out := make([]any, len(fs))
		for i, f := range fs {
			out[i] = evidence.NewObject(evidence.Member{Name: "path", Value: f.Path}, evidence.Member{Name: "sha256", Value: f.SHA256})
		}
		return out
	}
	return evidence.NewObject(
		evidence.Member{Name: "release_type", Value: r.ReleaseType},
		evidence.Member{Name: "protocols", Value: evidence.NewObject(
			evidence.Member{Name: "wire", Value: r.Protocols.Wire},
			evidence.Member{Name: "verified_claim", Value: r.Protocols.VerifiedClaim},
			evidence.Member{Name: "nested_composition", Value: r.Protocols.NestedComposition},
		)},
		evidence.Member{Name: "note", Value: r.Note},
		evidence.Member{Name: "spec_revision", Value: r.SpecRevision},
		evidence.Member{Name: "spec_digest", Value: r.SpecDigest},
		evidence.Member{Name: "spec_files", Value: files(r.SpecFiles)},
		evidence.Member{Name: "experiment_revision", Value: r.ExperimentRevision},
		evidence.Member{Name: "experiment_digest", Value: r.ExperimentDigest},
		evidence.Member{Name: "experiment_files", Value: files(r.ExperimentFiles)},
		evidence.Member{Name: "public_corpus_revision", Value: r.PublicCorpusRevision},
		evidence.Member{Name: "public_corpus_digest", Value: r.PublicCorpusDigest},
		evidence.Member{Name: "jcs_upstream", Value: evidence.NewObject(
			evidence.Member{Name: "repository", Value: r.JCSUpstream.Repository},
			evidence.Member{Name: "path", Value: r.JCSUpstream.Path},
			evidence.Member{Name: "commit", Value: r.JCSUpstream.Commit},
			evidence.Member{Name: "digest", Value: r.JCSUpstream.Digest},
			evidence.Member{Name: "vectors", Value: r.JCSUpstream.Vectors},
		)},
		evidence.Member{Name: "holdout_commitment", Value: r.HoldoutCommitment},
		evidence.Member{Name: "holdout_entries", Value: r.HoldoutEntries},
		evidence.Member{Name: "spec_release_id", Value: r.SpecReleaseID},
	)
}

// Bytes returns the reference byte form of the record:
// JSON.stringify(r, null, 1) + "\n" with the members in §3.6 order.
func (r *Release) Bytes() ([]byte, error) {
	return evidence.Stringify(r.Object(), " ")
}

// Core returns the release_core projection of §3.7. It is built member by
// member from the named fields — an explicit projection, not "the record
// minus some fields" — so note, spec_files, experiment_files,
// jcs_upstream.path and spec_release_id can never enter srel.
func (r *Release) Core() *evidence.Object {
	return coreOf(r.Object())
}

// coreOf projects a record object (as Object returns it, or a perturbed
// copy in the formula audit) onto release_core.
func coreOf(rec *evidence.Object) *evidence.Object {
	get := func(o *evidence.Object, name string) any {
		v, _ := o.Get(name)
		return v
	}
	sub := func(name string) *evidence.Object {
		o, _ := get(rec, name).(*evidence.Object)
		return o
	}
	p, j := sub("protocols"), sub("jcs_upstream")
	return evidence.NewObject(
		evidence.Member{Name: "release_type", Value: get(rec, "release_type")},
		evidence.Member{Name: "protocols", Value: evidence.NewObject(
			evidence.Member{Name: "wire", Value: get(p, "wire")},
			evidence.Member{Name: "verified_claim", Value: get(p, "verified_claim")},
			evidence.Member{Name: "nested_composition", Value: get(p, "nested_composition")},
		)},
		evidence.Member{Name: "spec_revision", Value: get(rec, "spec_revision")},
		evidence.Member{Name: "spec_digest", Value: get(rec, "spec_digest")},
		evidence.Member{Name: "experiment_revision", Value: get(rec, "experiment_revision")},
		evidence.Member{Name: "experiment_digest", Value: get(rec, "experiment_digest")},
		evidence.Member{Name: "public_corpus_revision", Value: get(rec, "public_corpus_revision")},
		evidence.Member{Name: "public_corpus_digest", Value: get(rec, "public_corpus_digest")},
		evidence.Member{Name: "jcs_upstream", Value: evidence.NewObject(
			evidence.Member{Name: "repository", Value: get(j, "repository")},
			evidence.Member{Name: "commit", Value: get(j, "commit")},
			evidence.Member{Name: "digest", Value: get(j, "digest")},
			evidence.Member{Name: "vectors", Value: get(j, "vectors")},
		)},
		evidence.Member{Name: "holdout_commitment", Value: get(rec, "holdout_commitment")},
		evidence.Member{Name: "holdout_entries", Value: get(rec, "holdout_entries")},
	)
}

// srelPreimage is UTF-8(release_type + "|" + canonicalWire(core)). The
// domain prefix is the release_type constant, not the record's own value:
// the record's value is a core leaf and already inside the canonical bytes.
func srelPreimage(core *evidence.Object) ([]byte, error) {
	c, err := evidence.Canonical(core)
	if err != nil {
		return nil, fmt.Errorf("canonical bytes of release_core: %w", err)
	}
	return append([]byte(ReleaseType+"|"), c...), nil
}

func srelOf(core *evidence.Object) (string, error) {
	pre, err := srelPreimage(core)
	if err != nil {
		return "", err
	}
	return SrelPrefix + pkgwalk.SHA256Hex(pre), nil
}

// Preimage returns the exact bytes srel hashes (§3.7).
func (r *Release) Preimage() ([]byte, error) { return srelPreimage(r.Core()) }

// ID returns spec_release_id computed from the record alone:
// "srel-" + hex(SHA-256("TRVM-PROOF-WIRE-SPEC-RELEASE-v1|" + RFC 8785 of
// release_core)). It does not look at the recorded spec_release_id.
func (r *Release) ID() (string, error) { return srelOf(r.Core()) }

// Committed is what the release commits of the instrument that measures
// its runs, in the form the holdout loads it against: the holdout
// commitment and entry count and the experiment files' digests.
func (r *Release) Committed() *holdout.Committed {
	files := make(map[string]string, len(r.ExperimentFiles))
	for _, f := range r.ExperimentFiles {
		files[f.Path] = f.SHA256
	}
	return &holdout.Committed{Commitment: r.HoldoutCommitment, Entries: r.HoldoutEntries, Files: files}
}

// ArchivePath returns pkgDir/releases/<srel>.json for an srel.
func ArchivePath(pkgDir, srel string) string {
	return filepath.Join(pkgDir, ReleasesDir, srel+".json")
}

// shapeReader collects every shape problem of one record.
type shapeReader struct{ errs []error }

func (p *shapeReader) add(ptr string, rule ReleaseRule, detail string) {
	p.errs = append(p.errs, &ReleaseError{Pointer: ptr, Rule: rule, Detail: detail})
}

func (p *shapeReader) closed(o *evidence.Object, ptr string, names []string) {
	known := make(map[string]bool, len(names))
	for _, n := range names {
		known[n] = true
		if !o.Has(n) {
			p.add(ptr+"/"+n, errMissingMember, "")
		}
	}
	for _, m := range o.Members {
		if !known[m.Name] {
			p.add(ptr+"/"+escapePointer(m.Name), errUnknownMember, fmt.Sprintf("%q", m.Name))
		}
	}
}

func (p *shapeReader) str(o *evidence.Object, ptr, name string) string {
	v, ok := o.Get(name)
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		p.add(ptr+"/"+name, errFieldType, "want a string, have "+evidence.TypeName(v))
	}
	return s
}

func (p *shapeReader) digest(o *evidence.Object, ptr, name string) string {
	s := p.str(o, ptr, name)
	if v, ok := o.Get(name); ok {
		if _, isStr := v.(string); isStr && !ident.IsDigest(s) {
			p.add(ptr+"/"+name, errDigestForm, fmt.Sprintf("%q", s))
		}
	}
	return s
}

func (p *shapeReader) object(o *evidence.Object, ptr, name string) *evidence.Object {
	v, ok := o.Get(name)
	if !ok {
		return nil
	}
	so, isObj := v.(*evidence.Object)
	if !isObj {
		p.add(ptr+"/"+name, errFieldType, "want an object, have "+evidence.TypeName(v))
	}
	return so
}

// integer reads a whole number ≥ min that a double holds exactly.
func (p *shapeReader) integer(o *evidence.Object, ptr, name string, min int, rule ReleaseRule) int {
	v, ok := o.Get(name)
	if !ok {
		return 0
	}
	f, isNum := v.(float64)
	if !isNum {
		p.add(ptr+"/"+name, errFieldType, "want a number, have "+evidence.TypeName(v))
		return 0
	}
	if f != math.Trunc(f) || f < float64(min) || f > maxSafeInteger {
		p.add(ptr+"/"+name, rule, string(evidence.AppendNumber(nil, f)))
		return 0
	}
	return int(f)
}

func (p *shapeReader) files(o *evidence.Object, name string) []pkgwalk.FileDigest {
	v, ok := o.Get(name)
	if !ok {
		return nil
	}
	arr, isArr := v.([]any)
	if !isArr {
		p.add("/"+name, errFieldType, "want an array, have "+evidence.TypeName(v))
		return nil
	}
	out := make([]pkgwalk.FileDigest, 0, len(arr))
	for i, e := range arr {
		ptr := fmt.Sprintf("/%s/%d", name, i)
		eo, isObj := e.(*evidence.Object)
		if !isObj {
			p.add(ptr, errFieldType, "want an object, have "+evidence.TypeName(e))
			continue
		}
		p.closed(eo, ptr, []string{"path", "sha256"})
		f := pkgwalk.FileDigest{Path: p.str(eo, ptr, "path"), SHA256: p.digest(eo, ptr, "sha256")}
		if f.Path == "" {
			p.add(ptr+"/path", errFileList, "empty path")
		}
		if len(out) > 0 && evidence.CompareUTF16(out[len(out)-1].Path, f.Path) >= 0 {
			p.add(ptr+"/path", errFileList, fmt.Sprintf("%q does not sort after %q", f.Path, out[len(out)-1].Path))
		}
		out = append(out, f)
	}
	return out
}

// escapePointer escapes a member name as an RFC 6901 reference token.
func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
