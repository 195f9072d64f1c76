package experiment

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/cleanroom-dev/cleanroom/internal/ident"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sign"
	"golang.org/x/crypto/ssh"
)

// ReceiptNamespace is the SSHSIG namespace of detached receipt signatures,
// so a receipt signature never verifies as a signature over anything else.
const ReceiptNamespace = "cleanroom-receipt@cleanroom"

// RunCheck is one check of a run verification, in §5.7 order.
type RunCheck struct {
	Name     string        `json:"name"`
	OK       bool          `json:"ok"`
	Skipped  string        `json:"skipped,omitempty"` // why the check did not run
	Problems []*RunProblem `json:"-"`
	Details  []string      `json:"problems,omitempty"`
}

// RunReport is the outcome of Verify.
type RunReport struct {
	World    string      `json:"world"`
	Verified bool        `json:"verified"` // every check passed (set by Verify)
	Record   *Record     `json:"-"`
	RunID    string      `json:"run_id,omitempty"`
	Status   Status      `json:"status,omitempty"`
	Checks   []RunCheck  `json:"checks"`
	Chain    []ChainLink `json:"-"`
	Release  *Release    `json:"-"`
	// Explained lists what an interrupted transition left behind that is
	// not a problem (temporary files never published under a final name).
	Explained []string `json:"explained,omitempty"`
}

// Problems returns every problem of every check, in order.
func (r *RunReport) Problems() []*RunProblem {
	var ps []*RunProblem
	for _, c := range r.Checks {
		ps = append(ps, c.Problems...)
	}
	return ps
}

// OK reports whether every check passed.
func (r *RunReport) OK() bool { return len(r.Problems()) == 0 }

// Err returns nil when the run verifies, otherwise a *VerifyError.
func (r *RunReport) Err() error {
	if ps := r.Problems(); len(ps) > 0 {
		return &VerifyError{What: "run verification", Problems: ps}
	}
	return nil
}

func (r *RunReport) add(name string, ps []*RunProblem) {
	c := RunCheck{Name: name, OK: len(ps) == 0, Problems: ps}
	for _, p := range ps {
		c.Details = append(c.Details, p.Error())
	}
	r.Checks = append(r.Checks, c)
}

func (r *RunReport) skip(name, why string) {
	r.Checks = append(r.Checks, RunCheck{Name: name, OK: true, Skipped: why})
}

// Predicates are a subject's predicate totals.
type Predicates struct {
	Total       int `json:"total"`
	Satisfied   int `json:"satisfied"`
	Unsatisfied int `json:"unsatisfied"`
	Unresolved  int `json:"unresolved"`
}

// VerifyOptions selects what Verify checks beyond §5.7's fixed list.
type VerifyOptions struct {
	// RecordBytes, when non-nil, are verified instead of the record on disk
	// (a transition checking the exact bytes it is about to write).
	RecordBytes []byte
	// RecordFile names where RecordBytes were read, world-relative, for
	// problems (default governance/blind-run.json).
	RecordFile string
	// SkipChain skips the receipt chain (pin creates the first link; abort
	// must work on a broken run, or a broken run is a trap).
	SkipChain bool
	// SkipPackage skips the blind-package walk (for a verification that
	// only needs the record and its chain).
	SkipPackage bool
	// replay stands in for the holdout's scorer in this package's tests
	// (nil: replayRun, the frozen scorer).
	replay replayFunc
	// SignerKey, when set, requires a detached SSHSIG signature
	// (namespace ReceiptNamespace) beside every receipt on the chain.
	SignerKey ssh.PublicKey
	// Evidence re-checks what the run's measurements archived in the state
	// root (verifyEvidence: every measurement taken under a run_id of the
	// receipt chain, every problem naming ErrMeasurementEvidence); without
	// it the check is not listed.
	Evidence bool
}

// pathish matches a command argument that names a file.
var pathish = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`/|\.(mjs|cjs|js|py|sh|exe|bin|out)$`) })

// interpreters may launch a subject without a frozen binary in a
// reference-protocol world (a world may declare its own:
// Declaration.AdapterInterpreters); the runner resolves the name itself in
// fixed directories, never through PATH.
var interpreters = []string{"node"}

