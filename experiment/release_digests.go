package experiment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/ident"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// Surface is one recomputed release surface: the path-list digest of Files
// (TRVM-FORMATS §3.1). Files holds the digests read from disk and, for a
// file the record (or the public manifest) lists but the disk lacks, the
// recorded digest — those paths are named in Missing, so a digest that
// matches only thanks to recorded values never passes for a full recompute.
type Surface struct {
	Digest  string               `json:"digest"`
	Files   []pkgwalk.FileDigest `json:"files"`
	Missing []string             `json:"missing,omitempty"`
}

// Recomputed is every DERIVED value of a release recomputed from a package
// (and a holdout directory), plus the CHECKED protocols read from the
// package's schema.
type Recomputed struct {
	Protocols         Protocols `json:"protocols"`
	ProtocolsError    string    `json:"protocols_error,omitempty"`
	Spec              Surface   `json:"spec"`
	Experiment        Surface   `json:"experiment"`
	PublicCorpus      Surface   `json:"public_corpus"`
	JCS               Surface   `json:"jcs_upstream"`
	JCSVectors        int       `json:"jcs_vectors"`
	HoldoutChecked    bool      `json:"holdout_checked"` // a holdout directory was given
	HoldoutCommitment string    `json:"holdout_commitment"`
	HoldoutEntries    int       `json:"holdout_entries"`
	HoldoutError      string    `json:"holdout_error,omitempty"`
}

// Missing returns every path that was recorded but absent on disk, sorted.
func (c *Recomputed) Missing() []string {
	var all []string
	for _, s := range []Surface{c.Spec, c.Experiment, c.PublicCorpus, c.JCS} {
		all = append(all, s.Missing...)
	}
	return sortedPaths(all)
}

// The surfaces' path rules (TRVM-FORMATS §3.2–3.4), on paths relative to
// the package root.
func inSpec(p string) bool {
	for _, pre := range []string{"vectors", "requirements", "releases", "experiment/"} {
		if strings.HasPrefix(p, pre) {
			return false
		}
	}
	return p != ReleaseFile
}
func inExperiment(p string) bool { return strings.HasPrefix(p, "experiment/") }
func inPublic(p string) bool     { return strings.HasPrefix(p, "vectors/public/") }
func inJCS(p string) bool        { return strings.HasPrefix(p, "vectors/jcs-upstream/") }

// isJCSVector: a *.json file directly in vectors/jcs-upstream/input/.
func isJCSVector(p string) bool {
	const dir = "vectors/jcs-upstream/input/"
	rest, ok := strings.CutPrefix(p, dir)
	return ok && !strings.Contains(rest, "/") && strings.HasSuffix(rest, ".json")
}

// RecomputeRelease recomputes every derived value from the files on disk
// under pkgDir (and holdoutDir, when not ""). No recorded list is consulted
// except the public manifest's CAS entries (vectors/public/manifest.json
// records the sha256 of each CAS leaf). Use RecomputeAgainst to fill files
// a recorded release lists but the disk lacks.
func RecomputeRelease(pkgDir, holdoutDir string) (*Recomputed, error) {
	return RecomputeAgainst(pkgDir, holdoutDir, nil)
}

// RecomputeAgainst is RecomputeRelease with the recorded spec_files and
// experiment_files of rec (when not nil) standing in for files absent on
// disk; each such file is named in its surface's Missing.
func RecomputeAgainst(pkgDir, holdoutDir string, rec *Release) (*Recomputed, error) {
	disk, err := listRegularFiles(pkgDir)
	if err != nil {
		return nil, fmt.Errorf("listing release package: %w", err)
	}
	c := &Recomputed{}
	var specRec, expRec []pkgwalk.FileDigest
	if rec != nil {
		specRec, expRec = rec.SpecFiles, rec.ExperimentFiles
	}
	c.Spec = surface(disk, inSpec, specRec)
	c.Experiment = surface(disk, inExperiment, expRec)
	c.PublicCorpus = surface(disk, inPublic, manifestCAS(disk, pkgDir))
	c.JCS = surface(disk, inJCS, nil)
	for _, f := range disk {
		if isJCSVector(f.Path) {
			c.JCSVectors++
		}
	}
	c.Protocols, err = schemaProtocols(pkgDir, disk)
	if err != nil {
		c.ProtocolsError = err.Error()
	}
	if holdoutDir != "" {
		c.HoldoutChecked = true
		c.HoldoutCommitment, c.HoldoutEntries, err = HoldoutCommitment(pkgDir, holdoutDir)
		if err != nil {
			c.HoldoutError = err.Error()
		}
	}
	return c, nil
}

