package amber

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sign"
)

// The four files of a case directory (AMBER-FORMATS "Case = four files").
const (
	BundleFile       = "base.bundle"
	OracleFile       = "oracle.pack"
	ManifestFile     = "manifest.yaml"
	ManifestSigFile  = "manifest.yaml.sig"
	maxPinnedFile    = 16 << 20
	maxManifestBytes = MaxYAML
)

// Rules a build refuses.
var (
	errShallowSource   = fault.New(fault.Refused, "source repository is shallow")
	errPartialSource   = fault.New(fault.Refused, "source repository is a partial clone")
	errSubmodule       = fault.New(fault.Refused, "submodule (gitlink) reachable from the cutoff: vendor it or the case is ineligible")
	errLFS             = fault.New(fault.Refused, "Git LFS content reachable from the cutoff: vendor it or the case is ineligible")
	errPinBytes        = fault.New(fault.Refused, "pinned file is not UTF-8 with LF line endings and no BOM")
	errCutoffRef       = fault.New(fault.Refused, "temporary ref "+BundleRef+" already exists in the source")
	errBuildArgument   = fault.New(fault.Unusable, "unusable build argument")
	errOutputExists    = fault.New(fault.Unusable, "output case directory already exists")
	errNotCommit       = fault.New(fault.Refused, "cutoff does not name a commit")
	errAllowlistFormat = fault.New(fault.Refused, "allowlist entry is not HOST:PORT")
	// errCutoffBeforeCommit: cutoff_utc is earlier than the cutoff commit's
	// committer date — the case would claim a cutoff its own base state
	// postdates. Committer dates are no mapping evidence (Distribution
	// §3.2), so a producer who knows better overrides it explicitly and the
	// override is recorded in the manifest's provenance.
	errCutoffBeforeCommit = fault.New(fault.Refused, "cutoff_utc is earlier than the cutoff commit's committer date")
)

// Provenance keys recording an explicit override of errCutoffBeforeCommit.
const (
	ProvenanceCutoffCommitterUTC = "cutoff_commit_committer_utc"
	ProvenanceCutoffOverride     = "cutoff_before_committer_date_override"
)

// BuildOptions are the inputs of a case build. The flags of `cleanroom
// amber case build` map onto them one to one.
type BuildOptions struct {
	Repo         string // source repository (a work tree or a bare repository)
	CutoffCommit string // the resolved cutoff commit (any name git resolves to a commit)
	CutoffUTC    string // the cutoff instant, "YYYY-MM-DDTHH:MM:SS[.f]Z"
	OracleDir    string // directory packed into oracle.pack
	Profile      string
	CaseID       string
	SpecFile     string // AMBER Core specification, pinned by spec_sha256
	ProtocolFile string // Distribution protocol, pinned by protocol_sha256
	Signer       *sign.Signer
	Producer     string   // producer identity
	Allow        []string // HOST:PORT egress allowlist; empty = full_isolation
	Out          string   // the case directory to create

	// Manifest fields the protocol leaves to the producer; each has a
	// documented default when empty.
	Provenance           map[string]any
	TopologyRule         string
	TopologyEvidence     string
	CutoffRule           string
	CutoffRuleOutput     []byte // output of the cutoff-rule script; default: "<commit>\n"
	CandidateInputBundle string
	AvailableInformation string
	EligibilityEvidence  string
	LeakProcedure        string
	LeakDate             string // default: the build date
	LeakResult           string // default: "passed"
	// CutoffOverride, when non-empty, is the producer's reason for a
	// cutoff_utc earlier than the cutoff commit's committer date; it and
	// the committer date are recorded in the manifest's provenance.
	CutoffOverride string
	Now            func() time.Time
}

// Defaults written when the producer gives no value (documented in the
// README's AMBER guide).
const (
	DefaultTopologyRule         = "cutoff commit named by the producer; the bundle carries exactly its history"
	DefaultTopologyEvidence     = "producer_declaration"
	DefaultCutoffRule           = "the producer-named commit, resolved with git rev-parse; script output is the full object id and a newline"
	DefaultCandidateInputBundle = "base.bundle: the history reachable from cutoff_commit (ref " + BundleRef + "), no tags, no notes"
	DefaultAvailableInformation = "base.bundle only; no issue, pull-request or tracker exports"
	DefaultEligibilityEvidence  = "mechanism_level_isolation_check"
	DefaultLeakProcedure        = "producer attestation at build time that the oracle was never published"
)

