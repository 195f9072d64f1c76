package amber

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/capbuf"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sign"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// Isolation runs one command in an isolated container. The runner uses it
// twice: for the candidate (with the seal probe) and for the oracle's
// evaluation (without network, the oracle read-only at /package).
type Isolation interface {
	Run(ctx context.Context, spec ContainerSpec, stdout, stderr io.Writer) (*ContainerOutcome, error)
}

// ContainerSpec describes one isolated command.
type ContainerSpec struct {
	Args      []string
	Env       []string
	Workspace string // host directory mounted read-write at /workspace
	// PackageEmit writes the read-only /package: the isolation layer calls
	// it on a fresh tmpfs and seals that read-only before the command runs.
	PackageEmit func(dir string) error
	Allow       []string        // egress allowlist, IP:PORT; empty = full isolation
	Sealed      *netip.AddrPort // the sealed store, probed before the command starts
	Control     *netip.AddrPort // positive control (allowlisted runs)
	Timeout     time.Duration
	// Inspect, when the isolation layer walks the workspace after the
	// command (the sandbox's post-run scrub), is called for every entry
	// of it, once every process of the command is gone: the run reads
	// the workspace in that walk instead of walking it again
	// (ContainerOutcome.Walked).
	Inspect func(dirfd int, name, rel string, st *unix.Stat_t)
}

// ContainerOutcome is what the isolation layer reports. IsolationCheck and
// SealProbe are its records, copied into the run record as they are.
type ContainerOutcome struct {
	IsolationCheck json.RawMessage
	SealProbe      json.RawMessage
	// PreStart is non-empty when the mechanism check or the seal probe
	// failed: the command never ran (invalid_infrastructure).
	PreStart string
	Status   string // exited, signaled, timeout, oom
	ExitCode int
	// Walked: the layer's post-run walk called ContainerSpec.Inspect for
	// every entry of the workspace. Unwalked: why that walk stopped
	// before the end ("" if it did not). Neither: the layer walked
	// nothing, and the run walks the workspace itself.
	Walked   bool
	Unwalked string
}

// errSandboxUnavailable: no isolation layer can run here.
var errSandboxUnavailable = fault.New(fault.NoIsolation, "sandbox not available")

// Rules the runner enforces before anything runs.
var (
	errRunArgument = fault.New(fault.Unusable, "unusable run argument")
)

// The oracle's evaluator: a shell script at the root of oracle.pack, run as
// `/bin/sh /package/evaluate /workspace` in its own container after the
// candidate has ended. It prints one JSON object of criterion → number on
// stdout; a run succeeds when every criterion is 1.
const (
	OracleEvaluator    = "evaluate"
	maxOracleOutput    = 1 << 20
	defaultEvalTimeout = 10 * time.Minute
)

// maxArtifactFiles and maxArtifactBytes bound what the artifact list
// hashes (variables for the tests): the bytes by the files' sizes, so
// that a sparse file the candidate made in an instant (truncate -s 16T)
// cannot keep the host hashing zeros for hours.
var (
	maxArtifactFiles       = 100_000
	maxArtifactBytes int64 = 4 << 30
)

// errWorkspaceShape: the candidate left a workspace the host cannot list
// for its artifacts — more files than maxArtifactFiles or bytes than
// maxArtifactBytes, a path longer than the kernel resolves, an entry it
// may not read. It is the candidate's act (protocol_violation): were it
// signed invalid_infrastructure, a candidate could blame the
// infrastructure for its own run at will.
var errWorkspaceShape = errors.New("workspace the artifact list cannot take")

// RunOptions are the inputs of one AMBER run.
type RunOptions struct {
	CaseDir   string
	Producer  ssh.PublicKey // verifies the case manifest
	IndexDir  string
	IndexVKey string       // trusted index key; empty = the index's own index.pub
	Signer    *sign.Signer // signs the run record (the producer's key)
	Provider  string
	Model     string
	Args      []string
	Env       []string
	Sealed    netip.AddrPort // the sealed store's address (where oracle.pack is served)
	Control   *netip.AddrPort
	Out       string // run directory to create
	Timeout   time.Duration
	Isolation Isolation
	Now       func() time.Time
	// Progress, when set, is told each long step as it starts and ends
	// (one line each, no newline), for an operator watching stderr.
	Progress func(line string)
}

