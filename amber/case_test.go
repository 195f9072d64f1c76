package amber

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence/schema"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sign"
)

func upstreamSchema(t *testing.T) *schema.Schema {
	t.Helper()
	p := testshared.Path(t, "amber", "schemas", "manifest.schema.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s, err := schema.Compile("manifest.schema.json", b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var allChecks = []string{
	CheckManifestSignature, CheckManifestRules, CheckSigningKeyID, CheckBundleHeader,
	CheckBundleSHA256, CheckBundleSize, CheckGitBundleVerify, CheckGitFetchFsck, CheckGitFsck,
	CheckOracleSHA256, CheckOraclePack,
}

func TestBuildThenVerify(t *testing.T) {
	t.Parallel()
	o, c, s := buildCase(t)
	rep, err := VerifyCase(context.Background(), c.Dir, s.PublicKey(), VerifyOptions{})
	if err != nil {
		t.Fatalf("VerifyCase: %v", err)
	}
	if !slices.Equal(rep.Passed, allChecks) {
		t.Errorf("checks passed %v, want %v", rep.Passed, allChecks)
	}
	m := rep.Manifest
	repo := newTestRepoFrom(o)
	for _, tc := range []struct{ name, got, want string }{
		{"cutoff_commit", m.CutoffCommit, repo.Cutoff},
		{"signing_key_id", m.Producer.SigningKeyID, s.Fingerprint()},
		{"isolation_class", m.Eligibility.IsolationClass, FullIsolation},
		{"bundle_format_version", string(m.Construction.BundleFormatVersion), "3"},
		{"hash_algorithm", m.Construction.HashAlgorithm, "sha1"},
		{"git_version", "git version " + m.Construction.GitVersion, gitT(t, "", "--version")},
		{"spec_sha256", m.SpecSHA256, shaOfFile(t, o.SpecFile)},
		{"base_bundle_sha256", m.Artifacts.BaseBundleSHA256, sha256sumTool(t, filepath.Join(c.Dir, BundleFile))},
		{"oracle_pack_sha256", m.Artifacts.OraclePackSHA256, sha256sumTool(t, filepath.Join(c.Dir, OracleFile))},
		{"cutoff_rule output", m.CutoffRule.ScriptOutputSHA256, pkgwalk.SHA256Hex([]byte(repo.Cutoff + "\n"))},
		{"leak date", m.LeakCheck.LastRunDate, "2026-02-01"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	// The temporary ref is gone from the source.
	if out, err := exec.Command("git", "-C", o.Repo, "for-each-ref", "refs/cleanroom/").Output(); err != nil || len(out) != 0 {
		t.Errorf("temporary ref left in the source: %q %v", out, err)
	}
}

func newTestRepoFrom(o BuildOptions) testRepo { return testRepo{Dir: o.Repo, Cutoff: o.CutoffCommit} }

func shaOfFile(t *testing.T, p string) string {
	t.Helper()
	return sha256sumTool(t, p)
}

// sha256sumTool hashes with coreutils, not with the code under test.
func sha256sumTool(t *testing.T, p string) string {
	t.Helper()
	out, err := exec.Command("sha256sum", p).Output()
	if err != nil {
		t.Skipf("sha256sum: %v", err)
	}
	return strings.Fields(string(out))[0]
}

// TestCaseInteropWithStockTools: git accepts the bundle and clones exactly
// the cutoff history (no tags, no notes, not the later commit); ssh-keygen
// accepts the manifest signature; the manifest validates against the
// upstream schema.
func TestCaseInteropWithStockTools(t *testing.T) {
	t.Parallel()
	o, c, s := buildCase(t)
	bundle := filepath.Join(c.Dir, BundleFile)
	scratch := t.TempDir()
	gitT(t, scratch, "init", "--quiet", "--bare", "v.git")
	gitT(t, filepath.Join(scratch, "v.git"), "bundle", "verify", "--quiet", bundle)
	// The single ref lives outside refs/heads, so a plain clone takes
	// nothing; --mirror takes every ref the bundle has.
	gitT(t, scratch, "clone", "--quiet", "--mirror", bundle, "clone.git")
	clone := filepath.Join(scratch, "clone.git")
	refs := gitT(t, clone, "for-each-ref", "--format=%(objectname) %(refname)")
	if refs != o.CutoffCommit+" "+BundleRef {
		t.Errorf("clone refs %q, want only %s %s", refs, o.CutoffCommit, BundleRef)
	}
	if n := gitT(t, clone, "rev-list", "--count", "--all"); n != "3" {
		t.Errorf("clone holds %s commits, want the 3 up to the cutoff", n)
	}
	if tags := gitT(t, clone, "tag"); tags != "" {
		t.Errorf("tags travelled: %q", tags)
	}

	// ssh-keygen -Y verify over the exact manifest bytes.
	if _, err := exec.LookPath("ssh-keygen"); err == nil {
		allowed := filepath.Join(scratch, "allowed_signers")
		writeFile(t, allowed, sign.AllowedSignersLine("producer@example", s.PublicKey(), sign.NamespaceCaseManifest))
		cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", allowed, "-I", "producer@example",
			"-n", sign.NamespaceCaseManifest, "-s", filepath.Join(c.Dir, ManifestSigFile))
		mb, _ := os.ReadFile(filepath.Join(c.Dir, ManifestFile))
		cmd.Stdin = bytes.NewReader(mb)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("ssh-keygen -Y verify refused the manifest signature: %v %s", err, out)
		}
	}

	schema := upstreamSchema(t)
	rep, err := VerifyCase(context.Background(), c.Dir, s.PublicKey(), VerifyOptions{Schema: schema})
	if err != nil {
		t.Fatalf("VerifyCase with the upstream schema: %v", err)
	}
	if !slices.Contains(rep.Passed, CheckManifestSchema) {
		t.Errorf("schema check not run: %v", rep.Passed)
	}
}

// TestBuildDeterministic: the same inputs give byte-identical manifests and
// oracle packs (and, same git and source, the same bundle).
func TestBuildDeterministic(t *testing.T) {
	t.Parallel()
	o, c1, _ := buildCase(t)
	o.Out = filepath.Join(t.TempDir(), "case2")
	c2, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ManifestFile, OracleFile, BundleFile, ManifestSigFile} {
		a, _ := os.ReadFile(filepath.Join(c1.Dir, f))
		b, _ := os.ReadFile(filepath.Join(c2.Dir, f))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two builds", f)
		}
	}
}

