package amber

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence/schema"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sign"
	"golang.org/x/crypto/ssh"
)

// Named checks of `amber case verify`, in the order they run.
const (
	CheckManifestSignature = "manifest-signature"
	CheckManifestRules     = "manifest-rules"
	CheckManifestSchema    = "manifest-schema"
	CheckSigningKeyID      = "signing-key-id"
	CheckBundleHeader      = "bundle-header"
	CheckBundleSHA256      = "bundle-sha256"
	CheckBundleSize        = "bundle-size"
	CheckGitBundleVerify   = "git-bundle-verify"
	CheckGitFetchFsck      = "git-fetch-fsck"
	CheckGitFsck           = "git-fsck"
	CheckOracleSHA256      = "oracle-sha256"
	CheckOraclePack        = "oracle-pack-form"
)

// errMismatch is the rule behind every hash, size or identity check: the
// bytes are not the ones the signed manifest names.
var errMismatch = fault.New(fault.Refused, "does not match the signed manifest")

// CheckError names the check that failed, the file it read and why.
type CheckError struct {
	Check string
	File  string
	Err   error
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("check %s failed (%s): %v", e.Check, e.File, e.Err)
}

func (e *CheckError) Unwrap() error { return e.Err }

// CheckOf returns the name of the failed check in err, or "".
func CheckOf(err error) string {
	var ce *CheckError
	if errors.As(err, &ce) {
		return ce.Check
	}
	return ""
}

// VerifyReport lists the checks a case passed, in order.
type VerifyReport struct {
	Dir            string
	Passed         []string
	Manifest       *Manifest
	ManifestSHA256 string
}

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// Schema, when set, is applied to the manifest as well (the upstream
	// manifest.schema.json compiled with schema.Compile).
	Schema *schema.Schema
	// SkipOracle verifies a case without its sealed oracle.pack (a host
	// that only receives base.bundle and the manifest).
	SkipOracle bool
}

