package amber

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/sign"
)

// signRule is one of sign's rules as a caller outside sign sees it: its
// text in the error (sign's sentinels are sign's own).
type signRule string

func (r signRule) Error() string { return string(r) }

const (
	signBadSignature signRule = "signature does not verify"
	signWrongKey     signRule = "signature made by another key"
	signNamespace    signRule = "signature namespace is empty or not the expected one"
)

// isRule reports whether err breaks want: errors.Is, or for a signRule
// the rule's text in err.
func isRule(err, want error) bool {
	if r, ok := want.(signRule); ok {
		return err != nil && strings.Contains(err.Error(), string(r))
	}
	return errors.Is(err, want)
}

// flipPackByte flips one byte inside the PACK data of a bundle file.
func flipPackByte(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("\n\nPACK"))
	if i < 0 {
		t.Fatal("no PACK in bundle")
	}
	pos := i + 2 + 12 + (len(b)-i-2-12-20)/2 // middle of the object data
	b[pos] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// shallowBundle makes, by hand with git, a bundle from a depth-1 clone: no
// prerequisite lines, yet history is missing.
func shallowBundle(t *testing.T, src, out string) string {
	t.Helper()
	shallow := filepath.Join(t.TempDir(), "shallow")
	gitT(t, "", "clone", "--quiet", "--depth", "1", "file://"+src, shallow)
	head := gitT(t, shallow, "rev-parse", "HEAD")
	gitT(t, shallow, "update-ref", BundleRef, head)
	gitT(t, shallow, "bundle", "create", "--quiet", "--version=3", out, BundleRef)
	return head
}

