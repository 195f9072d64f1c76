package experiment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/ident"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sign"
)

// TransitionOptions are common to every transition.
type TransitionOptions struct {
	// Signer, when set, writes a detached SSHSIG signature (namespace
	// ReceiptNamespace) beside the receipt, before the record is replaced.
	// The receipt's JSON bytes do not change.
	Signer *sign.Signer
}

// Transition is an acknowledged transition: the receipt and the record are
// durable when it is returned.
type Transition struct {
	From          *Record `json:"-"` // nil for a pin with no earlier run
	Record        *Record `json:"-"`
	RunID         string  `json:"run_id"`
	Status        Status  `json:"status"`
	PreviousRunID string  `json:"previous_run_id,omitempty"`
	Receipt       string  `json:"receipt"` // world-relative path
	ReceiptSHA256 string  `json:"receipt_sha256"`
	Signature     string  `json:"signature,omitempty"` // world-relative path of the .sig
	// Reused: the receipt already existed with exactly these bytes (a
	// transition retried after a crash between receipt and record, or one
	// identical to an earlier run's last transition).
	Reused bool `json:"reused,omitempty"`
	// Earlier lists the runs whose histories already passed through this
	// exact state: run_id is content-derived (TRVM-FORMATS §5.2), so the
	// same content is the same state, and its receipt is shared.
	Earlier []EarlierRun `json:"earlier_runs,omitempty"`
	// Record archived at governance/receipts/<run_id>/blind-run.json
	// (world-relative), so this state stays addressable after later runs.
	ArchivedRecord string `json:"archived_record"`
	// Superseded is the terminal run a pin replaced, if any (printed, never
	// persisted: pinning is a human act).
	Superseded string `json:"superseded,omitempty"`
}

// AdapterSpec describes the reference subject a pin records.
type AdapterSpec struct {
	Implementation string
	Command        []string // default: node <first package file> {{CHALLENGES}} {{OUT}}, or <binary> … with Binary
	PackageFiles   []string // world-relative
	Binary         string   // world-relative; empty for an interpreted reference
}

// DefaultReference is the reference subject of the TRVM world: the
// JavaScript adapter and the checker it reaches (freezing only the shell
// would freeze nothing).
func DefaultReference() AdapterSpec {
	return AdapterSpec{
		Implementation: "javascript",
		Command:        []string{"node", "governance/js_holdout_adapter.mjs", PlaceholderChallenges, PlaceholderOut},
		PackageFiles: []string{
			"governance/js_holdout_adapter.mjs", "governance/cas.mjs", "governance/nest_bundle.mjs",
			"governance/nest_check.mjs", "governance/derive_protocol.mjs", "governance/certificate.mjs",
			"governance/schema.mjs",
		},
	}
}

// ParseAdapterSpec reads a reference adapter described as data (the shape
// of a record adapter: implementation, role, command, package_files,
// binary_path, binary_digest, environment) through the strict reader. The
// digests are never taken from it: a pin recomputes them from the files.
func ParseAdapterSpec(b []byte, file string) (AdapterSpec, error) {
	o, err := evidence.ReadObject(b)
	if err != nil {
		return AdapterSpec{}, &RunProblem{Rule: errRecordBytes, File: file, Err: err}
	}
	allowed := []string{"implementation", "role", "command", "package_files", "binary_path", "binary_digest", "environment", "package_digest"}
	ps := []*RunProblem{}
	for _, n := range o.Names() {
		if !slices.Contains(allowed, n) {
			ps = append(ps, problem(errRunShape, file, "adapter carries an undeclared member %q", n))
		}
	}
	f := fieldReader{file: file, what: "adapter"}
	spec := AdapterSpec{Implementation: f.str(o, "implementation"), Command: f.strings(o, "command"), PackageFiles: f.strings(o, "package_files")}
	if bp := f.nullableStr(o, "binary_path"); bp != nil {
		spec.Binary = *bp
	}
	if role := f.str(o, "role"); o.Has("role") && role != RoleReference {
		ps = append(ps, problem(errRole, file, "a pinned adapter is the reference, not %q", role))
	}
	if env, _ := o.Get("environment"); env != nil {
		ps = append(ps, problem(errRunShape, file, "the reference carries no environment"))
	}
	ps = append(ps, f.ps...)
	if len(ps) > 0 {
		return spec, &VerifyError{What: "reading the reference adapter", Problems: ps}
	}
	return spec, nil
}

