package sign

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// rebuildBlob re-encodes an SSHSIG blob with its signature field (the last
// string) replaced by f's result.
func rebuildSigField(t *testing.T, blob []byte, f func([]byte) []byte) []byte {
	t.Helper()
	r := blob[6+4:]
	var fields [][]byte
	for range 5 {
		s, rest, ok := readString(r)
		if !ok {
			t.Fatal("bad blob")
		}
		fields = append(fields, s)
		r = rest
	}
	fields[4] = f(append([]byte(nil), fields[4]...))
	out := append([]byte(nil), blob[:10]...)
	for _, s := range fields {
		out = appendString(out, s)
	}
	return out
}

// TestTamperedSignatureRefusedByBoth: every changed signature that stock
// ssh-keygen -Y verify refuses is refused here too, under the rule named,
// and the honest one verifies in both.
func TestTamperedSignatureRefusedByBoth(t *testing.T) {
	t.Parallel()
	needSSHKeygen(t)
	path, s := newKey(t)
	dir := filepath.Dir(path)
	msg := []byte("manifest bytes\n")
	msgPath := filepath.Join(dir, "msg")
	if err := os.WriteFile(msgPath, msg, 0o644); err != nil {
		t.Fatal(err)
	}
	allowed := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(allowed, []byte(AllowedSignersLine("p@example", s.PublicKey())), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-Y", "sign", "-f", path, "-n", NamespaceCaseManifest, msgPath).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v: %s", err, out)
	}
	good, err := os.ReadFile(msgPath + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	sshVerify := func(sig []byte) bool {
		sp := filepath.Join(dir, "x.sig")
		if err := os.WriteFile(sp, sig, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", allowed, "-I", "p@example", "-n", NamespaceCaseManifest, "-s", sp)
		cmd.Stdin = bytes.NewReader(msg)
		return cmd.Run() == nil
	}
	for _, tc := range []struct {
		name string
		sig  []byte
		want error
	}{
		{"honest", good, nil},
		{"bytes after the ed25519 signature inside its field", reArmor(t, good, func(b []byte) []byte {
			return rebuildSigField(t, b, func(f []byte) []byte { return append(f, "extra"...) })
		}), errMalformed},
		{"ed25519 signature blob one byte longer", reArmor(t, good, func(b []byte) []byte {
			return rebuildSigField(t, b, func(f []byte) []byte {
				// string(format) string(blob): lengthen blob by one byte.
				fl := binary.BigEndian.Uint32(f)
				off := 4 + int(fl)
				bl := binary.BigEndian.Uint32(f[off:])
				binary.BigEndian.PutUint32(f[off:], bl+1)
				return append(f, 0)
			})
		}), errMalformed},
		{"two signatures", append(append([]byte(nil), good...), good...), errMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(s.PublicKey(), NamespaceCaseManifest, msg, tc.sig)
			theirs := sshVerify(tc.sig)
			if tc.want == nil {
				if err != nil || !theirs {
					t.Fatalf("honest signature: ours %v, ssh-keygen accepts %v", err, theirs)
				}
				return
			}
			if theirs {
				t.Logf("note: ssh-keygen accepts it")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("ours: %v, want %v (ssh-keygen accepts: %v)", err, tc.want, theirs)
			}
		})
	}
}