// executionProblems: the executed subject must be the frozen subject,
// checked against the bytes on disk now (TRVM-FORMATS §5.7).
// interps are the world's permitted interpreters.
func (w *World) executionProblems(a Adapter, file string, interps []string) []*RunProblem {
	var ps []*RunProblem
	who := a.Implementation
	if len(a.Command) == 0 {
		return []*RunProblem{problem(errCommand, file, "%s: no command", who)}
	}
	pkg := map[string]bool{}
	for _, f := range a.PackageFiles {
		pkg[f] = true
	}
	// A run may only authorize subjects inside its own world: otherwise one
	// record could open the challenge set to a binary in another tree.
	if a.BinaryPath != nil && !w.containedPath(*a.BinaryPath) {
		ps = append(ps, &RunProblem{Rule: errOutsideWorld, File: file, Path: *a.BinaryPath, Detail: fmt.Sprintf("%s: binary_path %q", who, *a.BinaryPath)})
	}
	for _, f := range a.PackageFiles {
		if !w.containedPath(f) {
			ps = append(ps, &RunProblem{Rule: errOutsideWorld, File: file, Path: f, Detail: fmt.Sprintf("%s: package file %q", who, f)})
		}
	}
	for _, f := range append(slices.Clone(a.PackageFiles), ptrOr(a.BinaryPath)) {
		if f != "" && overlapsState(f) {
			ps = append(ps, &RunProblem{Rule: errSubjectInState, File: file, Path: f, Detail: fmt.Sprintf("%s: %q", who, f)})
		}
	}
	// Source is provenance; the executable bytes are the subject measured.
	if a.Role == RoleCandidate && a.BinaryPath == nil {
		ps = append(ps, problem(errBinaryRequired, file, "%s: a candidate must be launched as its own frozen executable", who))
	}
	if a.BinaryPath != nil && a.BinaryDigest == nil {
		ps = append(ps, problem(errBinaryRequired, file, "%s: binary_path %q with no binary_digest is not a freeze", who, *a.BinaryPath))
	}
	for _, d := range CommandProblems(a, interps) {
		ps = append(ps, problem(errCommand, file, "%s: %s", who, d))
	}
	if a.BinaryPath != nil {
		if w.containedPath(*a.BinaryPath) {
			_, files, err := pkgwalk.DigestOfPaths(w.Root, []string{*a.BinaryPath})
			switch {
			case err != nil:
				ps = append(ps, &RunProblem{Rule: errBinaryDigest, File: file, Path: *a.BinaryPath, Detail: who, Err: err})
			case len(files) != 1 || files[0].SHA256 == pkgwalk.Absent:
				ps = append(ps, &RunProblem{Rule: errBinaryDigest, File: file, Path: *a.BinaryPath, Detail: fmt.Sprintf("%s: frozen binary %s is absent (or not a file)", who, *a.BinaryPath)})
			case a.BinaryDigest != nil && files[0].SHA256 != *a.BinaryDigest:
				// Verified at the moment of use: a digest checked earlier is a
				// digest about an earlier file.
				ps = append(ps, &RunProblem{Rule: errBinaryDigest, File: file, Path: *a.BinaryPath,
					Detail: fmt.Sprintf("%s: the executable's bytes are %s and the run froze %s", who, files[0].SHA256, *a.BinaryDigest)})
			}
		}
	}
	return ps
}

// CommandProblems is the one rule for what an adapter's command may
// execute (TRVM-FORMATS §5.7, executionProblems): with a frozen binary,
// command[0] is that binary; without one, command[0] is one of interps (the
// world's permitted interpreters, Declaration.AdapterInterpreters) and
// command[1] a frozen package file; every other path-like
// argument is a package file or a placeholder. It returns one description
// per breach, none when the command is sound. The runner checks it again
// just before executing, so a command cannot reach outside the frozen files
// between verification and use.
func CommandProblems(a Adapter, interps []string) []string {
	if len(a.Command) == 0 {
		return []string{"no command"}
	}
	pkg := map[string]bool{}
	for _, f := range a.PackageFiles {
		pkg[f] = true
	}
	var ds []string
	start := 2
	if a.BinaryPath != nil {
		start = 1
		if a.Command[0] != *a.BinaryPath {
			ds = append(ds, fmt.Sprintf("command[0] is %q and the frozen binary is %q", a.Command[0], *a.BinaryPath))
		}
	} else {
		if !slices.Contains(interps, a.Command[0]) {
			ds = append(ds, fmt.Sprintf("command[0] %q is neither the frozen binary nor a permitted interpreter %v (the world's adapter_interpreters)", a.Command[0], interps))
		}
		if len(a.Command) < 2 || !pkg[a.Command[1]] {
			arg := ""
			if len(a.Command) >= 2 {
				arg = a.Command[1]
			}
			ds = append(ds, fmt.Sprintf("the interpreter is handed %q, which is not a frozen package file", arg))
		}
	}
	for _, x := range a.Command[min(start, len(a.Command)):] {
		if x != PlaceholderChallenges && x != PlaceholderOut && pathish().MatchString(x) && !pkg[x] {
			ds = append(ds, fmt.Sprintf("command argument %q names a path outside the frozen package", x))
		}
	}
	return ds
}

func ptrOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Verify is verifyRun (TRVM-FORMATS §5.7) over the world as it is now, plus
// the live package check: every check is recorded in the report, in order.
// A record that does not cross the strict reader or breaks its closed shape
// stops the verification there — a record with two readings has no single
// thing to check. The error is non-nil only when verification could not be
// carried out at all; problems are in the report.
func Verify(ctx context.Context, w *World, opt VerifyOptions) (rep *RunReport, err error) {
	rep = &RunReport{World: w.Root}
	defer func() { rep.Verified = rep.OK() }()
	recFile := w.stateRel(RecordFileName)
	if opt.RecordFile != "" {
		recFile = opt.RecordFile
	}

	// SPEC-RELEASE readable.
	rel, relErr := ReadRelease(filepath.Join(w.PackageDir(), ReleaseFile))
	if relErr != nil {
		rep.add("SPEC-RELEASE.json readable", []*RunProblem{{Rule: errReleaseUnreadable, File: w.PackageLabel() + "/" + ReleaseFile, Err: relErr}})
	} else {
		rep.Release = rel
		rep.add("SPEC-RELEASE.json readable", nil)
	}

	if p := w.stateRootProblem(); p != nil {
		rep.add("state root is the world's own directory", []*RunProblem{p})
		return rep, nil
	}
	// Record bytes through the strict reader, then the closed shape.
	b := opt.RecordBytes
	if b == nil {
		var err error
		b, err = w.readRecordBytes()
		if errors.Is(err, fs.ErrNotExist) {
			rep.add("run record present", []*RunProblem{problem(errNoRecord, recFile, "no run is pinned")})
			return rep, nil
		}
		if err != nil {
			rep.add("run record present", []*RunProblem{{Rule: errRecordBytes, File: recFile, Err: err}})
			return rep, nil
		}
	}
	r, ps := parseRecord(b, recFile)
	if len(ps) > 0 && hasRule(ps, errRecordBytes) {
		rep.add("record bytes pass the strict reader", ps)
		return rep, nil
	}
	rep.add("record bytes pass the strict reader", nil)
	var shapePs, vocab []*RunProblem
	for _, p := range ps {
		if p.Rule == errRecordType || p.Rule == errUnknownStatus {
			vocab = append(vocab, p)
		} else {
			shapePs = append(shapePs, p)
		}
	}
	rep.add("closed shape, roles and labels", shapePs)
	if len(shapePs) > 0 {
		return rep, nil
	}
	rep.Record, rep.RunID, rep.Status = r, r.RunID, r.Status
	rep.add("type and status", vocab)

	// run_id recomputes.
	if got := r.ComputeRunID(); got != r.RunID {
		rep.add("run_id recomputes", []*RunProblem{problem(errRunID, recFile, "recorded %s, the record's content implies %s", r.RunID, got)})
	} else {
		rep.add("run_id recomputes", nil)
	}

	// The selected release is archived.
	if _, err := os.Lstat(ArchivePath(w.PackageDir(), r.SpecReleaseID)); err != nil || !ident.Is(SrelPrefix, r.SpecReleaseID) {
		rep.add("selected release archived", []*RunProblem{problem(errRunReleaseNotArchived, recFile, "%s is not in %s/%s/", r.SpecReleaseID, w.PackageLabel(), ReleasesDir)})
	} else {
		rep.add("selected release archived", nil)
	}

	// The world's declaration reads (or is absent: the reference protocol).
	decl, declErr := w.Declaration()
	if declErr != nil {
		rep.add("world declaration readable", runProblems(declErr, errDeclarationBytes, w.PackageLabel()+"/"+DeclarationFile))
		decl = &Declaration{}
	} else {
		rep.add("world declaration readable", nil)
	}

	// Instrument members exist and the digest matches the tree.
	// From the declaration just read (not instrumentDigest, which would
	// read world.json a second time): one reading of it per verify.
	var inst string
	var instFiles []pkgwalk.FileDigest
	instErr := declErr
	if declErr == nil {
		inst, instFiles, instErr = pkgwalk.DigestOfPaths(w.PackageDir(), decl.Instrument)
	}
	var missing []*RunProblem
	var absent []string
	var notCarried []string
	for _, f := range instFiles {
		if f.SHA256 != pkgwalk.Absent {
			continue
		}
		absent = append(absent, f.Path)
		// A member the release's experiment surface lists and the tree lacks
		// was moved out of the surface (which shrinks experiment_digest
		// rather than moving it). A member the release never carried — a
		// world whose scorer is cleanroom itself, not JavaScript in the
		// package — is recorded ABSENT in the digest, and that is what was
		// pinned.
		if rel != nil && !releaseCarries(rel, f.Path) {
			notCarried = append(notCarried, f.Path)
			continue
		}
		missing = append(missing, &RunProblem{Rule: errInstrumentMissing, File: w.PackageLabel() + "/" + f.Path, Path: w.PackageLabel() + "/" + f.Path, Detail: "absent from the experiment surface"})
	}
	rep.add("instrument members present", missing)
	if len(notCarried) > 0 && len(missing) == 0 {
		rep.Checks[len(rep.Checks)-1].Skipped = fmt.Sprintf("%d member(s) not carried by this release, digested as ABSENT: %s", len(notCarried), strings.Join(notCarried, ", "))
	}
	switch {
	case instErr != nil:
		rep.add("instrument_digest matches the tree", []*RunProblem{{Rule: errInstrumentDigest, File: w.PackageLabel(), Err: instErr}})
	case inst != r.InstrumentDigest:
		d := fmt.Sprintf("pinned %s, this tree %s", r.InstrumentDigest, inst)
		if len(absent) > 0 {
			d += fmt.Sprintf(" (computed with %d absent member(s))", len(absent))
			if rel != nil && withRecorded(instFiles, rel) == r.InstrumentDigest {
				d += "; with the release's recorded sha256 for the absent members it is the pinned digest, so only their absence differs"
			}
		}
		rep.add("instrument_digest matches the tree", []*RunProblem{problem(errInstrumentDigest, recFile, "%s", d)})
	default:
		rep.add("instrument_digest matches the tree", nil)
	}

	// Every package digest recomputes; every executable is the frozen one.
	var pkgPs, execPs []*RunProblem
	for _, a := range r.Adapters {
		if a.PackageDigest == "" {
			pkgPs = append(pkgPs, problem(errPackageDigest, recFile, "adapter %s has no package_digest", a.Implementation))
			continue
		}
		contained := true
		for _, f := range a.PackageFiles {
			if !w.containedPath(f) {
				contained = false
			}
		}
		if !contained {
			// Reported by executionProblems; never digest outside the world.
			pkgPs = append(pkgPs, problem(errPackageDigest, recFile, "adapter %s names package files outside the world", a.Implementation))
		} else {
			live, files, err := pkgwalk.DigestOfPaths(w.Root, a.PackageFiles)
			switch {
			case err != nil:
				pkgPs = append(pkgPs, &RunProblem{Rule: errPackageDigest, File: recFile, Detail: "adapter " + a.Implementation, Err: err})
			case live != a.PackageDigest:
				var gone []string
				for _, f := range files {
					if f.SHA256 == pkgwalk.Absent {
						gone = append(gone, f.Path)
						pkgPs = append(pkgPs, &RunProblem{Rule: errPackageFileAbsent, File: f.Path, Path: f.Path, Detail: fmt.Sprintf("frozen by adapter %s [%s]", a.Implementation, a.Role)})
					}
				}
				d := fmt.Sprintf("adapter %s [%s]: pinned %s, this tree %s", a.Implementation, a.Role, a.PackageDigest, live)
				if len(gone) > 0 {
					d += fmt.Sprintf(" (computed with %d absent file(s))", len(gone))
				}
				pkgPs = append(pkgPs, problem(errPackageDigest, recFile, "%s", d))
			}
		}
		execPs = append(execPs, w.executionProblems(a, recFile, decl.AdapterInterpreters)...)
	}
	rep.add("package digests recompute", pkgPs)
	rep.add("executed subjects are the frozen subjects", execPs)

	// REVEALED/COMPLETE need a candidate.
	if r.Status.Revealed() && len(r.Candidates()) == 0 {
		rep.add("a revealed run has a frozen candidate", []*RunProblem{problem(errNoCandidate, recFile, "this run is %s with no frozen candidate", r.Status)})
	} else {
		rep.add("a revealed run has a frozen candidate", nil)
	}

	// A run in progress matches the tree's release and contract revision.
	if r.Status.Terminal() {
		rep.skip("run matches the tree's release", "terminal run")
	} else if rel != nil {
		var drift []*RunProblem
		if rel.SpecReleaseID != r.SpecReleaseID {
			drift = append(drift, problem(errReleaseDrift, recFile, "this run is %s against %s and the tree is %s: abort and pin a new run, or restore the tree", r.Status, r.SpecReleaseID, rel.SpecReleaseID))
		}
		if r.BlindContractRevision != float64(rel.ExperimentRevision) {
			drift = append(drift, problem(errContractRevision, recFile, "pins %s and the release is at experiment revision %d", scalar(r.BlindContractRevision), rel.ExperimentRevision))
		}
		rep.add("run matches the tree's release", drift)
	} else {
		rep.skip("run matches the tree's release", "SPEC-RELEASE.json unreadable")
	}

	// The receipt chain witnesses the status.
	if opt.SkipChain {
		rep.skip("receipt chain reaches PINNED", "not required for this transition")
	} else {
		links, chainPs := w.chain(r)
		rep.Chain = links
		rep.add("receipt chain reaches PINNED", chainPs)
		if opt.SignerKey != nil {
			rep.add("receipt signatures verify", w.signatureProblems(links, opt.SignerKey))
		}
	}

	// The delivered package has no walk problem or leak and is the pinned bpkg.
	if opt.SkipPackage {
		rep.skip("blind package is the pinned package", "not requested")
	} else {
		rep.add("blind package is the pinned package", w.packageProblems(r.BlindPackageID))
	}

	// A terminal claim is witnessed by its measurement artifact, always.
	if r.Status == StatusComplete {
		rep.add("RESULT verifies and replays", w.resultProblems(ctx, r, rel, rep.Chain, opt.replay))
	}
	if opt.Evidence {
		rep.add("archived measurements re-digest", verifyEvidence(ctx, w, ChainRunIDs(r, rep.Chain)))
	}
	rep.Explained = w.leftovers()
	return rep, nil
}