// PinOptions configure a pin.
type PinOptions struct {
	TransitionOptions
	Reference AdapterSpec
}

// FreezeOptions are the candidate's provenance: all of it is required.
type FreezeOptions struct {
	TransitionOptions
	Implementation string
	Files          []string // world-relative source files (or directories)
	Binary         string   // world-relative executable
	Command        []string // default: <binary> {{CHALLENGES}} {{OUT}}
	Toolchain      string
	Model          string
	ToolVersion    string
}

// RevealOptions configure the reveal.
type RevealOptions struct {
	TransitionOptions
	// Holdout is the challenge set to open; default governance/holdout. A
	// directory elsewhere is installed into governance/holdout when that is
	// absent (and removed again if it does not match); when present, the
	// set there is the one opened. Either way it must match the release's
	// commitment at governance/holdout.
	Holdout string
	// Reason is the receipt's note (default "challenge set opened").
	Reason string
}

// commit writes a transition from prev to next (the caller holds the state
// lock): the receipt first (create-exclusive, fsync'd, optionally signed),
// then the record (atomic replace, fsync'd). Nothing is acknowledged before
// both are durable.
func (w *World) commit(prev *Record, next *Record, note string, opt TransitionOptions) (*Transition, error) {
	next.RunID = next.ComputeRunID()
	rec, err := next.Bytes()
	if err != nil {
		return nil, fmt.Errorf("rendering the record: %w", err)
	}
	rc := NewReceipt(next, note, prev)
	body, err := rc.Bytes()
	if err != nil {
		return nil, fmt.Errorf("rendering the receipt: %w", err)
	}
	if err := mkdirDurable(w.ReceiptsDir()); err != nil {
		return nil, err
	}
	name := ReceiptFile(next.RunID, next.Status)
	t := &Transition{From: prev, Record: next, RunID: next.RunID, Status: next.Status,
		Receipt: w.stateRel(path.Join(ReceiptsDirName, name)), ReceiptSHA256: pkgwalk.SHA256Hex(body)}
	if prev != nil {
		t.PreviousRunID = prev.RunID
	}
	if have, _, err := w.readStateFile(path.Join(ReceiptsDirName, name)); err == nil {
		// Refused before anything is written: a refused transition changes
		// nothing in the state root.
		if !bytes.Equal(have, body) {
			return nil, receiptExists(name, t.Receipt)
		}
		// The state already has a receipt: say whose history it is on.
		t.Earlier = w.earlierRuns(next.RunID, next.Status)
	}
	// The whole record, archived beside the receipts (create-exclusive:
	// identical content is identical bytes), so any run stays addressable
	// once the record names another one.
	archDir := path.Join(ReceiptsDirName, next.RunID)
	if err := mkdirDurable(filepath.Join(w.ReceiptsDir(), next.RunID)); err != nil {
		return nil, err
	}
	t.ArchivedRecord = w.stateRel(path.Join(archDir, RecordFileName))
	if _, err := createExclusive(filepath.Join(w.ReceiptsDir(), next.RunID), RecordFileName, rec, t.ArchivedRecord); err != nil {
		return nil, err
	}
	existed, err := createExclusive(w.ReceiptsDir(), name, body, t.Receipt)
	if err != nil {
		return nil, err
	}
	t.Reused = existed
	if opt.Signer != nil {
		sig, err := opt.Signer.Sign(ReceiptNamespace, body)
		if err != nil {
			return nil, fmt.Errorf("signing %s: %w", t.Receipt, err)
		}
		if _, err := createExclusive(w.ReceiptsDir(), name+".sig", sig, t.Receipt+".sig"); err != nil {
			// An earlier signature of the same bytes (a retried transition)
			// stands if it verifies with this key.
			old, _, rerr := w.readStateFile(path.Join(ReceiptsDirName, name+".sig"))
			if rerr != nil || sign.Verify(opt.Signer.PublicKey(), ReceiptNamespace, body, old) != nil {
				return nil, err
			}
		}
		t.Signature = t.Receipt + ".sig"
	}
	if err := replaceAtomic(w.StateDir(), RecordFileName, rec); err != nil {
		return nil, err
	}
	return t, nil
}

