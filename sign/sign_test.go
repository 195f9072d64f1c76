package sign

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"golang.org/x/sys/unix"
)

func needSSHKeygen(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("ssh-keygen not installed: interop with stock OpenSSH cannot be checked")
	}
}

func newKey(t *testing.T) (string, *Signer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "id")
	if err := GenerateKeyWithComment(path, "test@cleanroom"); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSigner(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, s
}

// TestFingerprintMatchesSSHKeygen checks signing_key_id against the value
// ssh-keygen -l prints for the same key.
func TestFingerprintMatchesSSHKeygen(t *testing.T) {
	t.Parallel()
	needSSHKeygen(t)
	path, s := newKey(t)
	for _, f := range []string{path, path + ".pub"} {
		out, err := exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", f).Output()
		if err != nil {
			t.Fatalf("ssh-keygen -l %s: %v", f, err)
		}
		fields := strings.Fields(string(out))
		if len(fields) < 2 {
			t.Fatalf("ssh-keygen -l printed %q", out)
		}
		if fields[1] != s.Fingerprint() {
			t.Errorf("%s: ssh-keygen says %s, we say %s", f, fields[1], s.Fingerprint())
		}
	}
}

// TestOurSignatureVerifiesInSSHKeygen: stock ssh-keygen -Y verify accepts
// what Sign writes, in every namespace, and refuses it in another namespace.
func TestOurSignatureVerifiesInSSHKeygen(t *testing.T) {
	t.Parallel()
	needSSHKeygen(t)
	path, s := newKey(t)
	dir := filepath.Dir(path)
	msg := []byte("case_id: demo\r\nbytes that must not be normalised\x00\xff\n")
	msgPath := filepath.Join(dir, "msg")
	if err := os.WriteFile(msgPath, msg, 0o644); err != nil {
		t.Fatal(err)
	}
	allowed := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(allowed, []byte(AllowedSignersLine("producer@example", s.PublicKey())), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{NamespaceCaseManifest, NamespaceSummary, NamespaceRunRecord, NamespaceReceipt} {
		t.Run(ns, func(t *testing.T) {
			sig, err := s.Sign(ns, msg)
			if err != nil {
				t.Fatal(err)
			}
			sigPath := filepath.Join(dir, "msg.sig")
			if err := os.WriteFile(sigPath, sig, 0o644); err != nil {
				t.Fatal(err)
			}
			verify := func(namespace string) error {
				cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", allowed, "-I", "producer@example", "-n", namespace, "-s", sigPath)
				cmd.Stdin = bytes.NewReader(msg)
				out, err := cmd.CombinedOutput()
				if err != nil {
					return errors.New(string(out))
				}
				return nil
			}
			if err := verify(ns); err != nil {
				t.Errorf("ssh-keygen refused our signature: %v", err)
			}
			if err := verify("other@cleanroom"); err == nil {
				t.Errorf("ssh-keygen accepted our %s signature in another namespace", ns)
			}
		})
	}
}

// TestSSHKeygenSignatureVerifiesInOurs: a signature made by ssh-keygen -Y
// sign with our key file verifies in Verify, byte-identical blob included.
func TestSSHKeygenSignatureVerifiesInOurs(t *testing.T) {
	t.Parallel()
	needSSHKeygen(t)
	path, s := newKey(t)
	msgPath := filepath.Join(filepath.Dir(path), "m.yaml")
	msg := []byte("a: 1\n")
	if err := os.WriteFile(msgPath, msg, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-f", path, "-n", NamespaceCaseManifest, msgPath).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v: %s", err, out)
	}
	theirs, err := os.ReadFile(msgPath + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(s.PublicKey(), NamespaceCaseManifest, msg, theirs); err != nil {
		t.Fatalf("ssh-keygen signature refused: %v", err)
	}
	// Ed25519 is deterministic: same key, message and namespace give the
	// same bytes, armor wrapping included.
	ours, err := s.Sign(NamespaceCaseManifest, msg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, theirs) {
		t.Errorf("our signature differs from ssh-keygen's:\nours:\n%s\ntheirs:\n%s", ours, theirs)
	}
}

// TestSSHKeygenKeyLoads: a key made by ssh-keygen itself loads and signs.
func TestSSHKeygenKeyLoads(t *testing.T) {
	t.Parallel()
	needSSHKeygen(t)
	path := filepath.Join(t.TempDir(), "k")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	s, err := LoadSigner(path)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKey(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if Fingerprint(pub) != s.Fingerprint() {
		t.Errorf("public key file fingerprint %s, private %s", Fingerprint(pub), s.Fingerprint())
	}
}

func TestLoadRefusals(t *testing.T) {
	t.Parallel()
	needSSHKeygen(t)
	dir := t.TempDir()
	rsa := filepath.Join(dir, "rsa")
	enc := filepath.Join(dir, "enc")
	for _, args := range [][]string{
		{"-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", rsa},
		{"-q", "-t", "ed25519", "-N", "secret", "-f", enc},
	} {
		if out, err := exec.Command("ssh-keygen", args...).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen %v: %v: %s", args, err, out)
		}
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("a"), maxKeyFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		load func() error
		want error
	}{
		{"rsa private", func() error { _, err := LoadSigner(rsa); return err }, errKeyType},
		{"rsa public", func() error { _, err := LoadPublicKey(rsa + ".pub"); return err }, errKeyType},
		{"encrypted", func() error { _, err := LoadSigner(enc); return err }, errEncryptedKey},
		{"oversized", func() error { _, err := LoadSigner(big); return err }, evidence.ErrFileTooLarge},
		// A FIFO named as a key is refused at once, not waited on.
		{"fifo private", func() error { _, err := LoadSigner(fifo); return err }, evidence.ErrNotRegular},
		{"fifo public", func() error { _, err := LoadPublicKey(fifo); return err }, evidence.ErrNotRegular},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.load()
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), dir+"/") {
				t.Errorf("error %v does not name the key file", err)
			}
		})
	}
	// An existing key is never overwritten.
	if err := GenerateKey(rsa); !errors.Is(err, errKeyExists) {
		t.Errorf("GenerateKey over an existing key: %v, want errKeyExists", err)
	}
}