// surface selects the disk files a surface rule keeps, adds the recorded
// entries (of the same surface) the disk lacks, and digests the result.
func surface(disk []pkgwalk.FileDigest, keep func(string) bool, recorded []pkgwalk.FileDigest) Surface {
	var s Surface
	have := map[string]bool{}
	for _, f := range disk {
		if keep(f.Path) {
			s.Files = append(s.Files, f)
			have[f.Path] = true
		}
	}
	for _, f := range recorded {
		// A recorded entry outside this surface's rule is not a missing
		// file of it: the recorded list disagrees with the rule, which the
		// list comparison reports.
		if keep(f.Path) && !have[f.Path] {
			s.Files = append(s.Files, f)
			s.Missing = append(s.Missing, f.Path)
			have[f.Path] = true
		}
	}
	pkgwalk.SortByPath(s.Files)
	s.Missing = sortedPaths(s.Missing)
	if s.Files == nil {
		s.Files = []pkgwalk.FileDigest{}
	}
	s.Digest = pkgwalk.PathListDigest(s.Files)
	return s
}

// manifestCAS returns the CAS leaves vectors/public/manifest.json records
// (nested_positive.cas.*.{file, sha256}) as package-relative entries. A
// manifest that is absent or unreadable records nothing; the corpus digest
// is then computed from the disk alone.
func manifestCAS(disk []pkgwalk.FileDigest, pkgDir string) []pkgwalk.FileDigest {
	const manifest = "vectors/public/manifest.json"
	b, err := readWalked(pkgDir, manifest, disk)
	if err != nil {
		return nil
	}
	obj, err := evidence.ReadObject(b)
	if err != nil {
		return nil
	}
	np, _ := obj.Get("nested_positive")
	npo, _ := np.(*evidence.Object)
	cas, _ := npo.Get("cas")
	caso, _ := cas.(*evidence.Object)
	if caso == nil {
		return nil
	}
	var out []pkgwalk.FileDigest
	for _, m := range caso.Members {
		e, _ := m.Value.(*evidence.Object)
		file, _ := e.Get("file")
		sha, _ := e.Get("sha256")
		fs, ok1 := file.(string)
		ss, ok2 := sha.(string)
		// Recorded paths are only compared with walked paths, never opened.
		if ok1 && ok2 && ident.IsDigest(ss) && fs != "" {
			out = append(out, pkgwalk.FileDigest{Path: "vectors/public/" + fs, SHA256: ss})
		}
	}
	return out
}

// schemaProtocols reads the CHECKED plane's sources from the package's
// schema: verified_claim = constants.certificate_protocol, nested_composition
// = constants.protocol; wire is the constant WireProtocol.
func schemaProtocols(pkgDir string, disk []pkgwalk.FileDigest) (Protocols, error) {
	p := Protocols{Wire: WireProtocol}
	b, err := readWalked(pkgDir, SchemaFile, disk)
	if err != nil {
		return p, &ReleaseError{File: SchemaFile, Rule: errSchemaConstants, Err: err}
	}
	obj, err := evidence.ReadObject(b)
	if err != nil {
		return p, &ReleaseError{File: SchemaFile, Rule: errSchemaConstants, Err: err}
	}
	cv, _ := obj.Get("constants")
	co, _ := cv.(*evidence.Object)
	cert, _ := co.Get("certificate_protocol")
	proto, _ := co.Get("protocol")
	cs, ok1 := cert.(string)
	ps, ok2 := proto.(string)
	if !ok1 || !ok2 {
		return p, &ReleaseError{File: SchemaFile, Pointer: "/constants", Rule: errSchemaConstants, Detail: "certificate_protocol and protocol must be strings"}
	}
	p.VerifiedClaim, p.NestedComposition = cs, ps
	return p, nil
}

