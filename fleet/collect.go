package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/cleanroom-dev/cleanroom/amber"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/fsx"
	"github.com/cleanroom-dev/cleanroom/internal/hosttree"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// The rules a collected run can break (Collected.Errs wrap them).
var (
	errMissingResult    = errors.New("no result for the run")        // the Job left nothing under its name
	errResultTree       = errors.New("result tree")                  // a symlink, special file or unreadable entry
	errCollected        = errors.New("already collected")            // the destination exists: never merged into
	errNotVerified      = errors.New("record does not verify")       // run verify / amber record verify failed
	errIdentityMismatch = errors.New("record pins another identity") // verified, but not the planned run
	errNoKey            = errors.New("no producer key")              // an AMBER record cannot be verified without one
)

// Verdicts of a collected run.
const (
	Verified = "verified"
	Refused  = "refused"
	Missing  = "missing"
)

// CollectOptions are what the verifiers need.
type CollectOptions struct {
	// Verify is passed to experiment.Verify for blind runs (Replay for a
	// COMPLETE run's RESULT, SignerKey for receipt signatures).
	Verify experiment.VerifyOptions
	// AmberPub is the producer's key that signs AMBER run records.
	AmberPub ssh.PublicKey
}

// Collected is one run's outcome.
type Collected struct {
	Name     string   `json:"name"`
	Kind     string   `json:"kind"`
	Verdict  string   `json:"verdict"`
	Dir      string   `json:"dir,omitempty"`    // where the result now is (into/<name>)
	Files    int      `json:"files"`            // files copied
	Status   string   `json:"status,omitempty"` // the run's status (blind) or terminal state (amber)
	Passed   []string `json:"passed,omitempty"` // the verifier's checks that passed
	Problems []string `json:"problems,omitempty"`
	Errs     []error  `json:"-"`
}

// CollectReport is the outcome of Collect, run by run in list order.
type CollectReport struct {
	From string      `json:"from"`
	Into string      `json:"into"`
	Runs []Collected `json:"runs"`
	// Unplanned lists entries of from that no run of the list names: not
	// collected, not verified, reported so nothing passes unseen.
	Unplanned []string `json:"unplanned,omitempty"`
}

// OK reports whether every run verified.
func (r *CollectReport) OK() bool {
	for _, c := range r.Runs {
		if c.Verdict != Verified {
			return false
		}
	}
	return true
}

// Collect copies each run's result directory from/<name> (what its Job
// left under /results: a world root for a blind run, run.json and
// run.json.sig for an AMBER run) to into/<name>, then verifies it there —
// experiment.Verify for a blind run, amber.VerifyRecordSignature for an
// AMBER run — and checks the verified record pins the planned identities
// and candidate. A run that fails is reported, never skipped; the error
// return is for what stops the whole collection (into unusable, ctx).
func Collect(ctx context.Context, runs []Run, from, into string, opt CollectOptions) (*CollectReport, error) {
	// The results are written where the operator points: never into /etc,
	// /usr, /proc, / or another system tree (hosttree.Check refuses it).
	abs, err := filepath.Abs(into)
	if err != nil {
		return nil, fmt.Errorf("results dir: %w", err)
	}
	if err := hosttree.Check(abs); err != nil {
		return nil, fmt.Errorf("results dir: %w", err)
	}
	if err := os.MkdirAll(into, 0o755); err != nil {
		return nil, fmt.Errorf("results dir: %w", err)
	}
	rep := &CollectReport{From: from, Into: into}
	for _, r := range runs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		c := Collected{Name: r.Name, Kind: r.Kind, Verdict: Verified}
		fail := func(verdict string, err error) {
			c.Verdict = verdict
			c.Errs = append(c.Errs, err)
			c.Problems = append(c.Problems, err.Error())
		}
		// The name is joined to both directories: a name that is not a
		// DNS-1123 label ("..", "a/b") could reach outside them.
		if err := checkName(r.Name); err != nil {
			fail(Refused, err)
			rep.Runs = append(rep.Runs, c)
			continue
		}
		dst := filepath.Join(into, r.Name)
		n, err := copyResult(filepath.Join(from, r.Name), dst)
		c.Files = n
		switch {
		case errors.Is(err, errMissingResult):
			fail(Missing, err)
		case err != nil:
			fail(Refused, err)
		default:
			c.Dir = dst
			// The result must name this plan entry: srel, bpkg and
			// candidate alone do not tell two runs apart that differ in
			// image or command.
			if err := checkEntry(r, dst); err != nil {
				fail(Refused, err)
			}
			switch r.Kind {
			case KindBlind:
				verifyBlind(ctx, r, dst, opt, &c, fail)
			case KindAmber:
				verifyAmber(r, dst, opt, &c, fail)
			}
		}
		rep.Runs = append(rep.Runs, c)
	}
	if ents, err := os.ReadDir(from); err == nil {
		for _, e := range ents {
			if !slices.ContainsFunc(runs, func(r Run) bool { return r.Name == e.Name() }) {
				rep.Unplanned = append(rep.Unplanned, e.Name())
			}
		}
	}
	return rep, nil
}