// reArmor rewrites the blob of an armored signature through f.
func reArmor(t *testing.T, armored []byte, f func([]byte) []byte) []byte {
	t.Helper()
	blob, err := unarmor(armored)
	if err != nil {
		t.Fatal(err)
	}
	return armor(f(append([]byte(nil), blob...)))
}

func TestVerifyRefusals(t *testing.T) {
	t.Parallel()
	_, s := newKey(t)
	_, other := newKey(t)
	msg := []byte("manifest bytes\n")
	good, err := s.Sign(NamespaceCaseManifest, msg)
	if err != nil {
		t.Fatal(err)
	}
	otherSig, err := other.Sign(NamespaceCaseManifest, msg)
	if err != nil {
		t.Fatal(err)
	}
	// The blob layout: magic(6) version(4) string(pubkey: 4+51) string(ns) ...
	pubLen := 4 + len(s.PublicKey().Marshal())
	nsOff := 6 + 4 + pubLen
	for _, tc := range []struct {
		name string
		ns   string
		msg  []byte
		sig  []byte
		want error
	}{
		{"good", NamespaceCaseManifest, msg, good, nil},
		{"tampered message", NamespaceCaseManifest, []byte("manifest bytes!\n"), good, errBadSignature},
		{"other namespace", NamespaceSummary, msg, good, errNamespace},
		{"other key", NamespaceCaseManifest, msg, otherSig, errWrongKey},
		{"flipped signature byte", NamespaceCaseManifest, msg, reArmor(t, good, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), errBadSignature},
		{"trailing blob bytes", NamespaceCaseManifest, msg, reArmor(t, good, func(b []byte) []byte { return append(b, 0) }), errMalformed},
		{"bad magic", NamespaceCaseManifest, msg, reArmor(t, good, func(b []byte) []byte { b[0] = 'X'; return b }), errMalformed},
		{"version 2", NamespaceCaseManifest, msg, reArmor(t, good, func(b []byte) []byte { b[9] = 2; return b }), errMalformed},
		{"truncated", NamespaceCaseManifest, msg, reArmor(t, good, func(b []byte) []byte { return b[:nsOff+2] }), errMalformed},
		{"sha256 hash", NamespaceCaseManifest, msg, reArmor(t, good, func(b []byte) []byte {
			i := bytes.Index(b, []byte("sha512"))
			copy(b[i:], "sha256")
			return b
		}), errHashAlgorithm},
		{"crlf armor", NamespaceCaseManifest, msg, bytes.ReplaceAll(good, []byte("\n"), []byte("\r\n")), errMalformed},
		{"text after armor", NamespaceCaseManifest, msg, append(append([]byte(nil), good...), "extra\n"...), errMalformed},
		{"not base64", NamespaceCaseManifest, msg, []byte(armorBegin + "\n!!!!\n" + armorEnd + "\n"), errMalformed},
		{"oversized", NamespaceCaseManifest, msg, []byte(armorBegin + "\n" + strings.Repeat(base64.StdEncoding.EncodeToString(make([]byte, 51)), MaxSignature/68+1) + "\n" + armorEnd + "\n"), errTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(s.PublicKey(), tc.ns, tc.msg, tc.sig)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var ve *VerifyError
			if !errors.As(err, &ve) || ve.Want != s.Fingerprint() {
				t.Errorf("error %v does not name the expected key %s", err, s.Fingerprint())
			}
		})
	}
}

func TestSignRefusesEmptyNamespace(t *testing.T) {
	t.Parallel()
	_, s := newKey(t)
	if _, err := s.Sign("", []byte("x")); !errors.Is(err, errNamespace) {
		t.Fatalf("empty namespace: %v", err)
	}
}

func FuzzParseSignature(f *testing.F) {
	path := filepath.Join(f.TempDir(), "k")
	if err := GenerateKey(path); err != nil {
		f.Fatal(err)
	}
	s, err := LoadSigner(path)
	if err != nil {
		f.Fatal(err)
	}
	good, _ := s.Sign(NamespaceReceipt, []byte("x"))
	f.Add(good)
	f.Fuzz(func(t *testing.T, b []byte) {
		// Must never panic; an accepted signature must carry the original
		// blob (only the armor's line wrapping may differ).
		if Verify(s.PublicKey(), NamespaceReceipt, []byte("x"), b) != nil {
			return
		}
		want, _ := unarmor(good)
		got, err := unarmor(b)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("accepted a different signature:\n%s", b)
		}
	})
}