// progress reports a step to o.Progress, if set.
func (o *RunOptions) progress(format string, a ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, a...))
	}
}

// step reports a step's start and returns the function that reports its
// end with the time it took.
func (o *RunOptions) step(what string) func(outcome string) {
	o.progress("%s…", what)
	start := time.Now()
	return func(outcome string) {
		o.progress("%s: %s (%s)", what, outcome, time.Since(start).Round(time.Millisecond))
	}
}

// RunResult is a finished run.
type RunResult struct {
	Dir    string
	Record *RunRecord
	Bytes  []byte
}

func (o *RunOptions) now() time.Time {
	if o.Now != nil {
		return o.Now().UTC()
	}
	return time.Now().UTC()
}

func utc(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// Run performs one AMBER run (Distribution §7):
//
//  1. verifies the case by possession (signature, bundle, oracle);
//  2. consults the index: the case must be present and its latest entry
//     active, naming the manifest's hashes;
//  3. clones base.bundle into a fresh workspace (no remote, no credentials);
//  4. runs the candidate through the isolation layer, which checks the
//     network mechanism and probes the sealed store before the command
//     starts;
//  5. after the candidate ended, re-checks the sealed store, hashes the
//     artifacts, and evaluates the oracle in a separate container;
//  6. writes the signed run record with the terminal state.
//
// Refusals before anything ran (a bad case, an unindexed or retired case)
// return an error and no record. Everything after step 3 ends in a record.
func Run(ctx context.Context, o RunOptions) (*RunResult, error) {
	if o.Isolation == nil {
		return nil, errSandboxUnavailable
	}
	if len(o.Args) == 0 || o.Provider == "" || o.Model == "" || o.Signer == nil || !o.Sealed.IsValid() {
		return nil, fmt.Errorf("%w: a command, a provider/model, a signing key and the sealed store's address are required", errRunArgument)
	}
	var err error
	if o.Out, err = filepath.Abs(o.Out); err != nil {
		return nil, err
	}
	// git runs in the workspace: the case path must not be relative.
	if o.CaseDir, err = filepath.Abs(o.CaseDir); err != nil {
		return nil, err
	}
	done := o.step("verifying the case " + o.CaseDir)
	rep, err := VerifyCase(ctx, o.CaseDir, o.Producer, VerifyOptions{})
	if err != nil {
		done("refused")
		return nil, err
	}
	done("verified")
	m, msha := rep.Manifest, rep.ManifestSHA256
	ix, err := LoadIndex(o.IndexDir, o.IndexVKey)
	if err != nil {
		return nil, err
	}
	// The index is consulted before every run: a case not yet published
	// (its oracle hash not preregistered) or retired never runs.
	e, _, ok := ix.Latest(m.CaseID)
	if !ok {
		return nil, &CheckError{Check: CheckIndexState, File: o.IndexDir, Err: fmt.Errorf("%q: %w", m.CaseID, errNotIndexed)}
	}
	if e.Retired() {
		return nil, &CheckError{Check: CheckIndexState, File: o.IndexDir, Err: fmt.Errorf("%q: %w (%s)", m.CaseID, errRetired, e.State)}
	}
	if *e != *EntryFromManifest(m, msha) {
		return nil, &CheckError{Check: CheckIndexState, File: o.IndexDir, Err: fmt.Errorf("%w: the index entry of %q names other hashes than the case", errMismatch, m.CaseID)}
	}
	proof, err := ix.Prove(m.CaseID)
	if err != nil {
		return nil, err
	}
	if m.Eligibility.IsolationClass == Allowlisted && o.Control == nil {
		return nil, fmt.Errorf("%w: an allowlisted case needs a positive control (--control)", errRunArgument)
	}
	if err := os.Mkdir(o.Out, 0o700); err != nil {
		return nil, fmt.Errorf("run directory: %w", err)
	}
	root := ix.Checkpoint.Root
	rec := &RunRecord{
		Type: RecordType, CaseID: m.CaseID, ManifestSHA256: msha,
		IndexVersion: ix.Checkpoint.Size, IndexRoot: encodeB64(root[:]),
		RetirementCheck: RetirementCheck{State: "active", CheckedAt: utc(o.now())},
		Candidate:       Candidate{Provider: o.Provider, Model: o.Model},
		Scores:          map[string]float64{},
		Artifacts:       []Artifact{},
		Comparability:   ComparabilityOf(m),
		IndexProof:      string(proof),
		SealProbe:       json.RawMessage("null"),
		IsolationCheck:  json.RawMessage("null"),
	}
	finish := func(state, reason string) (*RunResult, error) {
		rec.TerminalState, rec.Reason = state, reason
		if rec.StartedUTC == "" {
			rec.StartedUTC = utc(o.now())
		}
		rec.FinishedUTC = utc(o.now())
		b, err := WriteRecord(o.Out, rec, o.Signer)
		if err != nil {
			return nil, err
		}
		return &RunResult{Dir: o.Out, Record: rec, Bytes: b}, nil
	}

	ws := filepath.Join(o.Out, "workspace")
	done = o.step("checking out base.bundle into " + ws)
	if err := checkoutBundle(ctx, filepath.Join(o.CaseDir, BundleFile), m.Artifacts.BaseBundleSHA256, m.CutoffCommit, ws); err != nil {
		done("failed")
		return finish(StateInvalidInfrastructure, "workspace checkout failed: "+err.Error())
	}
	done("done")
	before, err := snapshot(ws)
	if err != nil {
		return finish(StateInvalidInfrastructure, "workspace snapshot failed: "+err.Error())
	}
	// The workspace after the run, read in the isolation layer's own
	// post-run walk: one walk hashes the artifacts and judges what the
	// evaluator would read.
	after, err := newWalk(ws, before)
	if err != nil {
		return finish(StateInvalidInfrastructure, "opening the workspace: "+err.Error())
	}
	defer after.close()
	stdout, serr := os.Create(filepath.Join(o.Out, "candidate.stdout"))
	stderr, eerr := os.Create(filepath.Join(o.Out, "candidate.stderr"))
	if serr != nil || eerr != nil {
		return nil, errors.Join(serr, eerr)
	}
	spec := ContainerSpec{Args: o.Args, Env: o.Env, Workspace: ws, Allow: m.Eligibility.EgressAllowlist,
		Sealed: &o.Sealed, Control: o.Control, Timeout: o.Timeout, Inspect: after.visit}
	rec.StartedUTC = utc(o.now())
	done = o.step("running the candidate in the sandbox")
	out, runErr := o.Isolation.Run(ctx, spec, stdout, stderr)
	switch {
	case out != nil && out.PreStart != "":
		done("never started: " + out.PreStart)
	case runErr != nil:
		done("the sandbox failed")
	case out != nil:
		done(fmt.Sprintf("%s (exit %d)", out.Status, out.ExitCode))
	}
	// The record names these files by sha256: they must be on disk before
	// it is, or a crash leaves a record whose artifacts do not hash.
	for _, f := range []*os.File{stdout, stderr} {
		if err := errors.Join(f.Sync(), f.Close()); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name(), err)
		}
	}
	if out != nil {
		if len(out.IsolationCheck) > 0 {
			rec.IsolationCheck = out.IsolationCheck
		}
		if len(out.SealProbe) > 0 {
			rec.SealProbe = out.SealProbe
		}
	}
	switch {
	case ctx.Err() != nil:
		// A signal (or the caller) stopped the run: the container is gone
		// and its clean-ups ran; the record says why nothing was scored.
		return finish(StateInvalidInfrastructure, "the run was interrupted: "+context.Cause(ctx).Error())
	case out != nil && out.PreStart != "":
		// A failed mechanism check or an answering sealed store: the
		// candidate never started.
		return finish(StateInvalidInfrastructure, "before the candidate started: "+out.PreStart)
	case runErr != nil:
		return finish(StateInvalidInfrastructure, "the sandbox failed: "+runErr.Error())
	}
	// The seal must be intact after the candidate ran: the sealed oracle
	// and the signed manifest are byte for byte what was verified.
	if err := recheckSeal(o.CaseDir, m, msha); err != nil {
		return finish(StateProtocolViolation, "the sealed store changed during the run: "+err.Error())
	}
	switch {
	case out.Walked:
	case out.Unwalked != "":
		// The layer's walk stopped (nesting too deep, an entry it could
		// not open): what lies beyond is unread, the candidate's act.
		after.unwalked(out.Unwalked)
	default:
		after.walk()
	}
	arts, err := after.artifacts()
	if errors.Is(err, errWorkspaceShape) {
		return finish(StateProtocolViolation, "the candidate's workspace cannot be listed: "+err.Error())
	}
	if err != nil {
		return finish(StateInvalidInfrastructure, "hashing artifacts failed: "+err.Error())
	}
	for _, f := range []string{"candidate.stdout", "candidate.stderr"} {
		sum, _, err := hashFile(filepath.Join(o.Out, f), nil)
		if err != nil {
			return nil, err
		}
		arts = append(arts, Artifact{Path: f, SHA256: sum})
	}
	rec.Artifacts = arts
	// What the evaluator reads is the candidate's: a FIFO there would stall
	// it for its whole timeout and a link to /dev/zero feed it forever, and
	// either would be signed as the infrastructure's failure. It is the
	// candidate's act, and is judged so before the evaluator starts.
	if err := after.input; err != nil {
		return finish(StateProtocolViolation, "the workspace holds what no evaluator reads: "+err.Error())
	}
	done = o.step("evaluating the oracle")
	scores, oracleOut, err := evaluate(ctx, o, ws)
	if err != nil {
		done("failed")
	} else {
		done("scored")
	}
	if oracleOut != nil {
		if werr := durable.Create(o.Out, "oracle.stdout", oracleOut, 0o600); werr == nil {
			rec.Artifacts = append(rec.Artifacts, Artifact{Path: "oracle.stdout", SHA256: pkgwalk.SHA256Hex(oracleOut)})
		}
	}
	if err != nil {
		return finish(StateInvalidInfrastructure, "the oracle could not score the run: "+err.Error())
	}
	rec.Scores = scores
	reason := fmt.Sprintf("candidate %s (exit %d)", out.Status, out.ExitCode)
	for _, v := range scores {
		if v != 1 {
			return finish(StateValidFailure, reason+"; not every criterion scored 1")
		}
	}
	if len(scores) == 0 {
		return finish(StateInvalidInfrastructure, reason+"; the oracle reported no criterion")
	}
	return finish(StateValidSuccess, reason+"; every criterion scored 1")
}