func TestBuildRefusals(t *testing.T) {
	t.Parallel()
	needGit(t)
	_, s := newSigner(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, o *BuildOptions)
		want  error
	}{
		{"shallow source", func(t *testing.T, o *BuildOptions) {
			shallow := filepath.Join(t.TempDir(), "shallow")
			gitT(t, "", "clone", "--quiet", "--depth", "1", "file://"+o.Repo, shallow)
			o.Repo = shallow
			o.CutoffCommit = "HEAD"
		}, errShallowSource},
		{"partial clone", func(t *testing.T, o *BuildOptions) {
			gitT(t, o.Repo, "config", "extensions.partialClone", "origin")
		}, errPartialSource},
		{"promisor remote", func(t *testing.T, o *BuildOptions) {
			gitT(t, o.Repo, "config", "remote.origin.promisor", "true")
		}, errPartialSource},
		{"submodule in history", func(t *testing.T, o *BuildOptions) {
			gitT(t, o.Repo, "update-index", "--add", "--cacheinfo", "160000,"+o.CutoffCommit+",vendor/dep")
			gitT(t, o.Repo, "commit", "--quiet", "-m", "add a gitlink")
			gitT(t, o.Repo, "rm", "--quiet", "--cached", "vendor/dep")
			gitT(t, o.Repo, "commit", "--quiet", "-m", "drop it again")
			o.CutoffCommit = "HEAD"
		}, errSubmodule},
		{"lfs pointer", func(t *testing.T, o *BuildOptions) {
			writeFile(t, filepath.Join(o.Repo, "big.bin"), "version https://git-lfs.github.com/spec/v1\noid sha256:"+strings.Repeat("a", 64)+"\nsize 12\n")
			gitT(t, o.Repo, "add", "big.bin")
			gitT(t, o.Repo, "commit", "--quiet", "-m", "lfs")
			o.CutoffCommit = "HEAD"
		}, errLFS},
		{"lfs attribute", func(t *testing.T, o *BuildOptions) {
			writeFile(t, filepath.Join(o.Repo, ".gitattributes"), "*.bin filter=lfs diff=lfs merge=lfs -text\n")
			gitT(t, o.Repo, "add", ".gitattributes")
			gitT(t, o.Repo, "commit", "--quiet", "-m", "lfs attrs")
			o.CutoffCommit = "HEAD"
		}, errLFS},
		{"not a commit", func(t *testing.T, o *BuildOptions) { o.CutoffCommit = "HEAD^{tree}" }, errNotCommit},
		{"crlf spec", func(t *testing.T, o *BuildOptions) { writeFile(t, o.SpecFile, "# Core\r\n") }, errPinBytes},
		{"bom protocol", func(t *testing.T, o *BuildOptions) { writeFile(t, o.ProtocolFile, "\xef\xbb\xbf# D\n") }, errPinBytes},
		{"invalid utf-8 spec", func(t *testing.T, o *BuildOptions) { writeFile(t, o.SpecFile, "# \xff\n") }, errPinBytes},
		{"symlink in oracle", func(t *testing.T, o *BuildOptions) {
			if err := os.Symlink("/etc/passwd", filepath.Join(o.OracleDir, "leak")); err != nil {
				t.Fatal(err)
			}
		}, errPackFileType},
		{"fifo in oracle", func(t *testing.T, o *BuildOptions) {
			if err := mkfifo(filepath.Join(o.OracleDir, "pipe")); err != nil {
				t.Skip("mkfifo:", err)
			}
		}, errPackFileType},
		{"existing output", func(t *testing.T, o *BuildOptions) {
			if err := os.Mkdir(o.Out, 0o755); err != nil {
				t.Fatal(err)
			}
		}, errOutputExists},
		{"stale cutoff ref", func(t *testing.T, o *BuildOptions) {
			gitT(t, o.Repo, "update-ref", BundleRef, o.CutoffCommit)
		}, errCutoffRef},
		{"bad case id", func(t *testing.T, o *BuildOptions) { o.CaseID = "../x" }, errBuildArgument},
		{"offset cutoff", func(t *testing.T, o *BuildOptions) { o.CutoffUTC = "2026-01-15T00:00:00+08:00" }, errBuildArgument},
		{"impossible cutoff", func(t *testing.T, o *BuildOptions) { o.CutoffUTC = "2026-13-45T00:00:00Z" }, errBuildArgument},
		{"allowlist entry", func(t *testing.T, o *BuildOptions) { o.Allow = []string{"https://example.org"} }, errAllowlistFormat},
		// The test repository's commits are dated 2026-01-01T00:00:00Z.
		{"cutoff before the commit's committer date", func(t *testing.T, o *BuildOptions) { o.CutoffUTC = "2025-12-31T23:59:59Z" }, errCutoffBeforeCommit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := buildOpts(t, newTestRepo(t, 2), s)
			tc.setup(t, &o)
			existed := dirExists(o.Out)
			_, err := Build(context.Background(), o)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			// Nothing half-written: no case directory, no staging leftovers.
			if !existed && dirExists(o.Out) {
				t.Errorf("refused build left %s behind", o.Out)
			}
			left, _ := filepath.Glob(filepath.Join(filepath.Dir(o.Out), durable.TempPrefix+"*"))
			if len(left) > 0 {
				t.Errorf("staging directories left: %v", left)
			}
		})
	}
}