// Pin starts a run (TRVM-FORMATS §5.4): a new record at PINNED selecting
// the tree's release, the walked package's bpkg, the instrument and the
// reference subject, and its PINNED receipt. Refused while a non-terminal
// run exists (errRunInProgress), when the package has any walk problem or
// leak (errBlindPackage), or when the release is not archived byte for byte
// (errRunReleaseNotArchived).
func Pin(ctx context.Context, w *World, opt PinOptions) (*Transition, error) {
	lk, err := w.lockState(ctx, true)
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	w.removeLeftovers()

	prior, err := w.ReadRecord()
	switch {
	case errors.Is(err, errNoRecord):
		prior = nil
	case err != nil:
		return nil, err
	case !prior.Status.Terminal():
		return nil, problem(errRunInProgress, w.stateRel(RecordFileName), "%s is %s; a run in flight is not replaced silently: abort it first", prior.RunID, prior.Status)
	}

	// The selected release must be archived byte for byte: a run is pinned
	// to an immutable release, never to the tree as it stands.
	relRaw, _, err := readRegularBeneath(w.PackageDir(), ReleaseFile)
	if err != nil {
		return nil, &RunProblem{Rule: errReleaseUnreadable, File: w.PackageLabel() + "/" + ReleaseFile, Err: err}
	}
	rel0, err := ParseRelease(relRaw)
	if err != nil {
		return nil, &RunProblem{Rule: errReleaseUnreadable, File: w.PackageLabel() + "/" + ReleaseFile, Err: err}
	}
	archive, _, err := readRegularBeneath(w.PackageDir(), ReleasesDir+"/"+rel0.SpecReleaseID+".json")
	if err != nil || !ident.Is(SrelPrefix, rel0.SpecReleaseID) || !bytes.Equal(archive, relRaw) {
		return nil, problem(errRunReleaseNotArchived, w.PackageLabel()+"/"+ReleaseFile, "%s is not archived byte for byte at %s/%s.json", rel0.SpecReleaseID, ReleasesDir, rel0.SpecReleaseID)
	}
	// The release must be what the package is: every digest recomputed
	// (and the holdout commitment, when the holdout is present).
	relRep, err := VerifyRelease(w.PackageDir(), existingDir(w.HoldoutDir()))
	if err != nil {
		return nil, &RunProblem{Rule: errReleaseUnreadable, File: w.PackageLabel() + "/" + ReleaseFile, Err: err}
	}
	if !relRep.OK {
		var ps []*RunProblem
		for _, c := range relRep.Checks {
			if !c.OK {
				ps = append(ps, problem(errReleaseNotVerified, w.PackageLabel()+"/"+ReleaseFile, "%s: recorded %s, recomputed %s %s %v", c.Name, c.Recorded, c.Recomputed, c.Detail, c.Missing))
			}
		}
		return nil, &VerifyError{What: "pin", Problems: ps}
	}
	rel := relRep.Release
	// A package with a walk problem or a leak is never pinned: the clean
	// room would deliver what the digest does not see, or what it must not.
	_, bpkg, ps := w.walkPackage()
	if len(ps) > 0 {
		return nil, &VerifyError{What: "pin", Problems: ps}
	}
	inst, _, err := w.instrumentDigest()
	if err != nil {
		return nil, fmt.Errorf("instrument digest: %w", err)
	}
	spec := opt.Reference
	if spec.Implementation == "" && len(spec.PackageFiles) == 0 {
		// The world's own reference (declared, or the reference
		// protocol's when it is here): never a guess that fails later.
		if spec, err = w.ReferenceSpec(); err != nil {
			return nil, err
		}
	}
	ref, err := w.adapterFrom(RoleReference, spec, nil)
	if err != nil {
		return nil, err
	}
	r := &Record{
		Type: RecordType, Status: StatusPinned, SpecReleaseID: rel.SpecReleaseID, BlindPackageID: bpkg,
		InstrumentDigest: inst, BlindContractRevision: float64(rel.ExperimentRevision), Adapters: []Adapter{ref},
	}
	r.RunID = r.ComputeRunID()
	// The pin must produce a record that verifies (chain aside: this
	// transition creates its first link), or it pins a trap.
	if err := w.postCheck(ctx, r, "pin"); err != nil {
		return nil, err
	}
	t, err := w.commit(nil, r, "pinned", opt.TransitionOptions)
	if err != nil {
		return nil, err
	}
	if prior != nil {
		t.Superseded = prior.RunID + " (" + string(prior.Status) + ")"
	}
	return t, nil
}

