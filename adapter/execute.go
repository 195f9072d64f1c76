package adapter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// Rules an adapter run can break. Each makes the measurement ABSENT.
var (
	// errNotRevealed: a candidate may receive challenge bytes only once the
	// receipt chain witnesses REVEALED.
	errNotRevealed = fault.New(fault.Refused, "candidate not run: the chain does not witness REVEALED")
	// errPackageDigest: the package files no longer hash to the frozen
	// package_digest.
	errPackageDigest = fault.New(fault.Refused, "package files do not match the frozen package_digest")
	// errBinaryDigest: the binary no longer hashes to the frozen
	// binary_digest (or is absent).
	errBinaryDigest = fault.New(fault.Refused, "binary does not match the frozen binary_digest")
	// errCommand: the command names something that is not a frozen file.
	errCommand = fault.New(fault.Refused, "command points outside the frozen files")
	// errReleasePackage: the release package (docs/spec/proof-wire) could
	// not be staged beside the adapter as the run verified it.
	errReleasePackage = errors.New("release package could not be staged")
	// errReservedPath: a frozen file occupies the staged view's I/O
	// directory, where the runner writes the challenges and reads the
	// output.
	errReservedPath = fault.New(fault.Refused, "a frozen file occupies the staged I/O directory "+ioDir+"/")
	// errExit: the adapter exited non-zero or was killed.
	errExit = fault.New(fault.Refused, "adapter failed")
	// errTimeout: the adapter exceeded its time limit.
	errTimeout = fault.New(fault.Refused, "adapter timed out")
	// errOutput: the output document is missing, not a regular file, too
	// large, or does not cross the strict reader.
	errOutput = fault.New(fault.Refused, "adapter output unreadable")
	// errScorerRefused: the scorer refused the document (schema, label,
	// release, fixture_root).
	errScorerRefused = fault.New(fault.Refused, "observation document refused by the scorer")
)

// Measurement states.
const (
	// Measured: the document was read and scored.
	Measured = "MEASURED"
	// Absent: the adapter ran (or was refused before running) and produced
	// no usable document. Never a zero.
	Absent = "ABSENT"
	// NotRun: a candidate before REVEALED; nothing was written for it.
	NotRun = "NOT_RUN"
)

// Measurement is what one adapter run produced.
type Measurement struct {
	Implementation string
	Role           string
	State          string
	// Rule is the refusal rule when State is not Measured; Err the full
	// cause (errors.Is works through it, e.g. evidence.ClassDuplicateName);
	// Reason its text.
	Rule   error
	Err    error
	Reason string
	// Runner and Sandboxed record how it was executed ("" if it was not).
	Runner    string
	Sandboxed bool
	Outcome   *Outcome
	// Observation is the document's exact bytes, set whenever the output
	// was read (also when the strict reader or the scorer then refused it:
	// the refused document is evidence too); Doc its strict reading and
	// Report its score, set only when Measured.
	Observation []byte
	Doc         any
	Report      *holdout.Report
}

// Options configure Execute.
type Options struct {
	// Revealed must be true only when the receipt chain witnesses
	// REVEALED (or COMPLETE); candidates are not run otherwise.
	Revealed bool
	// Runner executes the staged invocation (required).
	Runner Runner
	// Schemas and Challenges are what the output is scored against;
	// Scorer, when set, is the same set already validated (NewScorer).
	Schemas    *holdout.Schemas
	Challenges []*holdout.Challenge
	Scorer     *holdout.Scorer
	// ExpectRelease is the run's srel (the document must name it).
	ExpectRelease string
	Timeout       time.Duration
	Memory        int64
	// ScratchDir is where the staged view is created (default os.TempDir).
	ScratchDir string
	// Keep leaves the staged view on disk (for inspection) instead of
	// removing it.
	Keep bool
}

// ioDir is the staged directory holding the challenge file and the output.
const ioDir = "cleanroom-io"

// Staged paths of the two placeholders, relative to the view.
var (
	ChallengesPath = ioDir + "/challenges.json"
	OutPath        = ioDir + "/observations.json"
)

// CommandProblem checks, just before execution, that an adapter's command
// executes only frozen files — experiment.CommandProblems, the rule run
// verification applies — and that a candidate runs as its own frozen
// binary. interps are the world's permitted interpreters
// (experiment.Declaration.AdapterInterpreters). It returns nil when the
// command is sound.
func CommandProblem(a experiment.Adapter, interps []string) error {
	if a.Role == experiment.RoleCandidate && a.BinaryPath == nil {
		return fmt.Errorf("%s: a candidate runs as its own frozen binary, and none is recorded: %w", a.Implementation, errCommand)
	}
	if ds := experiment.CommandProblems(a, interps); len(ds) > 0 {
		return fmt.Errorf("%s: %s: %w", a.Implementation, strings.Join(ds, "; "), errCommand)
	}
	return nil
}