// HoldoutCommitment computes holdout_commitment and holdout_entries
// (TRVM-FORMATS §3.5): the path-list digest of every regular file under
// holdoutDir, each path made relative to pkgDir (for the TRVM layout,
// literally "../../../governance/holdout/<file>"), and the length of
// INDEX.json's entries array. The tree must hold exactly entries + 1 files
// (errHoldoutCount). When holdoutDir does not exist the commitment is
// "absent" with 0 entries and no error, as the reference reports NOT
// PRESENT without failing.
func HoldoutCommitment(pkgDir, holdoutDir string) (commitment string, entries int, err error) {
	if _, err := os.Lstat(holdoutDir); errors.Is(err, fs.ErrNotExist) {
		return HoldoutAbsent, 0, nil
	}
	files, err := listRegularFiles(holdoutDir)
	if err != nil {
		return "", 0, fmt.Errorf("listing holdout: %w", err)
	}
	indexBytes, err := readWalked(holdoutDir, "INDEX.json", files)
	if err != nil {
		return "", 0, &ReleaseError{File: holdoutDir, Pointer: "INDEX.json", Rule: errHoldoutIndex, Err: err}
	}
	idx, err := evidence.ReadObject(indexBytes)
	if err != nil {
		return "", 0, &ReleaseError{File: filepath.Join(holdoutDir, "INDEX.json"), Rule: errHoldoutIndex, Err: err}
	}
	ev, _ := idx.Get("entries")
	arr, ok := ev.([]any)
	if !ok {
		return "", 0, &ReleaseError{File: filepath.Join(holdoutDir, "INDEX.json"), Pointer: "/entries", Rule: errHoldoutIndex, Detail: "want an array, have " + evidence.TypeName(ev)}
	}
	if len(files) != len(arr)+1 {
		return "", 0, &ReleaseError{File: holdoutDir, Rule: errHoldoutCount, Detail: fmt.Sprintf("%d files for %d entries", len(files), len(arr))}
	}
	d, err := holdout.DigestOf(pkgDir, holdoutDir, files)
	if err != nil {
		return "", 0, err
	}
	return d, len(arr), nil
}

// readRegular reads a regular file at path with the package's one careful
// reader (readRegularBeneath: openat2 with no symlink followed, a FIFO
// cannot stall it, size bounded by the strict reader's limit).
func readRegular(path string) ([]byte, error) {
	b, _, err := readRegularBeneath(filepath.Dir(path), filepath.Base(path))
	return b, err
}

// readWalked reads rel under dir and checks that its bytes are the ones the
// walk digested: a file swapped between the walk and this read would
// otherwise give the digest one set of bytes and the check another.
func readWalked(dir, rel string, walked []pkgwalk.FileDigest) ([]byte, error) {
	i := slices.IndexFunc(walked, func(f pkgwalk.FileDigest) bool { return f.Path == rel })
	if i < 0 {
		return nil, fmt.Errorf("%s: %w", rel, fs.ErrNotExist)
	}
	b, err := readRegular(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	if pkgwalk.SHA256Hex(b) != walked[i].SHA256 {
		return nil, fmt.Errorf("%s: changed between the walk and the read", rel)
	}
	return b, nil
}

func sortedPaths(ps []string) []string {
	out := append([]string(nil), ps...)
	slices.SortFunc(out, evidence.CompareUTF16)
	return out
}

// listRegularFiles lists the package (or holdout) through the one
// descriptor walk, pkgwalk.ListRegularFiles: every regular file with its
// SHA-256, a symbolic link, special file or mount anywhere refused.
func listRegularFiles(dir string) ([]pkgwalk.FileDigest, error) {
	files, err := pkgwalk.ListRegularFiles(dir)
	if err != nil {
		return nil, err
	}
	out := make([]pkgwalk.FileDigest, len(files))
	for i, f := range files {
		out[i] = pkgwalk.FileDigest{Path: f.Path, SHA256: f.SHA256}
	}
	return out, nil
}