// ChainRunIDs returns the run_ids a run went by: the record's and every
// receipt's on its chain (each transition moves the run_id), without
// repeats, newest first.
func ChainRunIDs(r *Record, chain []ChainLink) []string {
	ids := []string{r.RunID}
	for _, l := range chain {
		if l.Receipt != nil && !slices.Contains(ids, l.Receipt.RunID) {
			ids = append(ids, l.Receipt.RunID)
		}
	}
	return ids
}

// packageProblems walks the package: every walk problem and leak blocks,
// and the identity must be the pinned one. When it is not and the state
// root holds the recorded manifest of the pinned package, the files it
// lists that the disk lacks (or holds with other bytes) are named.
func (w *World) packageProblems(pinned string) []*RunProblem {
	m, id, ps := w.walkPackage()
	if len(ps) > 0 {
		return ps
	}
	if id == pinned {
		return nil
	}
	ps = []*RunProblem{problem(errBlindPackage, w.PackageLabel(), "pinned %s, this tree %s: the bytes the clean room would receive are not the bytes this run pinned", pinned, id)}
	// A state file: read beneath the state root like the record and the
	// receipts, so a symlink planted at its name is not followed.
	b, _, err := w.readStateFile(PackageManifestName)
	if err != nil {
		return ps
	}
	rec, err := pkgwalk.ParseManifestRecord(b)
	if err != nil {
		return ps
	}
	if rid, err := rec.ID(); err != nil || rid != pinned {
		return ps
	}
	for _, f := range rec.Files {
		have, ok := m.Lookup(f.Path)
		switch {
		case !ok:
			ps = append(ps, &RunProblem{Rule: errBlindPackage, File: w.PackageLabel() + "/" + f.Path, Path: w.PackageLabel() + "/" + f.Path, Detail: "pinned file absent from the package"})
		case have.SHA256 != f.SHA256:
			ps = append(ps, &RunProblem{Rule: errBlindPackage, File: w.PackageLabel() + "/" + f.Path, Detail: "pinned file has other bytes"})
		}
	}
	for _, f := range m.Files {
		if _, ok := rec.Lookup(f.Path); !ok {
			ps = append(ps, &RunProblem{Rule: errBlindPackage, File: w.PackageLabel() + "/" + f.Path, Detail: "file not in the pinned package"})
		}
	}
	return ps
}