// adapterFrom builds an adapter from a spec, digesting its files and binary
// now. Every path must be world-relative and inside the world, and every
// listed file must exist.
func (w *World) adapterFrom(role string, spec AdapterSpec, env *Environment) (Adapter, error) {
	if !ValidLabel(spec.Implementation) {
		// A label carrying a path separator would carry the run's own
		// terminal evidence out of the archive.
		return Adapter{}, problem(errLabel, "", "%q is not an implementation label (%s)", spec.Implementation, labelRE())
	}
	if len(spec.PackageFiles) == 0 {
		return Adapter{}, problem(errProvenance, "", "%s: no package files: a subject with no source digest is named, not frozen", spec.Implementation)
	}
	for _, p := range append(slices.Clone(spec.PackageFiles), spec.Binary) {
		if p == "" {
			continue
		}
		if !w.containedPath(p) {
			return Adapter{}, &RunProblem{Rule: errOutsideWorld, Path: p, Detail: fmt.Sprintf("%s: %q must be a world-relative path inside %s", spec.Implementation, p, w.Root)}
		}
		if overlapsState(p) {
			return Adapter{}, &RunProblem{Rule: errSubjectInState, Path: p, Detail: fmt.Sprintf("%s: %q", spec.Implementation, p)}
		}
	}
	digest, files, err := pkgwalk.DigestOfPaths(w.Root, spec.PackageFiles)
	if err != nil {
		return Adapter{}, &RunProblem{Rule: errPackageDigest, Detail: spec.Implementation, Err: err}
	}
	for _, f := range files {
		if f.SHA256 == pkgwalk.Absent {
			return Adapter{}, &RunProblem{Rule: errPackageFileAbsent, File: f.Path, Path: f.Path, Detail: "declared by " + spec.Implementation}
		}
	}
	a := Adapter{Implementation: spec.Implementation, Role: role, PackageFiles: slices.Clone(spec.PackageFiles),
		PackageDigest: digest, Environment: env, Command: slices.Clone(spec.Command)}
	if spec.Binary != "" {
		_, bf, err := pkgwalk.DigestOfPaths(w.Root, []string{spec.Binary})
		if err != nil {
			return Adapter{}, &RunProblem{Rule: errBinaryDigest, Path: spec.Binary, Err: err}
		}
		if len(bf) != 1 || bf[0].SHA256 == pkgwalk.Absent || bf[0].Path != spec.Binary {
			return Adapter{}, &RunProblem{Rule: errBinaryRequired, Path: spec.Binary, Detail: fmt.Sprintf("%s: binary %q does not exist as one file", spec.Implementation, spec.Binary)}
		}
		a.BinaryPath, a.BinaryDigest = strPtr(spec.Binary), strPtr(bf[0].SHA256)
		if len(a.Command) == 0 {
			a.Command = []string{spec.Binary, PlaceholderChallenges, PlaceholderOut}
		}
	} else if len(a.Command) == 0 {
		d, err := w.Declaration()
		if err != nil {
			return Adapter{}, err
		}
		if len(d.AdapterInterpreters) == 0 {
			return Adapter{}, problem(errCommand, "", "%s: no command, no binary, and the world permits no interpreter to run %s", spec.Implementation, spec.PackageFiles[0])
		}
		a.Command = []string{d.AdapterInterpreters[0], spec.PackageFiles[0], PlaceholderChallenges, PlaceholderOut}
	}
	return a, nil
}