func verifyBlind(ctx context.Context, r Run, dst string, opt CollectOptions, c *Collected, fail func(string, error)) {
	w, err := experiment.OpenWorld(dst)
	if err != nil {
		fail(Refused, fmt.Errorf("%w: %w", errNotVerified, err))
		return
	}
	v, err := experiment.Verify(ctx, w, opt.Verify)
	if err != nil {
		fail(Refused, fmt.Errorf("%w: %w", errNotVerified, err))
		return
	}
	c.Status = string(v.Status)
	for _, ch := range v.Checks {
		if ch.OK && ch.Skipped == "" {
			c.Passed = append(c.Passed, ch.Name)
		}
	}
	for _, p := range v.Problems() {
		fail(Refused, fmt.Errorf("%w: %w", errNotVerified, p))
	}
	rec := v.Record
	if rec == nil {
		return
	}
	// A record that verifies but is pinned elsewhere is another run's
	// result under this run's name: a Job fed the wrong release or package.
	if rec.SpecReleaseID != r.Srel {
		fail(Refused, fmt.Errorf("%w: srel %s, planned %s", errIdentityMismatch, rec.SpecReleaseID, r.Srel))
	}
	if rec.BlindPackageID != r.Bpkg {
		fail(Refused, fmt.Errorf("%w: bpkg %s, planned %s", errIdentityMismatch, rec.BlindPackageID, r.Bpkg))
	}
	// The planned candidate must be a frozen candidate of the run, not the
	// reference and not a candidate of another name.
	if !slices.ContainsFunc(rec.Candidates(), func(a experiment.Adapter) bool { return a.Implementation == r.Candidate }) {
		fail(Refused, fmt.Errorf("%w: no candidate %q in the run (status %s)", errIdentityMismatch, r.Candidate, rec.Status))
	}
}

func verifyAmber(r Run, dst string, opt CollectOptions, c *Collected, fail func(string, error)) {
	if opt.AmberPub == nil {
		fail(Refused, fmt.Errorf("%w: an AMBER record is verified against its producer's key (--pub)", errNoKey))
		return
	}
	rec, err := amber.VerifyRecordSignature(filepath.Join(dst, amber.RecordFile), opt.AmberPub)
	if err != nil {
		fail(Refused, fmt.Errorf("%w: %w", errNotVerified, err))
		return
	}
	c.Status = rec.TerminalState
	c.Passed = amber.RecordSignatureChecks()
	if rec.ManifestSHA256 != r.CaseManifestSHA256 {
		fail(Refused, fmt.Errorf("%w: case manifest %s, planned %s", errIdentityMismatch, rec.ManifestSHA256, r.CaseManifestSHA256))
	}
	// provider/model splits at the first slash: compared joined, provider
	// "acme/model" with model "7" would pass for "acme" with "model/7".
	provider, model, _ := strings.Cut(r.Candidate, "/")
	if rec.Candidate.Provider != provider || rec.Candidate.Model != model {
		fail(Refused, fmt.Errorf("%w: candidate provider %q model %q, planned provider %q model %q",
			errIdentityMismatch, rec.Candidate.Provider, rec.Candidate.Model, provider, model))
	}
}