// VerifyCase checks a case directory by possession, stopping at the first
// failed check: the manifest signature over the raw bytes first (nothing is
// parsed before it), then the manifest's rules and the signing key id, then
// the bundle (header, sha256, size, then git bundle verify, a fetch with
// transfer.fsckObjects and fsck --full --strict in a scratch repository),
// then the oracle's sha256 and form.
func VerifyCase(ctx context.Context, dir string, pub ssh.PublicKey, opts VerifyOptions) (*VerifyReport, error) {
	rep := &VerifyReport{Dir: dir}
	m, msha, err := verifyManifest(dir, pub, opts.Schema, rep)
	if err != nil {
		return rep, err
	}
	rep.Manifest, rep.ManifestSHA256 = m, msha
	if err := VerifyBundle(ctx, filepath.Join(dir, BundleFile), m, rep); err != nil {
		return rep, err
	}
	if opts.SkipOracle {
		return rep, nil
	}
	if err := verifyOracle(filepath.Join(dir, OracleFile), m, rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// VerifySignedManifest checks manifest.yaml in dir against its detached
// signature and the manifest rules, and returns it with its sha256.
func VerifySignedManifest(dir string, pub ssh.PublicKey) (*Manifest, string, error) {
	return verifyManifest(dir, pub, nil, &VerifyReport{})
}

func verifyManifest(dir string, pub ssh.PublicKey, schema *schema.Schema, rep *VerifyReport) (*Manifest, string, error) {
	mpath := filepath.Join(dir, ManifestFile)
	fail := func(check, file string, err error) (*Manifest, string, error) {
		return nil, "", &CheckError{Check: check, File: file, Err: err}
	}
	// Verify, then parse: the manifest's bytes are untrusted until here.
	mb, err := readSigned(mpath, maxManifestBytes, pub, sign.NamespaceCaseManifest, CheckManifestSignature)
	if err != nil {
		return nil, "", err
	}
	rep.Passed = append(rep.Passed, CheckManifestSignature)
	m, obj, err := ReadManifest(mpath, mb)
	if err != nil {
		return fail(CheckManifestRules, mpath, err)
	}
	rep.Passed = append(rep.Passed, CheckManifestRules)
	if schema != nil {
		if err := schema.Validate(obj); err != nil {
			return fail(CheckManifestSchema, mpath, err)
		}
		rep.Passed = append(rep.Passed, CheckManifestSchema)
	}
	// The manifest must name the key that signed it: a manifest re-signed by
	// another key would otherwise still claim its original producer.
	if fp := sign.Fingerprint(pub); m.Producer.SigningKeyID != fp {
		return fail(CheckSigningKeyID, mpath, fmt.Errorf("%w: signing_key_id %q, key %s", errMismatch, m.Producer.SigningKeyID, fp))
	}
	rep.Passed = append(rep.Passed, CheckSigningKeyID)
	return m, pkgwalk.SHA256Hex(mb), nil
}

// VerifyBundle checks base.bundle against the manifest. The bundle is
// copied into a scratch directory while it is hashed, and git reads that
// copy, so the bytes git checks are the bytes whose sha256 matched.
func VerifyBundle(ctx context.Context, path string, m *Manifest, rep *VerifyReport) error {
	if rep == nil {
		rep = &VerifyReport{}
	}
	fail := func(check string, err error) error { return &CheckError{Check: check, File: path, Err: err} }
	// One reading of the bundle: it is copied into a private scratch
	// directory while hashed, and the header, the hash, the size and git's
	// checks all concern that copy. Reading the header from the path and
	// hashing a second reading let a bundle swapped in between be judged
	// by another file's header.
	scratch, err := os.MkdirTemp("", "cleanroom-bundle-verify-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	copyPath := filepath.Join(scratch, BundleFile)
	sum, size, err := copyHashed(path, copyPath)
	if err != nil {
		return fail(CheckBundleHeader, err)
	}
	hdr, err := readBundleHeaderFile(copyPath)
	if err != nil {
		return fail(CheckBundleHeader, err)
	}
	// A bundle of another commit (or ref) than the signed cutoff would hand
	// the candidate history the manifest does not vouch for.
	if hdr.RefName != BundleRef || hdr.RefOID != m.CutoffCommit {
		return fail(CheckBundleHeader, fmt.Errorf("%w: ref %s %s, manifest cutoff_commit %s", errMismatch, hdr.RefOID, hdr.RefName, m.CutoffCommit))
	}
	if hdr.ObjectFormat != m.Construction.HashAlgorithm || fmt.Sprint(hdr.Version) != string(m.Construction.BundleFormatVersion) {
		return fail(CheckBundleHeader, fmt.Errorf("%w: v%d %s, manifest v%s %s", errMismatch, hdr.Version, hdr.ObjectFormat, m.Construction.BundleFormatVersion, m.Construction.HashAlgorithm))
	}
	rep.Passed = append(rep.Passed, CheckBundleHeader)

	if sum != m.Artifacts.BaseBundleSHA256 {
		return fail(CheckBundleSHA256, fmt.Errorf("%w: sha256 %s, manifest %s", errMismatch, sum, m.Artifacts.BaseBundleSHA256))
	}
	rep.Passed = append(rep.Passed, CheckBundleSHA256)
	if size != m.Construction.BundleSize {
		return fail(CheckBundleSize, fmt.Errorf("%w: %d bytes, manifest %d", errMismatch, size, m.Construction.BundleSize))
	}
	rep.Passed = append(rep.Passed, CheckBundleSize)
	return gitCheckBundle(ctx, scratch, copyPath, hdr, m.CutoffCommit, path, rep)
}

// gitCheckBundle runs git's own checks in a fresh scratch repository with
// no user or system configuration. `git bundle verify` alone accepts a
// corrupted pack and a bundle from a shallow clone, so the fetch (which
// indexes and fsck-checks every object and checks connectivity) and a full
// strict fsck follow. git's messages are never parsed; only exit codes and
// the fetched ref's value count.
func gitCheckBundle(ctx context.Context, scratch, bundle string, hdr *BundleHeader, commit, label string, rep *VerifyReport) error {
	fail := func(check string, err error) error { return &CheckError{Check: check, File: label, Err: err} }
	repo := filepath.Join(scratch, "repo.git")
	if _, err := git(ctx, scratch, true, "init", "--quiet", "--bare", "--object-format="+hdr.ObjectFormat, repo); err != nil {
		return fail(CheckGitBundleVerify, err)
	}
	if _, err := git(ctx, repo, true, "bundle", "verify", "--quiet", bundle); err != nil {
		return fail(CheckGitBundleVerify, err)
	}
	rep.Passed = append(rep.Passed, CheckGitBundleVerify)
	if _, err := git(ctx, repo, true, "-c", "transfer.fsckObjects=true", "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", bundle, BundleRef+":"+BundleRef); err != nil {
		return fail(CheckGitFetchFsck, err)
	}
	out, err := git(ctx, repo, true, "rev-parse", "--verify", "--quiet", BundleRef+"^{commit}")
	if err != nil || strings.TrimSpace(string(out)) != commit {
		return fail(CheckGitFetchFsck, fmt.Errorf("%w: fetched ref is %q, want %s", errMismatch, strings.TrimSpace(string(out)), commit))
	}
	// A fetch keeps the whole pack, so the header's one ref says nothing of
	// what else the pack carries: a bundle with the header of the cutoff
	// and the pack of a later history would hand that history to the
	// candidate. Every object must be reachable from the cutoff (the
	// repository is fresh, so every object came from the bundle).
	all, err := gitCountLines(ctx, repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
	if err != nil {
		return fail(CheckGitFetchFsck, err)
	}
	reachable, err := gitCountLines(ctx, repo, "rev-list", "--objects", BundleRef)
	if err != nil {
		return fail(CheckGitFetchFsck, err)
	}
	if all != reachable {
		return fail(CheckGitFetchFsck, fmt.Errorf("%w: %d objects, %d reachable from %s", errBundleUnreachable, all, reachable, BundleRef))
	}
	rep.Passed = append(rep.Passed, CheckGitFetchFsck)
	if _, err := git(ctx, repo, true, "fsck", "--full", "--strict", "--no-dangling", "--no-progress"); err != nil {
		return fail(CheckGitFsck, err)
	}
	rep.Passed = append(rep.Passed, CheckGitFsck)
	return nil
}

func verifyOracle(path string, m *Manifest, rep *VerifyReport) error {
	fail := func(check string, err error) error { return &CheckError{Check: check, File: path, Err: err} }
	f, _, err := openRegular(path)
	if err != nil {
		return fail(CheckOracleSHA256, err)
	}
	defer f.Close()
	// One read serves both checks, so the form checked is of the bytes hashed.
	h := sha256.New()
	tee := io.TeeReader(f, h)
	_, packErr := ReadPack(bufio.NewReader(tee))
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return fail(CheckOracleSHA256, err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != m.Artifacts.OraclePackSHA256 {
		return fail(CheckOracleSHA256, fmt.Errorf("%w: sha256 %s, manifest %s", errMismatch, sum, m.Artifacts.OraclePackSHA256))
	}
	rep.Passed = append(rep.Passed, CheckOracleSHA256)
	if packErr != nil {
		return fail(CheckOraclePack, packErr)
	}
	rep.Passed = append(rep.Passed, CheckOraclePack)
	return nil
}

// FaultClass is Refused (internal/fault): a named check failed; Unusable when its cause
// is an input that could not be read at all.
func (e *CheckError) FaultClass() fault.Class { return fault.RuleClass(e.Err) }