// checkoutBundle makes a fresh repository at dir holding only the bundle's
// history, the cutoff commit checked out on branch main. No remote is
// configured and no configuration but git's defaults applies, so the
// workspace carries no forge credentials. git reads a private copy of the
// bundle whose sha256 is wantSHA256.
func checkoutBundle(ctx context.Context, bundle, wantSHA256, commit, dir string) error {
	// The case was verified from a copy that is gone: fetching from the
	// case directory's file would read whatever is there now (a bundle
	// swapped in after the verification, carrying history past the cutoff).
	scratch, err := os.MkdirTemp("", "cleanroom-bundle-run-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	private := filepath.Join(scratch, BundleFile)
	sum, _, err := copyHashed(bundle, private)
	if err != nil {
		return err
	}
	if sum != wantSHA256 {
		return fmt.Errorf("%w: %s sha256 %s, manifest %s", errMismatch, bundle, sum, wantSHA256)
	}
	if _, err := git(ctx, "", true, "init", "--quiet", "-b", "main", dir); err != nil {
		return err
	}
	if _, err := git(ctx, dir, true, "-c", "transfer.fsckObjects=true", "fetch", "--quiet", "--no-tags", private, BundleRef+":"+BundleRef); err != nil {
		return err
	}
	if _, err := git(ctx, dir, true, "-c", "core.hooksPath=/dev/null", "checkout", "--quiet", "-B", "main", BundleRef); err != nil {
		return err
	}
	if _, err := git(ctx, dir, true, "update-ref", "-d", BundleRef); err != nil {
		return err
	}
	out, err := git(ctx, dir, true, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(out)) != commit {
		return fmt.Errorf("%w: workspace HEAD %s, cutoff %s", errMismatch, bytes.TrimSpace(out), commit)
	}
	return nil
}

func recheckSeal(caseDir string, m *Manifest, msha string) error {
	sum, _, err := hashFile(filepath.Join(caseDir, OracleFile), nil)
	if err != nil {
		return err
	}
	if sum != m.Artifacts.OraclePackSHA256 {
		return fmt.Errorf("oracle.pack sha256 %s, manifest %s", sum, m.Artifacts.OraclePackSHA256)
	}
	sum, _, err = hashFile(filepath.Join(caseDir, ManifestFile), nil)
	if err != nil {
		return err
	}
	if sum != msha {
		return fmt.Errorf("manifest.yaml sha256 %s, verified %s", sum, msha)
	}
	return nil
}

// evaluate runs the evaluator in a fresh container: the oracle unpacked
// (its sha256 checked again on the bytes unpacked) into a sealed read-only
// tmpfs at /package, the candidate's workspace at /workspace, no network.
// The oracle never touches the host's disk outside the case directory.
func evaluate(ctx context.Context, o RunOptions, ws string) (map[string]float64, []byte, error) {
	m, _, err := VerifySignedManifest(o.CaseDir, o.Producer)
	if err != nil {
		return nil, nil, err
	}
	emit := func(dir string) error {
		if err := extractPack(filepath.Join(o.CaseDir, OracleFile), m.Artifacts.OraclePackSHA256, dir); err != nil {
			return err
		}
		// The evaluator must be the pack's own regular file: a pack cannot
		// carry a link, and a missing script must not fall back to anything.
		if fi, err := os.Lstat(filepath.Join(dir, OracleEvaluator)); err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("oracle.pack has no %s script", OracleEvaluator)
		}
		return nil
	}
	stdout, stderr := &capbuf.Buffer{Max: maxOracleOutput}, &capbuf.Buffer{Max: 64 << 10}
	out, err := o.Isolation.Run(ctx, ContainerSpec{
		Args: []string{"/bin/sh", "/package/" + OracleEvaluator, "/workspace"}, Workspace: ws, PackageEmit: emit,
		Timeout: defaultEvalTimeout,
	}, stdout, stderr)
	if err != nil {
		return nil, stdout.Bytes(), fmt.Errorf("evaluator container: %w", err)
	}
	if out.PreStart != "" || out.Status != "exited" || out.ExitCode != 0 {
		return nil, stdout.Bytes(), fmt.Errorf("evaluator %s with exit %d: %s %s", out.Status, out.ExitCode, out.PreStart, strings.TrimSpace(stderr.String()))
	}
	if stdout.Truncated() {
		return nil, stdout.Bytes(), fmt.Errorf("evaluator output over %d bytes", maxOracleOutput)
	}
	obj, err := evidence.ReadObject(bytes.TrimSpace(stdout.Bytes()))
	if err != nil {
		return nil, stdout.Bytes(), fmt.Errorf("evaluator output: %w", err)
	}
	scores := map[string]float64{}
	for _, n := range obj.Names() {
		v, _ := obj.Get(n)
		f, ok := v.(float64)
		if !ok || n == "" {
			return nil, stdout.Bytes(), fmt.Errorf("evaluator output: criterion %q is not a number", n)
		}
		scores[n] = f
	}
	return scores, stdout.Bytes(), nil
}

// extractPack unpacks oracle.pack into dir (which must be empty), hashing
// the bytes it reads and refusing them unless they are the pinned ones.
func extractPack(path, want, dir string) error {
	f, _, err := openRegular(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	entries, err := ReadPack(io.TeeReader(f, h))
	if err != nil {
		return err
	}
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%w: oracle.pack sha256 %s, manifest %s", errMismatch, got, want)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	// ReadPack refused absolute and dot-dot names; os.Root keeps every
	// write beneath dir even so.
	for _, e := range entries {
		if e.Dir {
			if err := root.Mkdir(e.Name, 0o755); err != nil {
				return err
			}
			continue
		}
		w, err := root.OpenFile(e.Name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, os.FileMode(e.Mode))
		if err != nil {
			return err
		}
		if _, err := w.Write(e.Data); err != nil {
			w.Close()
			return err
		}
		if err := w.Close(); err != nil {
			return err
		}
	}
	return os.Chmod(dir, 0o755)
}