// postCheck verifies the record a transition is about to write, from the
// exact bytes it will write (chain aside), so no transition can produce a
// state from which the next one is refused.
func (w *World) postCheck(ctx context.Context, r *Record, what string) error {
	b, err := r.Bytes()
	if err != nil {
		return err
	}
	rep, err := Verify(ctx, w, VerifyOptions{RecordBytes: b, SkipChain: true, SkipPackage: true})
	if err != nil {
		return err
	}
	if ps := rep.Problems(); len(ps) > 0 {
		return &VerifyError{What: what + " (the record it would write does not verify)", Problems: ps}
	}
	return nil
}

// preCheck is the full live verification a transition runs first.
func (w *World) preCheck(ctx context.Context, what string, opt VerifyOptions) (*Record, *RunReport, error) {
	rep, err := Verify(ctx, w, opt)
	if err != nil {
		return nil, nil, err
	}
	if ps := rep.Problems(); len(ps) > 0 {
		return rep.Record, rep, &VerifyError{What: what + " (the run does not verify as it stands)", Problems: ps}
	}
	return rep.Record, rep, nil
}

// currentFor reads the record and checks the state machine permits
// status → to.
func (w *World) currentFor(to Status) (*Record, error) {
	r, err := w.ReadRecord()
	if err != nil {
		return nil, err
	}
	if !r.Status.CanMoveTo(to) {
		return nil, &TransitionError{From: r.Status, To: to}
	}
	return r, nil
}

// Freeze freezes the candidate (PINNED → CANDIDATE_FROZEN): its source
// digest, its binary digest and the recorded environment, all required
// (errProvenance). The run must verify as it stands first, and the record
// the freeze writes must verify too.
func Freeze(ctx context.Context, w *World, opt FreezeOptions) (*Transition, error) {
	lk, err := w.lockState(ctx, false)
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	w.removeLeftovers()
	r, err := w.currentFor(StatusCandidateFrozen)
	if err != nil {
		return nil, err
	}
	// A label is how an observation is attributed and how its archive file
	// is named: checked before anything else reads it.
	if !ValidLabel(opt.Implementation) {
		return nil, problem(errLabel, "", "%q is not an implementation label (%s)", opt.Implementation, labelRE())
	}
	if _, ok := r.Adapter(opt.Implementation); ok {
		return nil, problem(errDuplicateLabel, "", "this run already has an adapter called %q", opt.Implementation)
	}
	// Which agent, with what access, is part of what the result means: a
	// provenance field that may be empty is one that will be.
	var blank []string
	for _, f := range []struct{ name, v string }{{"toolchain", opt.Toolchain}, {"model", opt.Model}, {"tool_version", opt.ToolVersion}} {
		if strings.TrimSpace(f.v) == "" {
			blank = append(blank, f.name)
		}
	}
	if len(blank) > 0 {
		return nil, problem(errProvenance, "", "clean-room provenance is required and %v is empty", blank)
	}
	if len(opt.Files) == 0 {
		return nil, problem(errProvenance, "", "--files is required: a candidate with no source digest is named, not frozen")
	}
	// The executable is the subject the measurement runs, so it is not
	// optional.
	if opt.Binary == "" {
		return nil, problem(errBinaryRequired, "", "--binary is required: CANDIDATE_FROZEN is the source digest, the binary digest and the environment")
	}
	prev, _, err := w.preCheck(ctx, "freeze", VerifyOptions{})
	if err != nil {
		return nil, err
	}
	cand, err := w.adapterFrom(RoleCandidate, AdapterSpec{Implementation: opt.Implementation, Command: opt.Command,
		PackageFiles: opt.Files, Binary: opt.Binary}, &Environment{Toolchain: opt.Toolchain, Model: opt.Model, ToolVersion: opt.ToolVersion})
	if err != nil {
		return nil, err
	}
	next := prev.Clone()
	next.Adapters = append(next.Adapters, cand)
	next.Status = StatusCandidateFrozen
	next.RunID = next.ComputeRunID()
	if err := w.postCheck(ctx, next, "freeze"); err != nil {
		return nil, err
	}
	return w.commit(prev, next, "candidate "+opt.Implementation+" frozen", opt.TransitionOptions)
}