// withRecorded recomputes a path-list digest with the release's recorded
// experiment_files sha256 standing in for ABSENT entries.
func withRecorded(files []pkgwalk.FileDigest, rel *Release) string {
	rec := map[string]string{}
	for _, f := range rel.ExperimentFiles {
		rec[f.Path] = f.SHA256
	}
	out := slices.Clone(files)
	for i, f := range out {
		if sha, ok := rec[f.Path]; ok && f.SHA256 == pkgwalk.Absent {
			out[i].SHA256 = sha
		}
	}
	return pkgwalk.PathListDigest(out)
}

// releaseCarries reports whether the release's experiment_files list the
// instrument member m (a file, or a directory with files under it).
func releaseCarries(rel *Release, m string) bool {
	for _, f := range rel.ExperimentFiles {
		if f.Path == m || strings.HasPrefix(f.Path, m+"/") {
			return true
		}
	}
	return false
}

// walkPackage walks the package (with the holdout-copy leak rule when the
// holdout is present) and returns its manifest and bpkg, or every walk
// problem and leak.
func (w *World) walkPackage() (*pkgwalk.Manifest, string, []*RunProblem) {
	tree, err := pkgwalk.Walk(w.PackageDir(), pkgwalk.WalkOptions{HoldoutDir: existingDir(w.HoldoutDir())})
	if err != nil {
		return nil, "", []*RunProblem{{Rule: errBlindPackage, File: w.PackageLabel(), Err: err}}
	}
	if len(tree.Problems) > 0 {
		var ps []*RunProblem
		for _, p := range tree.Problems {
			ps = append(ps, &RunProblem{Rule: errBlindPackage, File: w.PackageLabel() + "/" + p.Path, Err: p})
		}
		return nil, "", ps
	}
	m, err := pkgwalk.NewManifest(tree, w.PackageLabel())
	if err == nil {
		var id string
		if id, err = m.ID(); err == nil {
			return m, id, nil
		}
	}
	return nil, "", []*RunProblem{{Rule: errBlindPackage, File: w.PackageLabel(), Err: err}}
}