// copyResult copies the regular files under src into dst (which must not
// exist), publishing dst with one atomic rename; it returns the number of
// files copied.
func copyResult(src, dst string) (int, error) {
	fi, err := os.Lstat(src)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, fmt.Errorf("%w: %s", errMissingResult, src)
	case err != nil:
		return 0, fmt.Errorf("%w: %w", errResultTree, err)
	case !fi.IsDir():
		// A symlink here could point the copy at any directory on this host.
		return 0, fmt.Errorf("%w: %s is a %v, not a directory", errResultTree, src, fi.Mode().Type())
	}
	if _, err := os.Lstat(dst); err == nil {
		return 0, fmt.Errorf("%w: %s", errCollected, dst)
	}
	// The descriptor walk refuses symlinks, FIFOs, devices and mounts
	// anywhere below src: every file it lists was a regular file.
	files, err := pkgwalk.ListRegularFiles(src)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errResultTree, err)
	}
	// A symlink swapped in at src after the walk is refused, not followed
	// to a host directory (fsx.OpenDir: on gVisor too, where O_NOFOLLOW
	// alone would follow it).
	rootfd, err := fsx.OpenDir(src)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", errResultTree, err)
	}
	defer unix.Close(rootfd)
	tmp, err := durable.StageDir(dst)
	if err != nil {
		return 0, err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	for _, f := range files {
		if err := copyOne(rootfd, f, tmp); err != nil {
			return 0, err
		}
	}
	// RENAME_NOREPLACE: a result collected meanwhile is not replaced.
	if err := durable.CreateDir(tmp, dst, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return 0, fmt.Errorf("%w: %s", errCollected, dst)
		}
		return 0, err
	}
	done = true
	return len(files), nil
}

// copyOne copies one listed file, opened beneath the source root without
// following any link, and checks its bytes hash to what the walk saw.
func copyOne(rootfd int, f pkgwalk.File, tmp string) error {
	// O_NONBLOCK: a FIFO swapped in after the walk cannot hang the open
	// itself (the mode check below then refuses it). fsx.Open refuses a
	// mount crossed on the way, as the walk did: a bind mount swapped in
	// after the walk cannot bring a host file into the copy.
	fd, err := fsx.Open(rootfd, f.Path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errResultTree, f.Path, err)
	}
	in := os.NewFile(uintptr(fd), f.Path)
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errResultTree, f.Path, err)
	}
	// A FIFO or device swapped in after the walk would block the copy or
	// read a host device; the descriptor, not the walk, is believed.
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%w: %s became a %v", errResultTree, f.Path, st.Mode().Type())
	}
	// A hard link is a second name for these bytes, perhaps outside the
	// result tree (another run's result, a host file): refused like a
	// symbolic link, so only the run's own files are collected.
	if n := nlink(st); n != 1 {
		return fmt.Errorf("%w: %s has %d links (a hard link)", errResultTree, f.Path, n)
	}
	out := filepath.Join(tmp, filepath.FromSlash(f.Path))
	if err := durable.MkdirAll(filepath.Dir(out)); err != nil {
		return err
	}
	// Keep the executable bit (a frozen candidate binary is executed by
	// verify's checks); nothing else of the mode is carried over.
	mode := os.FileMode(0o644)
	if st.Mode()&0o111 != 0 {
		mode = 0o755
	}
	// Streamed, never held whole in memory (a Job can leave a file as
	// large as its volume); the staging directory is removed by the
	// caller if this fails, so a partial copy is never published.
	w, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return err
	}
	defer w.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(in, f.Size+1))
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errResultTree, f.Path, err)
	}
	// A file swapped between the walk and the copy is refused.
	if n != f.Size || hex.EncodeToString(h.Sum(nil)) != f.SHA256 {
		return fmt.Errorf("%w: %s changed while it was collected", errResultTree, f.Path)
	}
	// The umask must not decide the mode of collected evidence.
	if err := w.Chmod(mode); err != nil {
		return err
	}
	if err := w.Sync(); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(out))
}

func nlink(fi fs.FileInfo) uint64 {
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Nlink)
	}
	return 0
}