// An explicit override builds the case and records the reason and the
// committer date in the manifest's provenance; a cutoff at the committer
// date itself needs none.
func TestBuildCutoffOverrideRecorded(t *testing.T) {
	t.Parallel()
	needGit(t)
	_, s := newSigner(t)
	o := buildOpts(t, newTestRepo(t, 2), s)
	o.CutoffUTC = "2025-12-31T00:00:00Z"
	o.CutoffOverride = "the forge push log shows the commit was pushed on 2025-12-30"
	c, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Manifest.Provenance[ProvenanceCutoffOverride]; got != o.CutoffOverride {
		t.Errorf("provenance %s = %v, want the reason", ProvenanceCutoffOverride, got)
	}
	if got := c.Manifest.Provenance[ProvenanceCutoffCommitterUTC]; got != "2026-01-01T00:00:00Z" {
		t.Errorf("provenance %s = %v, want 2026-01-01T00:00:00Z", ProvenanceCutoffCommitterUTC, got)
	}
	// The recorded override survives the strict reader a receiver applies.
	b, err := os.ReadFile(filepath.Join(c.Dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadManifest(ManifestFile, b); err != nil {
		t.Fatalf("the manifest with an override does not read back: %v", err)
	}

	o = buildOpts(t, newTestRepo(t, 2), s)
	o.CutoffUTC = "2026-01-01T00:00:00Z"
	c, err = Build(context.Background(), o)
	if err != nil {
		t.Fatalf("a cutoff at the committer date is refused: %v", err)
	}
	if _, ok := c.Manifest.Provenance[ProvenanceCutoffOverride]; ok {
		t.Errorf("no override was needed, yet one is recorded: %v", c.Manifest.Provenance)
	}
}

func dirExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// TestManifestSignedBySSHKeygen: a producer who signs manifest.yaml by hand
// with stock `ssh-keygen -Y sign` gets a case cleanroom verifies.
func TestManifestSignedBySSHKeygen(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("ssh-keygen not installed")
	}
	repo := newTestRepo(t, 2)
	keyPath, s := newSigner(t)
	o := buildOpts(t, repo, s)
	c, err := Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	sig := filepath.Join(c.Dir, ManifestSigFile)
	if err := os.Remove(sig); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-f", keyPath, "-n", sign.NamespaceCaseManifest, filepath.Join(c.Dir, ManifestFile)).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v %s", err, out)
	}
	if _, err := VerifyCase(context.Background(), c.Dir, s.PublicKey(), VerifyOptions{}); err != nil {
		t.Fatalf("case signed by ssh-keygen refused: %v", err)
	}
}