// Reveal opens the challenge set (CANDIDATE_FROZEN → REVEALED): refused
// from any other state — opening the challenges before the candidate's
// bytes are frozen is the one thing this state machine exists to prevent —
// and refused unless the run verifies in full and the holdout matches the
// release's commitment.
func Reveal(ctx context.Context, w *World, opt RevealOptions) (*Transition, error) {
	lk, err := w.lockState(ctx, false)
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	w.removeLeftovers()
	if _, err := w.currentFor(StatusRevealed); err != nil {
		return nil, err
	}
	prev, rep, err := w.preCheck(ctx, "reveal", VerifyOptions{})
	if err != nil {
		return nil, err
	}
	installed, err := w.checkHoldout(opt.Holdout, rep.Release)
	if err != nil {
		return nil, err
	}
	next := prev.Clone()
	next.Status = StatusRevealed
	reason := opt.Reason
	if reason == "" {
		reason = "challenge set opened"
	}
	t, err := w.commit(prev, next, reason, opt.TransitionOptions)
	if err != nil && installed {
		// The reveal was not acknowledged: the holdout goes back to where
		// it was (absent), so the world does not hold an opened set.
		_ = os.RemoveAll(w.HoldoutDir())
	}
	return t, err
}

// checkHoldout checks the challenge set against the release commitment
// (TRVM-FORMATS §3.5, paths relative to the package). A directory other
// than governance/holdout is installed there first (create-exclusive file
// by file) and removed again if it does not match. installed reports that
// it was installed by this call.
func (w *World) checkHoldout(dir string, rel *Release) (installed bool, err error) {
	dst := w.HoldoutDir()
	if dir != "" {
		abs, aerr := filepath.Abs(dir)
		if aerr != nil {
			return false, aerr
		}
		if real, rerr := filepath.EvalSymlinks(abs); rerr == nil {
			abs = real
		}
		// With governance/holdout already present (a reveal retried after a
		// crash, or a world that always held it) the set opened is the one
		// there, and it alone is checked against the commitment.
		if _, serr := os.Lstat(dst); abs != dst && errors.Is(serr, fs.ErrNotExist) {
			if ierr := installTree(abs, dst); ierr != nil {
				_ = os.RemoveAll(dst)
				return false, fmt.Errorf("installing the holdout from %s: %w", dir, ierr)
			}
			installed = true
		}
	}
	c, n, herr := HoldoutCommitment(w.PackageDir(), dst)
	if herr != nil || c != rel.HoldoutCommitment || n != rel.HoldoutEntries || c == HoldoutAbsent {
		if installed {
			_ = os.RemoveAll(dst)
		}
		return false, &RunProblem{Rule: errHoldoutCommitment, File: w.stateRel(HoldoutDirName),
			Detail: fmt.Sprintf("recomputed %s over %d entries and the release commits %s over %d", c, n, rel.HoldoutCommitment, rel.HoldoutEntries), Err: herr}
	}
	return installed, nil
}