var reHostPort = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9.-]+:[0-9]{1,5}$|^\[[0-9A-Fa-f:.]+\]:[0-9]{1,5}$`)
})

// Case is what a build produced.
type Case struct {
	Dir            string
	Manifest       *Manifest
	ManifestSHA256 string
}

// PinFile returns the sha256 of a file pinned by spec_sha256 or
// protocol_sha256, refusing bytes that are not the canonical form (UTF-8,
// LF, no BOM): a checkout that rewrote line endings would pin bytes no
// other host has.
func PinFile(path string) (string, error) {
	b, err := readCapped(path, maxPinnedFile)
	if err != nil {
		return "", err
	}
	switch {
	case bytes.HasPrefix(b, []byte("\xef\xbb\xbf")):
		return "", fmt.Errorf("%s: %w: byte order mark", path, errPinBytes)
	case bytes.Contains(b, []byte("\r")):
		return "", fmt.Errorf("%s: %w: carriage return at byte %d", path, errPinBytes, bytes.IndexByte(b, '\r'))
	case !utf8.Valid(b):
		return "", fmt.Errorf("%s: %w: invalid UTF-8", path, errPinBytes)
	}
	return pkgwalk.SHA256Hex(b), nil
}

func (o *BuildOptions) check() error {
	var errs []error
	bad := func(f string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+f, append([]any{errBuildArgument}, a...)...))
	}
	if !reCaseID().MatchString(o.CaseID) {
		bad("case id %q must match %s", o.CaseID, reCaseID())
	}
	if !reUTC().MatchString(o.CutoffUTC) {
		bad("cutoff %q must match %s", o.CutoffUTC, reUTC())
	} else if _, err := time.Parse(time.RFC3339Nano, o.CutoffUTC); err != nil {
		// The schema's pattern has no calendar check; 2026-13-45 is no instant.
		bad("cutoff %q is not a calendar instant: %v", o.CutoffUTC, err)
	}
	if o.Profile == "" {
		bad("profile is empty")
	}
	if o.Producer == "" {
		bad("producer identity is empty")
	}
	if o.Signer == nil {
		bad("no signing key")
	}
	seen := map[string]bool{}
	for _, a := range o.Allow {
		if !reHostPort().MatchString(a) {
			errs = append(errs, fmt.Errorf("%w: %q", errAllowlistFormat, a))
		}
		if seen[a] {
			bad("allowlist entry %q given twice", a)
		}
		seen[a] = true
	}
	if o.LeakResult != "" && o.LeakResult != "passed" && o.LeakResult != "failed" {
		bad("leak-check result %q must be passed or failed", o.LeakResult)
	}
	if o.LeakDate != "" && !reDateTime().MatchString(o.LeakDate) {
		bad("leak-check date %q must match %s", o.LeakDate, reDateTime())
	}
	return errors.Join(errs...)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Build makes a case directory: base.bundle, oracle.pack, manifest.yaml and
// manifest.yaml.sig. Everything is written into a staging directory beside
// Out and renamed into place only when complete; Out must not exist.
func Build(ctx context.Context, o BuildOptions) (*Case, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	// git runs inside the source repository: every path it is given must
	// be absolute.
	var err error
	if o.Out, err = filepath.Abs(o.Out); err != nil {
		return nil, err
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	var specSHA string
	specSHA, err = PinFile(o.SpecFile)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	protoSHA, err := PinFile(o.ProtocolFile)
	if err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	gitVersion, err := GitVersion(ctx)
	if err != nil {
		return nil, err
	}
	commit, objFormat, err := checkSource(ctx, o.Repo, o.CutoffCommit)
	if err != nil {
		return nil, err
	}
	committed, err := cutoffAfterCommit(ctx, o, commit)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(o.Out); err == nil {
		return nil, fmt.Errorf("%s: %w", o.Out, errOutputExists)
	}
	stage, err := durable.StageDir(o.Out)
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(stage)
		}
	}()

	// The history scan for submodules and LFS runs beside the bundle and
	// the pack (they only read); its refusal still stops the build.
	vendored := make(chan error, 1)
	go func() { vendored <- checkVendored(ctx, o.Repo, commit) }()
	bundlePath := filepath.Join(stage, BundleFile)
	if err := createBundle(ctx, o.Repo, commit, bundlePath); err != nil {
		// The bundle's failure first; the scan's refusal, if any, too.
		return nil, errors.Join(err, <-vendored)
	}
	hdr, err := readBundleHeaderFile(bundlePath)
	if err != nil {
		return nil, fmt.Errorf("bundle just written: %w", err)
	}
	if hdr.RefOID != commit || hdr.RefName != BundleRef || hdr.ObjectFormat != objFormat {
		return nil, fmt.Errorf("bundle just written carries %s %s (%s), want %s %s (%s)", hdr.RefOID, hdr.RefName, hdr.ObjectFormat, commit, BundleRef, objFormat)
	}
	bundleSHA, bundleSize, err := hashFile(bundlePath, nil)
	if err != nil {
		return nil, err
	}

	packPath := filepath.Join(stage, OracleFile)
	oracleSHA, err := writePackFile(o.OracleDir, packPath)
	if verr := <-vendored; verr != nil {
		return nil, verr
	}
	if err != nil {
		return nil, err
	}

	cutoffOutput := o.CutoffRuleOutput
	if cutoffOutput == nil {
		cutoffOutput = []byte(commit + "\n")
	}
	prov := o.Provenance
	if len(prov) == 0 {
		prov = map[string]any{"source_type": "git_repository", "object_format": objFormat}
	}
	if o.CutoffOverride != "" && committed != "" {
		prov = maps.Clone(prov)
		prov[ProvenanceCutoffCommitterUTC] = committed
		prov[ProvenanceCutoffOverride] = o.CutoffOverride
	}
	allow := append([]string{}, o.Allow...)
	isolation := FullIsolation
	if len(allow) > 0 {
		isolation = Allowlisted
	}
	m := &Manifest{
		SchemaVersion:  SchemaVersion,
		CaseID:         o.CaseID,
		Profile:        o.Profile,
		Provenance:     prov,
		CutoffUTC:      o.CutoffUTC,
		CutoffCommit:   commit,
		TimeToTopology: TimeToTopology{Rule: or(o.TopologyRule, DefaultTopologyRule), EvidenceClass: or(o.TopologyEvidence, DefaultTopologyEvidence)},
		CutoffRule:     CutoffRule{Rule: or(o.CutoffRule, DefaultCutoffRule), ScriptOutputSHA256: pkgwalk.SHA256Hex(cutoffOutput)},
		SpecSHA256:     specSHA,
		ProtocolSHA256: protoSHA,
		Artifacts:      Artifacts{BaseBundleSHA256: bundleSHA, OraclePackSHA256: oracleSHA},
		Construction: Construction{
			GitVersion:          gitVersion,
			BundleFormatVersion: FormatVersion(fmt.Sprint(hdr.Version)),
			HashAlgorithm:       hdr.ObjectFormat,
			BundleSize:          bundleSize,
		},
		CandidateInputBundle:         or(o.CandidateInputBundle, DefaultCandidateInputBundle),
		AvailableInformationManifest: or(o.AvailableInformation, DefaultAvailableInformation),
		Eligibility:                  Eligibility{IsolationClass: isolation, EvidenceClass: or(o.EligibilityEvidence, DefaultEligibilityEvidence), EgressAllowlist: allow},
		Producer:                     Producer{Identity: o.Producer, SigningKeyID: o.Signer.Fingerprint()},
		LeakCheck: LeakCheck{
			Procedure:   or(o.LeakProcedure, DefaultLeakProcedure),
			LastRunDate: or(o.LeakDate, now().UTC().Format(time.DateOnly)),
			Result:      or(o.LeakResult, "passed"),
		},
		Retirement: Retirement{State: "active"},
	}
	mb, err := m.Encode()
	if err != nil {
		return nil, err
	}
	// What we write must read back under the same strict rules a receiver
	// applies; a manifest only we can read is no manifest.
	if _, _, err := ReadManifest(ManifestFile, mb); err != nil {
		return nil, fmt.Errorf("manifest written does not read back: %w", err)
	}
	sig, err := o.Signer.Sign(sign.NamespaceCaseManifest, mb)
	if err != nil {
		return nil, err
	}
	// git streams the bundle (writePackFile synced the pack); the manifest
	// and its signature go through the durable writer (fsynced there).
	if err := syncFile(filepath.Join(stage, BundleFile)); err != nil {
		return nil, err
	}
	if err := durable.Create(stage, ManifestFile, mb, 0o644); err != nil {
		return nil, err
	}
	if err := durable.Create(stage, ManifestSigFile, sig, 0o644); err != nil {
		return nil, err
	}
	if err := durable.CreateDir(stage, o.Out, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%s: %w", o.Out, errOutputExists)
		}
		return nil, err
	}
	done = true
	return &Case{Dir: o.Out, Manifest: m, ManifestSHA256: pkgwalk.SHA256Hex(mb)}, nil
}

// writePackFile writes the pack of dir to path (created exclusively) and
// returns its sha256, hashed as it is written, and synced.
func writePackFile(dir, path string) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	bw := bufio.NewWriter(io.MultiWriter(f, h))
	err = WritePack(dir, bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func readBundleHeaderFile(path string) (*BundleHeader, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseBundleHeader(f)
}

// checkSource refuses a shallow or partial-clone source and a cutoff whose
// history reaches a submodule or LFS content, and returns the full commit
// id and the repository's object format.
func checkSource(ctx context.Context, repo, cutoff string) (commit, objFormat string, err error) {
	out, err := git(ctx, repo, false, "rev-parse", "--is-shallow-repository", "--show-object-format")
	lines := strings.Fields(string(out))
	if err != nil || len(lines) != 2 {
		return "", "", fmt.Errorf("%s: not a git repository: %w", repo, err)
	}
	// A shallow clone's bundle has no prerequisite lines yet lacks history:
	// `git bundle verify` would call it complete.
	if lines[0] != "false" {
		return "", "", fmt.Errorf("%s: %w", repo, errShallowSource)
	}
	objFormat = lines[1]
	// A partial clone lacks objects it promises to fetch later; a bundle
	// made from it is missing them (or makes git fetch them from a forge).
	out, _ = git(ctx, repo, false, "config", "--get-regexp", `^(extensions\.partialclone|remote\..*\.promisor)$`)
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && (f[0] == "extensions.partialclone" || f[1] == "true") {
			return "", "", fmt.Errorf("%s: %w (%s=%s)", repo, errPartialSource, f[0], f[1])
		}
	}
	out, err = git(ctx, repo, false, "rev-parse", "--verify", "--quiet", "--end-of-options", cutoff+"^{commit}")
	if err != nil {
		return "", "", fmt.Errorf("%q: %w", cutoff, errNotCommit)
	}
	return strings.TrimSpace(string(out)), objFormat, nil
}

// cutoffAfterCommit refuses a cutoff_utc earlier than the committer date
// of the cutoff commit (errCutoffBeforeCommit) unless o.CutoffOverride
// gives the reason. It returns the committer date (UTC, RFC 3339) when the
// override was needed, "" otherwise.
func cutoffAfterCommit(ctx context.Context, o BuildOptions, commit string) (string, error) {
	out, err := git(ctx, o.Repo, false, "show", "-s", "--format=%ct", commit)
	if err != nil {
		return "", fmt.Errorf("reading the committer date of %s: %w", commit, err)
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return "", fmt.Errorf("committer date of %s: git printed %q, not seconds since the epoch", commit, strings.TrimSpace(string(out)))
	}
	committed := time.Unix(secs, 0).UTC()
	cutoff, err := time.Parse(time.RFC3339Nano, o.CutoffUTC)
	if err != nil {
		return "", fmt.Errorf("%w: cutoff %q is not a calendar instant", errBuildArgument, o.CutoffUTC)
	}
	if !cutoff.Before(committed) {
		return "", nil
	}
	stamp := committed.Format(time.RFC3339)
	if o.CutoffOverride == "" {
		return "", fmt.Errorf("%w: cutoff_utc %s, commit %s committed %s (give the reason with --cutoff-before-commit-date REASON to build it anyway; the override is recorded in the manifest's provenance)",
			errCutoffBeforeCommit, o.CutoffUTC, commit, stamp)
	}
	return stamp, nil
}

// lfsPointerPrefix starts every Git LFS pointer file.
const lfsPointerPrefix = "version https://git-lfs.github.com/spec/"

// checkVendored refuses a cutoff whose history adds a gitlink anywhere, or
// whose tree holds LFS pointers or an LFS filter attribute: the candidate
// would get a pointer, not the content the case was built on.
func checkVendored(ctx context.Context, repo, commit string) error {
	// Every tree change in the history, root commits included: a gitlink
	// shows as mode 160000 on either side.
	out, err := git(ctx, repo, false, "log", "--root", "--raw", "--no-renames", "--no-abbrev", "--format=", "-m", commit)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(out), "\n") {
		meta, p, ok := strings.Cut(l, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta)
		if len(f) >= 2 && (f[1] == "160000" || f[0] == ":160000") {
			return fmt.Errorf("%s: %w", p, errSubmodule)
		}
	}
	out, err = git(ctx, repo, false, "ls-tree", "-r", "-l", "-z", "--full-tree", commit)
	if err != nil {
		return err
	}
	var small []string // blob ids small enough to be LFS pointers
	var smallPaths []string
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, p, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta) // mode type oid size
		if len(f) != 4 {
			continue
		}
		if f[0] == "160000" {
			return fmt.Errorf("%s: %w", p, errSubmodule)
		}
		if filepath.Base(p) == ".gitattributes" || (f[3] != "-" && len(f[3]) <= 3) {
			small = append(small, f[2])
			smallPaths = append(smallPaths, p)
		}
	}
	if len(small) == 0 {
		return nil
	}
	blobs, err := catBlobs(ctx, repo, small)
	if err != nil {
		return err
	}
	for i, b := range blobs {
		if bytes.HasPrefix(b, []byte(lfsPointerPrefix)) {
			return fmt.Errorf("%s: %w (LFS pointer)", smallPaths[i], errLFS)
		}
		if filepath.Base(smallPaths[i]) == ".gitattributes" && bytes.Contains(b, []byte("filter=lfs")) {
			return fmt.Errorf("%s: %w (filter=lfs)", smallPaths[i], errLFS)
		}
	}
	return nil
}

// catBlobs reads blobs through one `git cat-file --batch`.
func catBlobs(ctx context.Context, repo string, oids []string) ([][]byte, error) {
	in := strings.Join(oids, "\n") + "\n"
	cmd := gitCmd(ctx, repo, false, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		return nil, &GitError{Args: []string{"cat-file", "--batch"}, Err: err}
	}
	r := bufio.NewReader(bytes.NewReader(out))
	res := make([][]byte, 0, len(oids))
	for range oids {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("git cat-file --batch: short output")
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("git cat-file --batch: %q", line)
		}
		// An unparsed or negative size would read nothing, or panic in make.
		size, err := strconv.Atoi(f[2])
		if err != nil || size < 0 {
			return nil, fmt.Errorf("git cat-file --batch: size in %q", line)
		}
		b := make([]byte, size+1)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, fmt.Errorf("git cat-file --batch: short object")
		}
		res = append(res, b[:size])
	}
	return res, nil
}

// createBundle writes the bundle of commit's history from one temporary
// ref (AMBER-FORMATS): never --all, so no tag, note or other branch leaks
// in; the ref is created only if absent and always deleted.
func createBundle(ctx context.Context, repo, commit, out string) (err error) {
	// The empty old value makes update-ref fail if the ref exists: a stale
	// or concurrent build's ref must not be silently repointed.
	if _, err := git(ctx, repo, false, "update-ref", BundleRef, commit, ""); err != nil {
		return fmt.Errorf("%w: %w", errCutoffRef, err)
	}
	defer func() {
		// A ref left behind refuses the next build (errCutoffRef above):
		// failing to delete it fails this one, which says why.
		if _, derr := git(context.WithoutCancel(ctx), repo, false, "update-ref", "-d", BundleRef, commit); derr != nil {
			err = errors.Join(err, fmt.Errorf("deleting the temporary ref %s: %w", BundleRef, derr))
		}
	}()
	_, err = git(ctx, repo, false, "-c", "pack.threads=1", "bundle", "create", "--version=3", "--quiet", out, BundleRef)
	return err
}