// TestVerifyCatchesTampering: each tampering is caught, and by the check
// named for it.
func TestVerifyCatchesTampering(t *testing.T) {
	t.Parallel()
	o, c, s := buildCase(t)
	_, other := newSigner(t)
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, dir string)
		check  string
		want   error
	}{
		{"edited manifest", func(t *testing.T, dir string) {
			p := filepath.Join(dir, ManifestFile)
			b, _ := os.ReadFile(p)
			b = bytes.Replace(b, []byte("profile: test-profile"), []byte("profile: test-profilf"), 1)
			writeFile(t, p, string(b))
		}, CheckManifestSignature, signBadSignature},
		{"manifest signed by another key", func(t *testing.T, dir string) {
			resign(t, dir, other, func(m *Manifest) {})
		}, CheckManifestSignature, signWrongKey},
		{"signature of another purpose", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
			sig, _ := s.Sign(sign.NamespaceSummary, b)
			writeFile(t, filepath.Join(dir, ManifestSigFile), string(sig))
		}, CheckManifestSignature, signNamespace},
		{"signing_key_id names another key", func(t *testing.T, dir string) {
			resign(t, dir, s, func(m *Manifest) { m.Producer.SigningKeyID = other.Fingerprint() })
		}, CheckSigningKeyID, errMismatch},
		{"unknown field, signed", func(t *testing.T, dir string) {
			p := filepath.Join(dir, ManifestFile)
			b, _ := os.ReadFile(p)
			b = append(b, "notes: x\n"...)
			sig, _ := s.Sign(sign.NamespaceCaseManifest, b)
			writeFile(t, p, string(b))
			writeFile(t, filepath.Join(dir, ManifestSigFile), string(sig))
		}, CheckManifestRules, errManifestField},
		{"second document, signed", func(t *testing.T, dir string) {
			p := filepath.Join(dir, ManifestFile)
			b, _ := os.ReadFile(p)
			b = append(b, "---\ncase_id: other\n"...)
			sig, _ := s.Sign(sign.NamespaceCaseManifest, b)
			writeFile(t, p, string(b))
			writeFile(t, filepath.Join(dir, ManifestSigFile), string(sig))
		}, CheckManifestRules, errYAMLMultiDoc},
		{"swapped oracle", func(t *testing.T, dir string) {
			od := newOracle(t)
			writeFile(t, filepath.Join(od, "rubric.md"), "criterion tests_pass: always 1\n")
			f, _ := os.Create(filepath.Join(dir, OracleFile))
			if err := WritePack(od, f); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}, CheckOracleSHA256, errMismatch},
		{"bundle byte flipped", func(t *testing.T, dir string) {
			flipPackByte(t, filepath.Join(dir, BundleFile))
		}, CheckBundleSHA256, errMismatch},
		{"bundle byte flipped, manifest re-signed to match", func(t *testing.T, dir string) {
			p := filepath.Join(dir, BundleFile)
			flipPackByte(t, p)
			// git bundle verify alone is fooled by this bundle.
			scratch := t.TempDir()
			gitT(t, scratch, "init", "--quiet", "--bare", "r.git")
			gitT(t, filepath.Join(scratch, "r.git"), "bundle", "verify", "--quiet", p)
			sum := sha256sumTool(t, p)
			resign(t, dir, s, func(m *Manifest) { m.Artifacts.BaseBundleSHA256 = sum })
		}, CheckGitFetchFsck, nil},
		{"bundle from a shallow clone, manifest re-signed", func(t *testing.T, dir string) {
			p := filepath.Join(dir, BundleFile)
			os.Remove(p)
			head := shallowBundle(t, o.Repo, p)
			scratch := t.TempDir()
			gitT(t, scratch, "init", "--quiet", "--bare", "r.git")
			gitT(t, filepath.Join(scratch, "r.git"), "bundle", "verify", "--quiet", p)
			sum := sha256sumTool(t, p)
			fi, _ := os.Stat(p)
			resign(t, dir, s, func(m *Manifest) {
				m.Artifacts.BaseBundleSHA256 = sum
				m.Construction.BundleSize = fi.Size()
				m.CutoffCommit = head
			})
		}, CheckGitFetchFsck, nil},
		{"bundle with the later commit", func(t *testing.T, dir string) {
			p := filepath.Join(dir, BundleFile)
			os.Remove(p)
			gitT(t, o.Repo, "update-ref", "refs/x", gitT(t, o.Repo, "rev-parse", "main"))
			gitT(t, o.Repo, "bundle", "create", "--quiet", "--version=3", p, "refs/x")
			gitT(t, o.Repo, "update-ref", "-d", "refs/x")
		}, CheckBundleHeader, errMismatch},
		{"thin bundle", func(t *testing.T, dir string) {
			p := filepath.Join(dir, BundleFile)
			os.Remove(p)
			gitT(t, o.Repo, "update-ref", BundleRef, o.CutoffCommit)
			gitT(t, o.Repo, "bundle", "create", "--quiet", "--version=3", p, o.CutoffCommit+"~1.."+BundleRef)
			gitT(t, o.Repo, "update-ref", "-d", BundleRef)
		}, CheckBundleHeader, errBundlePrerequisite},
		{"bundle truncated", func(t *testing.T, dir string) {
			p := filepath.Join(dir, BundleFile)
			b, _ := os.ReadFile(p)
			writeFile(t, p, string(b[:len(b)-10]))
		}, CheckBundleSHA256, errMismatch},
		{"bundle replaced by a symlink", func(t *testing.T, dir string) {
			p := filepath.Join(dir, BundleFile)
			if err := os.Rename(p, p+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(p+".real", p); err != nil {
				t.Fatal(err)
			}
		}, CheckBundleHeader, errNotRegular},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, c.Dir)
			tc.tamper(t, dir)
			_, err := VerifyCase(context.Background(), dir, s.PublicKey(), VerifyOptions{})
			if got := CheckOf(err); got != tc.check {
				t.Fatalf("failed check %q (%v), want %q", got, err, tc.check)
			}
			if tc.want != nil && !isRule(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestParseBundleHeader(t *testing.T) {
	t.Parallel()
	oid := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name, in string
		want     error
	}{
		{"good", "# v3 git bundle\n@object-format=sha1\n" + oid + " " + BundleRef + "\n\nPACK", nil},
		{"v2", "# v2 git bundle\n" + oid + " " + BundleRef + "\n\nPACK", errBundleSignature},
		{"filter capability", "# v3 git bundle\n@object-format=sha1\n@filter=blob:none\n" + oid + " r\n\nPACK", errBundleCapability},
		{"prerequisite", "# v3 git bundle\n@object-format=sha1\n-" + oid + " c\n" + oid + " r\n\nPACK", errBundlePrerequisite},
		{"two refs", "# v3 git bundle\n@object-format=sha1\n" + oid + " r\n" + oid + " s\n\nPACK", errBundleRefs},
		{"no ref", "# v3 git bundle\n@object-format=sha1\n\nPACK", errBundleRefs},
		{"no object format", "# v3 git bundle\n" + oid + " r\n\nPACK", errBundleHeader},
		{"sha256 length mismatch", "# v3 git bundle\n@object-format=sha256\n" + oid + " r\n\nPACK", errBundleHeader},
		{"truncated", "# v3 git bundle\n@object-format=sha1\n" + oid, errBundleHeader},
		{"no pack", "# v3 git bundle\n@object-format=sha1\n" + oid + " r\n\nKCAP", errBundleHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseBundleHeader(bytes.NewReader([]byte(tc.in)))
			if tc.want == nil && err != nil || !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestVerifyAcceptsHandMadeBundle: a bundle made by plain git commands, by
// hand, in a sha256 repository, passes the bundle checks.
func TestVerifyAcceptsHandMadeBundle(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := filepath.Join(t.TempDir(), "s256")
	if out, err := exec.Command("git", "init", "--quiet", "--object-format=sha256", dir).CombinedOutput(); err != nil {
		t.Skipf("git without sha256 support: %v %s", err, out)
	}
	writeFile(t, filepath.Join(dir, "a"), "a\n")
	gitT(t, dir, "add", "a")
	gitT(t, dir, "commit", "--quiet", "-m", "a")
	head := gitT(t, dir, "rev-parse", "HEAD")
	gitT(t, dir, "update-ref", BundleRef, head)
	p := filepath.Join(t.TempDir(), "base.bundle")
	gitT(t, dir, "bundle", "create", "--quiet", p, BundleRef)
	fi, _ := os.Stat(p)
	m := &Manifest{CutoffCommit: head,
		Construction: Construction{BundleFormatVersion: "3", HashAlgorithm: "sha256", BundleSize: fi.Size()},
		Artifacts:    Artifacts{BaseBundleSHA256: sha256sumTool(t, p)}}
	rep := &VerifyReport{}
	if err := VerifyBundle(context.Background(), p, m, rep); err != nil {
		t.Fatalf("hand-made sha256 bundle refused: %v", err)
	}
	if len(rep.Passed) != 6 {
		t.Errorf("passed %v", rep.Passed)
	}
}
