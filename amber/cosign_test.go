package amber

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// testCheckpoint returns an index with three entries, its key and its
// real checkpoint.
func testCheckpoint(t *testing.T) (dir, vkey string, orig []byte) {
	t.Helper()
	dir, _ = newTestIndex(t, 3)
	orig, err := os.ReadFile(filepath.Join(dir, IndexCheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := os.ReadFile(filepath.Join(dir, IndexPubFile))
	if err != nil {
		t.Fatal(err)
	}
	return dir, strings.TrimSpace(string(pub)), orig
}

// cosign appends a cosignature by a new key of each witness name to the
// checkpoint, with golang.org/x/mod/sumdb/note.
func cosign(t *testing.T, orig []byte, vkey string, witnesses ...string) []byte {
	t.Helper()
	n, err := note.Open(orig, note.VerifierList(mustVerifier(t, vkey)))
	if err != nil {
		t.Fatal(err)
	}
	var signers []note.Signer
	for _, w := range witnesses {
		skey, _, err := note.GenerateKey(nil, w)
		if err != nil {
			t.Fatal(err)
		}
		s, err := note.NewSigner(skey)
		if err != nil {
			t.Fatal(err)
		}
		signers = append(signers, s)
	}
	cosigned, err := note.Sign(n, signers...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(cosigned), string(orig)) || len(cosigned) == len(orig) {
		t.Fatalf("note.Sign did not append to the checkpoint:\n%s", cosigned)
	}
	return cosigned
}

// sigLines splits a signed note into its text (with the blank line) and
// its signature lines.
func sigLines(t *testing.T, b []byte) (text string, lines []string) {
	t.Helper()
	i := strings.LastIndex(string(b), "\n\n")
	if i < 0 {
		t.Fatalf("no signature block:\n%s", b)
	}
	return string(b[:i+2]), strings.Split(strings.TrimSuffix(string(b[i+2:]), "\n"), "\n")
}

// C2SP signed-note: a verifier MUST ignore signatures from unknown keys.
// A witness cosignature made by x/mod/sumdb/note on a real checkpoint is
// accepted (in either order, and sixteen of them: the spec's minimum), the
// index itself loads with it and its proofs verify.
func TestCheckpointWitnessCosignature(t *testing.T) {
	t.Parallel()
	dir, vkey, orig := testCheckpoint(t)
	cosigned := cosign(t, orig, vkey, "witness.example/w1")
	want, err := OpenCheckpoint(orig, vkey)
	if err != nil {
		t.Fatal(err)
	}
	text, lines := sigLines(t, cosigned)
	reordered := text + lines[1] + "\n" + lines[0] + "\n"
	var sixteen []string
	for i := range 16 {
		sixteen = append(sixteen, "witness.example/w"+string(rune('a'+i)))
	}
	many := cosign(t, orig, vkey, sixteen...)
	for name, b := range map[string][]byte{"appended": cosigned, "witness first": []byte(reordered)} {
		cp, err := OpenCheckpoint(b, vkey)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cp.Size != want.Size || cp.Root != want.Root || cp.Origin != want.Origin || string(cp.Signed) != string(b) {
			t.Errorf("%s: checkpoint %+v, want size %d root %x", name, cp, want.Size, want.Root)
		}
	}
	if _, err := OpenCheckpoint(many, vkey); err != nil {
		t.Errorf("sixteen witnesses: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, IndexCheckpointFile), cosigned, 0o644); err != nil {
		t.Fatal(err)
	}
	ix, err := LoadIndex(dir, vkey)
	if err != nil {
		t.Fatalf("index with a cosigned checkpoint: %v", err)
	}
	proof, err := ix.ProveIndex(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyProof(proof, vkey); err != nil {
		t.Errorf("proof carrying the cosigned checkpoint: %v", err)
	}
}

// Lines of keys that share the index key's name or its key ID, not both,
// are other keys' (C2SP: ignored), so the checkpoint stands on the index
// key's line.
func TestCheckpointLookalikeKeysIgnored(t *testing.T) {
	t.Parallel()
	_, vkey, orig := testCheckpoint(t)
	v := mustVerifier(t, vkey)
	// Another key under the index key's name: a different key ID.
	skey, _, err := note.GenerateKey(nil, v.Name())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := note.NewSigner(skey)
	if s.KeyHash() == v.KeyHash() {
		t.Skip("the generated key's ID collides with the index key's (1 in 2^32)")
	}
	n, err := note.Open(orig, note.VerifierList(v))
	if err != nil {
		t.Fatal(err)
	}
	sameName, err := note.Sign(n, s)
	if err != nil {
		t.Fatal(err)
	}
	// The index key's ID under another name, with a signature that would
	// not verify for anyone.
	sig := binary.BigEndian.AppendUint32(nil, v.KeyHash())
	sig = append(sig, make([]byte, ed25519.SignatureSize)...)
	sameID := string(orig) + "\u2014 witness.example/w1 " + base64.StdEncoding.EncodeToString(sig) + "\n"
	for name, b := range map[string][]byte{"same name, other ID": sameName, "same ID, other name": []byte(sameID)} {
		if _, err := OpenCheckpoint(b, vkey); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Still exactly one valid signature by the index key: a cosignature alone
// is not enough, a bad index signature is not saved by a good witness, two
// lines claiming the index key and malformed lines (any key's) are refused
// by name.
func TestCheckpointSignatureRules(t *testing.T) {
	t.Parallel()
	_, vkey, orig := testCheckpoint(t)
	cosigned := cosign(t, orig, vkey, "witness.example/w1")
	text, lines := sigLines(t, cosigned)
	index, witness := lines[0], lines[1]
	witnessName, witnessSig, _ := strings.Cut(strings.TrimPrefix(witness, "\u2014 "), " ")
	// The index key's signature with its last signature byte changed.
	raw, _ := base64.StdEncoding.DecodeString(strings.Fields(index)[2])
	raw[len(raw)-1] ^= 1
	badIndex := "\u2014 " + strings.Fields(index)[1] + " " + base64.StdEncoding.EncodeToString(raw)
	// The witness's signature with a padding bit set: the same bytes,
	// another spelling.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	if !strings.HasSuffix(witnessSig, "=") {
		t.Fatalf("witness signature without padding: %s", witnessSig)
	}
	last := len(witnessSig) - 2
	loose := witnessSig[:last] + string(alphabet[strings.IndexByte(alphabet, witnessSig[last])^1]) + "="
	cases := []struct {
		name  string
		sigs  []string
		check string
		rule  string // in the error text
	}{
		{"cosignature alone", []string{witness}, CheckCheckpointSignature, "not signed by"},
		{"bad index signature beside a good witness", []string{badIndex, witness}, CheckCheckpointSignature, "not signed by"},
		{"index key line twice", []string{index, witness, index}, CheckCheckpointForm, "claim the index key"},
		{"index key line twice, other bytes", []string{index, badIndex}, CheckCheckpointForm, "claim the index key"},
		{"witness: hyphens for the em dash", []string{index, "--" + witness[len("\u2014"):]}, CheckCheckpointForm, "em dash"},
		{"witness: no space after the dash", []string{index, "\u2014" + witness[len("\u2014 "):]}, CheckCheckpointForm, "em dash"},
		{"witness: no signature", []string{index, "\u2014 " + witnessName}, CheckCheckpointForm, "key name"},
		{"witness: empty name", []string{index, "\u2014  " + witnessSig}, CheckCheckpointForm, "key name"},
		{"witness: plus in the name", []string{index, "\u2014 " + witnessName + "+1 " + witnessSig}, CheckCheckpointForm, "key name"},
		{"witness: two spaces", []string{index, "\u2014 " + witnessName + "  " + witnessSig}, CheckCheckpointForm, "strict base64"},
		{"witness: trailing space", []string{index, witness + " "}, CheckCheckpointForm, "strict base64"},
		{"witness: not base64", []string{index, "\u2014 " + witnessName + " not*base64"}, CheckCheckpointForm, "strict base64"},
		{"witness: padding bits", []string{index, "\u2014 " + witnessName + " " + loose}, CheckCheckpointForm, "strict base64"},
		{"witness: key ID only", []string{index, "\u2014 " + witnessName + " AAAAAA=="}, CheckCheckpointForm, "strict base64"},
		// The last blank line splits text from signatures: the index line
		// above it is text, and the note has no index signature.
		{"blank line between the signatures", []string{index, "", witness}, CheckCheckpointSignature, "not signed by"},
		{"blank line after the signatures", []string{index, witness, ""}, CheckCheckpointForm, "no signature lines"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := text + strings.Join(c.sigs, "\n") + "\n"
			_, err := OpenCheckpoint([]byte(b), vkey)
			if CheckOf(err) != c.check || !strings.Contains(err.Error(), c.rule) {
				t.Fatalf("check %q (%v), want %q naming %q\n%s", CheckOf(err), err, c.check, c.rule, b)
			}
			if c.check == CheckCheckpointForm && !errors.Is(err, errCheckpoint) {
				t.Errorf("%v is not errCheckpoint", err)
			}
		})
	}
	// The text without its final newline, the signature block without
	// its own: both refused as form.
	for name, b := range map[string]string{
		"no final newline": strings.TrimSuffix(string(cosigned), "\n"),
		"no signatures":    text,
	} {
		if _, err := OpenCheckpoint([]byte(b), vkey); CheckOf(err) != CheckCheckpointForm {
			t.Errorf("%s: check %q (%v), want %q", name, CheckOf(err), err, CheckCheckpointForm)
		}
	}
	if _, err := OpenCheckpoint(orig, vkey); err != nil {
		t.Fatal(err)
	}
}
