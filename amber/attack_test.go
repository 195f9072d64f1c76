package amber

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// TestIndexHugeCheckpointSize: a checkpoint signed by a hostile index's own
// key (LoadIndex with an empty vkey trusts index.pub) claiming an enormous
// tree must be refused as a count mismatch, not panic or allocate for it.
func TestIndexHugeCheckpointSize(t *testing.T) {
	t.Parallel()
	for _, size := range []int64{1 << 62, 1<<63 - 1, maxIndexEntries + 1} {
		dir := t.TempDir()
		skey, vkey, err := note.GenerateKey(nil, "hostile.example/index")
		if err != nil {
			t.Fatal(err)
		}
		s, _ := note.NewSigner(skey)
		signed, err := note.Sign(&note.Note{Text: FormatCheckpoint("hostile.example/index", size, tlog.Hash{})}, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, IndexPubFile), []byte(vkey+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, IndexCheckpointFile), signed, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, IndexEntriesFile), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = LoadIndex(dir, "")
		if got := CheckOf(err); got != CheckEntryCount {
			t.Errorf("size %d: failed check %q (%v), want %q", size, got, err, CheckEntryCount)
		}
	}
}

// TestIndexConsistencyAndInclusionEdges: every earlier checkpoint (sizes
// 0, 1, 2, 3, 4 … 9, so 2^k and 2^k+1 included) is proved extended by the
// latest one, a same-size or shorter fork signed by the same key is not,
// and every leaf's inclusion proof verifies at every size while an index
// at or past the size, or a proof with a hash added or removed, does not.
func TestIndexConsistencyAndInclusionEdges(t *testing.T) {
	t.Parallel()
	const n = 9
	dir, key := newTestIndex(t, 0)
	skey, _ := os.ReadFile(key)
	vkey, _ := os.ReadFile(filepath.Join(dir, IndexPubFile))
	var cps [][]byte
	var proofs [][][]byte // proofs[size][i]
	cp0, _ := os.ReadFile(filepath.Join(dir, IndexCheckpointFile))
	cps = append(cps, cp0)
	proofs = append(proofs, nil)
	for i := range n {
		if _, err := AppendCaseFile(dir, key, testEntry(i)); err != nil {
			t.Fatal(err)
		}
		cp, _ := os.ReadFile(filepath.Join(dir, IndexCheckpointFile))
		cps = append(cps, cp)
		ix, err := LoadIndex(dir, string(vkey))
		if err != nil {
			t.Fatal(err)
		}
		var ps [][]byte
		for j := 0; j <= i; j++ {
			p, err := ix.ProveIndex(int64(j))
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		proofs = append(proofs, ps)
		if _, err := ix.ProveIndex(int64(i + 1)); err == nil {
			t.Errorf("size %d: a proof of leaf %d was made", i+1, i+1)
		}
	}
	ix, err := LoadIndex(dir, string(vkey))
	if err != nil {
		t.Fatal(err)
	}
	for size, cp := range cps {
		if _, err := ix.VerifySince(cp); err != nil {
			t.Errorf("checkpoint of size %d: %v", size, err)
		}
		for i, p := range proofs[size] {
			got, err := VerifyProof(p, string(vkey))
			if err != nil || got.Index != int64(i) || got.Checkpoint.Size != int64(size) {
				t.Errorf("size %d leaf %d: %v", size, i, err)
			}
		}
	}
	// A fork: the same key signs another log (entry 1 changed) at every
	// size; none of its checkpoints is extended by the honest log.
	fork := filepath.Join(t.TempDir(), "fork")
	if err := os.CopyFS(fork, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fork, IndexEntriesFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fx, err := LoadIndexUnchecked(fork)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		e := testEntry(i)
		if i == 1 {
			e.SpecSHA256 = testEntry(50).SpecSHA256
		}
		if err := fx.commit(string(skey), e); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			continue // the fork's first leaf is the honest one
		}
		cp, _ := os.ReadFile(filepath.Join(fork, IndexCheckpointFile))
		if _, err := ix.VerifySince(cp); CheckOf(err) != CheckConsistency {
			t.Errorf("fork of size %d: failed check %q (%v), want %q", i+1, CheckOf(err), err, CheckConsistency)
		}
	}
	// Out-of-range and reshaped inclusion proofs.
	p := proofs[5][2]
	head, signed, _ := strings.Cut(string(p), "\n\n")
	lines := strings.Split(head, "\n")
	for _, tc := range []struct {
		name  string
		lines []string
	}{
		{"index = size", append(append([]string{}, lines[:2]...), append([]string{"index 5"}, lines[3:]...)...)},
		{"index past size", append(append([]string{}, lines[:2]...), append([]string{"index 6"}, lines[3:]...)...)},
		{"index negative", append(append([]string{}, lines[:2]...), append([]string{"index -1"}, lines[3:]...)...)},
		{"hash removed", lines[:len(lines)-1]},
		{"hash added", append(append([]string{}, lines...), lines[len(lines)-1])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifyProof([]byte(strings.Join(tc.lines, "\n")+"\n\n"+signed), string(vkey))
			if CheckOf(err) != CheckInclusion {
				t.Errorf("failed check %q (%v), want %q", CheckOf(err), err, CheckInclusion)
			}
		})
	}
}

// TestCheckpointSignatureEncodingIsStrict: a checkpoint whose signature
// line spells the same bytes with non-zero base64 padding bits is another
// byte string for the same signed note: refused, so one checkpoint has one
// spelling (a trusted checkpoint is compared and embedded byte for byte).
func TestCheckpointSignatureEncodingIsStrict(t *testing.T) {
	t.Parallel()
	dir, _ := newTestIndex(t, 3)
	p := filepath.Join(dir, IndexCheckpointFile)
	orig, _ := os.ReadFile(p)
	vkey, _ := os.ReadFile(filepath.Join(dir, IndexPubFile))
	// The signature is 4+64 bytes: base64 ends in one '=' and its last
	// character carries two padding bits.
	i := strings.LastIndex(string(orig), "=\n")
	if i < 0 {
		t.Fatalf("signature line without padding:\n%s", orig)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	v := strings.IndexByte(alphabet, orig[i-1])
	b := append([]byte(nil), orig...)
	b[i-1] = alphabet[v^1] // a padding bit: the decoded bytes are the same
	if _, err := OpenCheckpoint(b, string(vkey)); CheckOf(err) != CheckCheckpointForm {
		t.Fatalf("checkpoint with non-zero padding bits: check %q (%v), want %q", CheckOf(err), err, CheckCheckpointForm)
	}
	if _, err := OpenCheckpoint(orig, string(vkey)); err != nil {
		t.Fatal(err)
	}
}

func mustVerifier(t *testing.T, vkey string) note.Verifier {
	t.Helper()
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