// installTree copies the regular files of src into the new directory dst
// (create-exclusive, fsync'd); anything but a regular file or directory is
// refused. The tree is written into a staging directory beside dst and
// published whole with one no-replace rename: a crash during the copy
// leaves a staging directory (removed by the next transition), never a
// partial dst, which a retried reveal would take for the opened set and
// refuse against the commitment until someone removed it by hand.
func installTree(src, dst string) error {
	files, err := pkgwalk.ListRegularFiles(src)
	if err != nil {
		return err
	}
	stage, err := durable.StageDir(dst)
	if err != nil {
		return err
	}
	published := false
	defer func() {
		if !published {
			_ = os.RemoveAll(stage)
		}
	}()
	for _, f := range files {
		b, _, err := readRegularBeneath(src, f.Path)
		if err != nil {
			return err
		}
		if pkgwalk.SHA256Hex(b) != f.SHA256 {
			return fmt.Errorf("%s changed while it was copied", f.Path)
		}
		d := filepath.Join(stage, filepath.FromSlash(path.Dir(f.Path)))
		if err := mkdirDurable(d); err != nil {
			return err
		}
		if _, err := createExclusive(d, path.Base(f.Path), b, f.Path); err != nil {
			return err
		}
	}
	if err := durable.CreateDir(stage, dst, 0o755); err != nil {
		return err
	}
	published = true
	return nil
}

// Abort ends the run from any non-terminal state. It does not require the
// chain or the subjects to verify: a run you cannot abort when it is broken
// is a trap. The reason goes in the receipt's note.
func Abort(ctx context.Context, w *World, reason string, opt TransitionOptions) (*Transition, error) {
	lk, err := w.lockState(ctx, false)
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	w.removeLeftovers()
	r, err := w.currentFor(StatusAborted)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(reason) == "" {
		reason = "unspecified"
	}
	next := r.Clone()
	next.Status = StatusAborted
	return w.commit(r, next, "aborted: "+reason, opt)
}

// SubjectMeasurement is one frozen subject's measurement, as the holdout
// runner produced it.
type SubjectMeasurement struct {
	Implementation string
	Observation    []byte // the observation document's exact bytes
	Predicates     Predicates
}

// Measurement is what a completion records: every frozen subject measured,
// the interop comparison over all pairs, and its outstanding findings
// (which must be zero).
type Measurement struct {
	// RunID is the run_id of the record the subjects were measured under
	// (required).
	RunID    string
	Subjects []SubjectMeasurement
	Pairs    int
	Findings int
}

// CompleteOptions configure the COMPLETE transition.
type CompleteOptions struct {
	TransitionOptions
	// replay stands in for the holdout's scorer in this package's tests
	// (nil: replayRun, the frozen scorer).
	replay replayFunc
}