// Execute runs one adapter of the run against the challenges and scores its
// output. Every failure is returned as an ABSENT (or NOT_RUN) measurement
// with its rule; the error is non-nil only when cleanroom itself cannot
// proceed (no runner, no scratch space, ctx cancelled).
func Execute(ctx context.Context, w *experiment.World, a experiment.Adapter, opt Options) (*Measurement, error) {
	m := &Measurement{Implementation: a.Implementation, Role: a.Role}
	absent := func(rule error, format string, args ...any) (*Measurement, error) {
		err := fmt.Errorf(format, args...)
		if !errors.Is(err, rule) {
			err = fmt.Errorf("%w: %w", rule, err)
		}
		m.State, m.Rule, m.Err, m.Reason = Absent, rule, err, err.Error()
		return m, nil
	}
	// The gate comes first: before REVEALED a candidate gets nothing, not
	// even a staged directory with the challenge file in it.
	if a.Role != experiment.RoleReference && !opt.Revealed {
		m.State, m.Rule, m.Err, m.Reason = NotRun, errNotRevealed, errNotRevealed, errNotRevealed.Error()+"; the challenge file was not written"
		return m, nil
	}
	if opt.Runner == nil || opt.Schemas == nil {
		return nil, errors.New("adapter: Execute needs a runner and the package's schemas")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", a.Implementation, err)
	}
	decl, err := w.Declaration()
	if err != nil {
		return absent(errCommand, "%s: the world's declaration (its permitted interpreters) does not read: %w", a.Implementation, err)
	}
	if err := CommandProblem(a, decl.AdapterInterpreters); err != nil {
		return absent(errCommand, "%w", err)
	}
	// The I/O directory is the runner's: a frozen file there would stand
	// in for the challenges or the output, or make staging them fail
	// with an error that stops the whole measurement.
	frozen := slices.Clone(a.PackageFiles)
	if a.BinaryPath != nil {
		frozen = append(frozen, *a.BinaryPath)
	}
	for _, p := range frozen {
		if c := path.Clean(p); c == ioDir || strings.HasPrefix(c, ioDir+"/") {
			return absent(errReservedPath, "%s: frozen path %q", a.Implementation, p)
		}
	}
	dir, release, err := newStagingDir(opt.ScratchDir, a.Implementation)
	if err != nil {
		return nil, err
	}
	defer release()
	if !opt.Keep {
		defer os.RemoveAll(dir)
	}
	// Stage the package files, checking each byte copied against the freeze.
	staged, err := stage(w.Root, dir, a.PackageFiles)
	if err != nil {
		return absent(errPackageDigest, "staging the package files: %w", err)
	}
	if got := pkgwalk.PathListDigest(staged); got != a.PackageDigest {
		return absent(errPackageDigest, "%s: package files digest %s, frozen %s", a.Implementation, got, a.PackageDigest)
	}
	if a.BinaryPath != nil {
		bin, err := stage(w.Root, dir, []string{*a.BinaryPath})
		switch {
		case err != nil:
			return absent(errBinaryDigest, "staging the binary: %w", err)
		case len(bin) != 1 || bin[0].SHA256 == pkgwalk.Absent:
			return absent(errBinaryDigest, "%s: frozen binary %s is absent or not a file", a.Implementation, *a.BinaryPath)
		case a.BinaryDigest == nil || bin[0].SHA256 != *a.BinaryDigest:
			return absent(errBinaryDigest, "%s: binary %s hashes to %s, frozen %v", a.Implementation, *a.BinaryPath, bin[0].SHA256, deref(a.BinaryDigest))
		}
		// The staged copy is what runs; make it executable (and nothing else).
		if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(*a.BinaryPath)), 0o555); err != nil {
			return nil, err
		}
	}
	// The public release package, read by adapters for the corpus and the
	// release identity. Staged after the frozen files, never over them.
	if _, err := stage(w.Root, dir, []string{w.PackageLabel()}); err != nil {
		return absent(errReleasePackage, "staging %s: %w", w.PackageLabel(), err)
	}
	if err := os.MkdirAll(filepath.Join(dir, ioDir), 0o777); err != nil {
		return nil, err
	}
	chs := make([]any, len(opt.Challenges))
	for i, c := range opt.Challenges {
		chs[i] = c.Value
	}
	cb, err := evidence.Stringify(chs, " ")
	if err != nil {
		return nil, fmt.Errorf("rendering challenges: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(ChallengesPath)), cb, 0o444); err != nil {
		return nil, err
	}
	args := make([]string, len(a.Command))
	for i, x := range a.Command {
		switch x {
		case experiment.PlaceholderChallenges:
			args[i] = ChallengesPath
		case experiment.PlaceholderOut:
			args[i] = OutPath
		default:
			args[i] = x
		}
	}
	m.Runner, m.Sandboxed = opt.Runner.Name(), opt.Runner.Sandboxed()
	out, err := opt.Runner.Run(ctx, Invocation{Dir: dir, Args: args, Interpreted: a.BinaryPath == nil, Timeout: opt.Timeout, Memory: opt.Memory})
	if err != nil {
		// A cancelled measurement is not the adapter's failure: nothing is
		// recorded for it.
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("%s: %w", a.Implementation, cerr)
		}
		return absent(errExit, "%s did not run: %w", a.Implementation, err)
	}
	m.Outcome = &out
	switch {
	case out.Status == StatusTimeout:
		return absent(errTimeout, "%s timed out", a.Implementation)
	case out.Status != StatusExited || out.ExitCode != 0:
		return absent(errExit, "%s ended %s with status %d: %s", a.Implementation, out.Status, out.ExitCode, lastLine(out.Stderr))
	}
	b, err := readOutput(dir)
	if err != nil {
		return absent(errOutput, "%s: %w", a.Implementation, err)
	}
	m.Observation = b
	doc, err := evidence.Read(b)
	if err != nil {
		return absent(errOutput, "%s: output refused by the strict reader: %w", a.Implementation, err)
	}
	sc := opt.Scorer
	if sc == nil {
		if sc, err = holdout.NewScorer(opt.Schemas, opt.Challenges); err != nil {
			return nil, err
		}
	}
	rep, err := sc.Score(doc, holdout.Options{ExpectRelease: opt.ExpectRelease, ExpectImplementation: a.Implementation})
	if err != nil {
		return absent(errScorerRefused, "%s: %w", a.Implementation, err)
	}
	m.State, m.Observation, m.Doc, m.Report = Measured, b, doc, rep
	return m, nil
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// stage copies the listed world-relative paths (files or directories) from
// root into dir and returns their entries with the SHA-256 of the bytes
// actually copied. The listing comes from pkgwalk.DigestOfPaths (no symlink
// followed, special files refused); each file is then copied once through
// an os.Root with O_NOFOLLOW, hashed as it is copied and compared with the
// listing, so a file swapped between listing and copy is caught rather than
// staged.
func stage(root, dir string, paths []string) ([]pkgwalk.FileDigest, error) {
	_, files, err := pkgwalk.DigestOfPaths(root, paths)
	if err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	for _, f := range files {
		if f.SHA256 == pkgwalk.Absent {
			continue
		}
		if err := stageFile(r, f, dir); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// stageFile streams one listed file from r into dir (constant memory: a
// frozen binary may be large), hashing the bytes it writes, and fails
// unless they hash to the listing's digest.
func stageFile(r *os.Root, f pkgwalk.FileDigest, dir string) error {
	src, err := openNoFollow(r, f.Path)
	if err != nil {
		return err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return err
	}
	// Checked on the descriptor read: a FIFO or device would block or
	// never end.
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", f.Path)
	}
	dst := filepath.Join(dir, filepath.FromSlash(f.Path))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	// Create-exclusive: a later path never overwrites a staged one.
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(out, h), src)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("staging %s: %w", f.Path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
		return fmt.Errorf("%s changed while it was staged (%s, listed %s)", f.Path, got, f.SHA256)
	}
	return nil
}

// openNoFollow opens p beneath r for reading. O_NOFOLLOW: a symlink at p
// (planted by whoever controls the directory) is refused, not followed;
// O_NONBLOCK: a FIFO at p is refused by the caller's fstat instead of
// blocking the open until a writer appears.
func openNoFollow(r *os.Root, p string) (*os.File, error) {
	return r.OpenFile(path.Clean(p), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// readOutput reads the adapter's output beneath the staged view: the
// adapter controlled that directory, so a symlink there (to the operator's
// files, or a FIFO that never ends) is refused, and size is bounded by
// evidence.ReadOpenFile (the reader's own limit, refused as too-large).
func readOutput(dir string) ([]byte, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := openNoFollow(r, OutPath)
	if err != nil {
		return nil, fmt.Errorf("no output document: %w", err)
	}
	defer f.Close()
	b, _, err := evidence.ReadOpenFile(f)
	return b, err
}