// existingDir returns dir if it exists, else "".
func existingDir(dir string) string {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir
	}
	return ""
}

// signatureProblems checks the detached SSHSIG beside every chain receipt.
func (w *World) signatureProblems(links []ChainLink, key ssh.PublicKey) []*RunProblem {
	var ps []*RunProblem
	for _, l := range links {
		body, _, err := w.readStateFile(l.File)
		if err != nil {
			ps = append(ps, &RunProblem{Rule: errSignature, File: w.stateRel(l.File), Err: err})
			continue
		}
		// The signature must cover the bytes the chain was checked on: a
		// receipt swapped between the chain's reading and this one would
		// otherwise pass with a chain of one content and signatures of
		// another.
		if got := pkgwalk.SHA256Hex(body); got != l.SHA256 {
			ps = append(ps, problem(errSignature, w.stateRel(l.File), "receipt bytes changed during verification: sha256 %s, the chain read %s", got, l.SHA256))
			continue
		}
		sig, _, err := w.readStateFile(l.File + ".sig")
		if err != nil {
			ps = append(ps, &RunProblem{Rule: errSignature, File: w.stateRel(l.File + ".sig"), Err: err})
			continue
		}
		if err := sign.Verify(key, ReceiptNamespace, body, sig); err != nil {
			ps = append(ps, &RunProblem{Rule: errSignature, File: w.stateRel(l.File + ".sig"), Err: err})
		}
	}
	return ps
}