// Complete is the REVEALED → COMPLETE transition, for the holdout runner:
// it archives each observation at receipts/<run_id>/observations/<impl>.json
// and writes the RESULT (both create-exclusive, fsync'd), verifies that
// RESULT by replaying it with the frozen scorer, and only then writes the COMPLETE
// receipt and the record. If the RESULT does not verify, the unannounced
// files this call created are removed and nothing is asserted.
func Complete(ctx context.Context, w *World, m Measurement, opt CompleteOptions) (*Transition, *Result, error) {
	lk, err := w.lockState(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	defer lk.unlock()
	w.removeLeftovers()
	if _, err := w.currentFor(StatusComplete); err != nil {
		return nil, nil, err
	}
	prev, rep, err := w.preCheck(ctx, "complete", VerifyOptions{})
	if err != nil {
		return nil, nil, err
	}
	// The measurement was taken without the lock: if the record moved since
	// (aborted, re-pinned, another binary frozen under the same label), the
	// observations are of subjects this record does not freeze.
	if m.RunID != prev.RunID {
		return nil, nil, problem(errMeasuredRun, w.stateRel(RecordFileName), "the subjects were measured under %q and the record is now %s", m.RunID, prev.RunID)
	}
	if m.Findings != 0 {
		return nil, nil, problem(errResult, "", "%d outstanding unclassified finding(s): a disagreement is classified before a run completes", m.Findings)
	}
	rel := rep.Release
	next := prev.Clone()
	next.Status = StatusComplete
	next.RunID = next.ComputeRunID()

	res := &Result{RunID: next.RunID, PreviousRunID: prev.RunID, SpecReleaseID: next.SpecReleaseID,
		BlindPackageID: next.BlindPackageID, InstrumentDigest: next.InstrumentDigest,
		HoldoutCommitment: rel.HoldoutCommitment, HoldoutEntries: rel.HoldoutEntries,
		Interop: Interop{Measured: len(m.Subjects) >= 2, Pairs: m.Pairs, Findings: 0}}
	got := map[string]SubjectMeasurement{}
	for _, s := range m.Subjects {
		if _, dup := got[s.Implementation]; dup {
			return nil, nil, problem(errDuplicateLabel, "", "subject %q measured twice", s.Implementation)
		}
		got[s.Implementation] = s
	}
	for _, s := range m.Subjects {
		if _, ok := next.Adapter(s.Implementation); !ok {
			return nil, nil, problem(errResult, "", "a subject %q this run never froze was measured", s.Implementation)
		}
	}
	for _, a := range next.Adapters {
		s, ok := got[a.Implementation]
		if !ok {
			return nil, nil, problem(errResult, "", "frozen subject %q was not measured", a.Implementation)
		}
		// The foreign document crosses the byte boundary before it is
		// archived: permanent evidence must have one reading.
		if _, err := evidence.Read(s.Observation); err != nil {
			return nil, nil, &RunProblem{Rule: errResult, Detail: a.Implementation + "'s observation document refused", Err: err}
		}
		sum := pkgwalk.SHA256Hex(s.Observation)
		res.Subjects = append(res.Subjects, ResultSubject{Implementation: a.Implementation, Role: a.Role,
			PackageDigest: a.PackageDigest, BinaryDigest: a.BinaryDigest, ObservationSHA256: sum, Predicates: s.Predicates})
		res.Observations = append(res.Observations, ResultObservation{Implementation: a.Implementation,
			File: ObservationFile(next.RunID, a.Implementation), SHA256: sum})
	}
	resBytes, err := res.Bytes()
	if err != nil {
		return nil, nil, err
	}

	// Archive, then RESULT; remember what this call created so an
	// unverified RESULT can be withdrawn before anything announces it.
	var created []string
	undo := func() {
		for i := len(created) - 1; i >= 0; i-- {
			_ = os.Remove(created[i])
		}
	}
	runDir := filepath.Join(w.ReceiptsDir(), next.RunID)
	obsDir := filepath.Join(runDir, "observations")
	if _, err := os.Lstat(runDir); errors.Is(err, fs.ErrNotExist) {
		created = append(created, runDir, obsDir) // removed last-first by undo
	}
	if err := mkdirDurable(obsDir); err != nil {
		undo()
		return nil, nil, err
	}
	for _, a := range next.Adapters {
		name := a.Implementation + ".json"
		existed, err := createExclusive(obsDir, name, got[a.Implementation].Observation, w.stateRel(path.Join(ReceiptsDirName, ObservationFile(next.RunID, a.Implementation))))
		if err != nil {
			undo()
			return nil, nil, err
		}
		if !existed {
			created = append(created, filepath.Join(obsDir, name))
		}
	}
	existed, err := createExclusive(w.ReceiptsDir(), ResultFile(next.RunID), resBytes, w.stateRel(path.Join(ReceiptsDirName, ResultFile(next.RunID))))
	if err != nil {
		undo()
		return nil, nil, err
	}
	if !existed {
		created = append(created, filepath.Join(w.ReceiptsDir(), ResultFile(next.RunID)))
	}
	// The terminal claim is verified before it is asserted: the COMPLETE
	// receipt is what makes it a claim, and it is written only after.
	if ps := w.resultProblems(ctx, next, rel, nil, opt.replay); len(ps) > 0 {
		undo()
		return nil, nil, &VerifyError{What: "complete (the RESULT it would record does not verify)", Problems: ps}
	}
	t, err := w.commit(prev, next, "completed", opt.TransitionOptions)
	return t, res, err
}

// RunID reads a record file's content and returns the run_id it implies
// (for third parties: no world needed) and the run_id it records.
func RunID(b []byte, file string) (implied, recorded string, err error) {
	r, err := ParseRecord(b, file)
	if err != nil {
		return "", "", err
	}
	return r.ComputeRunID(), r.RunID, nil
}
