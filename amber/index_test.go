package amber

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// rfc6962Root computes the Merkle tree hash of RFC 6962 §2.1 directly, as
// an independent reference for the index's root.
func rfc6962Root(leaves [][]byte) [32]byte {
	if len(leaves) == 0 {
		return sha256.Sum256(nil)
	}
	if len(leaves) == 1 {
		return sha256.Sum256(append([]byte{0}, leaves[0]...))
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	l, r := rfc6962Root(leaves[:k]), rfc6962Root(leaves[k:])
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

func testEntry(i int) *Entry {
	h := func(s string) string { x := sha256.Sum256([]byte(fmt.Sprint(s, i))); return fmt.Sprintf("%x", x) }
	return &Entry{CaseID: fmt.Sprintf("A-%06d", i), ManifestSHA256: h("m"), BaseBundleSHA256: h("b"),
		OraclePackSHA256: h("o"), SpecSHA256: h("s"), CutoffUTC: "2026-01-15T00:00:00Z", State: "active"}
}

func newTestIndex(t testing.TB, n int) (dir, keyPath string) {
	t.Helper()
	base := t.TempDir()
	dir, keyPath = filepath.Join(base, "index"), filepath.Join(base, "index.key")
	ix, err := InitIndex(dir, "cases.example.org/index", keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		skey, _ := os.ReadFile(keyPath)
		es := make([]*Entry, n)
		for i := range es {
			es[i] = testEntry(i)
		}
		if err := ix.AppendBatch(string(skey), es); err != nil {
			t.Fatal(err)
		}
	}
	return dir, keyPath
}

func TestIndexLifecycle(t *testing.T) {
	t.Parallel()
	dir, key := newTestIndex(t, 0)
	ix, err := LoadIndex(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if ix.Checkpoint.Size != 0 || ix.Checkpoint.Root != sha256.Sum256(nil) {
		t.Errorf("empty index checkpoint %d %x", ix.Checkpoint.Size, ix.Checkpoint.Root)
	}
	first := ix.Checkpoint.Signed
	for i := 0; i < 5; i++ {
		if _, err := AppendCaseFile(dir, key, testEntry(i)); err != nil {
			t.Fatal(err)
		}
	}
	mid, _ := os.ReadFile(filepath.Join(dir, IndexCheckpointFile))
	if _, err := RetireCaseFile(dir, key, "A-000002", "2026-03-01"); err != nil {
		t.Fatal(err)
	}
	ix, err = LoadIndex(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	// index_version = tree size; the root is RFC 6962 over the lines.
	if ix.Checkpoint.Size != 6 {
		t.Errorf("size %d, want 6", ix.Checkpoint.Size)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, IndexEntriesFile))
	lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	if want := rfc6962Root(lines); ix.Checkpoint.Root != want {
		t.Errorf("root %x, RFC 6962 reference %x", ix.Checkpoint.Root, want)
	}
	if string(lines[5]) != `{"base_bundle_sha256":"`+testEntry(2).BaseBundleSHA256+`","case_id":"A-000002","cutoff_utc":"2026-01-15T00:00:00Z","manifest_sha256":"`+
		testEntry(2).ManifestSHA256+`","oracle_pack_sha256":"`+testEntry(2).OraclePackSHA256+`","spec_sha256":"`+testEntry(2).SpecSHA256+`","state":"retired:2026-03-01"}` {
		t.Errorf("retirement line %s", lines[5])
	}
	// The checkpoint body is the C2SP form and the note verifies with the
	// published key through x/mod's note package.
	vkey, _ := os.ReadFile(filepath.Join(dir, IndexPubFile))
	v, err := note.NewVerifier(strings.TrimSpace(string(vkey)))
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(ix.Checkpoint.Signed, note.VerifierList(v))
	if err != nil {
		t.Fatal(err)
	}
	wantRoot := rfc6962Root(lines)
	if n.Text != "cases.example.org/index\n6\n"+base64.StdEncoding.EncodeToString(wantRoot[:])+"\n" {
		t.Errorf("checkpoint text %q", n.Text)
	}
	// Append-only growth from both earlier checkpoints.
	for _, old := range [][]byte{first, mid} {
		if _, err := ix.VerifySince(old); err != nil {
			t.Errorf("VerifySince: %v", err)
		}
	}
	if e, _, _ := ix.Latest("A-000002"); !e.Retired() {
		t.Errorf("latest state of A-000002 = %s", e.State)
	}
	// Refusals of the writer.
	for _, tc := range []struct {
		name string
		do   func() error
		want error
	}{
		{"append twice", func() error { _, err := AppendCaseFile(dir, key, testEntry(1)); return err }, errDuplicateCase},
		{"retire twice", func() error { _, err := RetireCaseFile(dir, key, "A-000002", "2026-03-02"); return err }, errRetired},
		{"retire unknown", func() error { _, err := RetireCaseFile(dir, key, "A-999999", "2026-03-02"); return err }, errNotIndexed},
		{"another key", func() error {
			other := filepath.Join(t.TempDir(), "other.key")
			if _, err := InitIndex(filepath.Join(t.TempDir(), "ix2"), "cases.example.org/index", other); err != nil {
				t.Fatal(err)
			}
			_, err := AppendCaseFile(dir, other, testEntry(9))
			return err
		}, errIndexKey},
		{"bad entry", func() error {
			e := testEntry(10)
			e.SpecSHA256 = "ABC"
			_, err := AppendCaseFile(dir, key, e)
			return err
		}, errEntryForm},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.do(); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if _, err := LoadIndex(dir, ""); err != nil {
				t.Fatalf("refused write damaged the index: %v", err)
			}
		})
	}
}

// TestIndexTampering: each change to a published index is caught by the
// named check.
func TestIndexTampering(t *testing.T) {
	t.Parallel()
	dir, key := newTestIndex(t, 7)
	trusted, _ := os.ReadFile(filepath.Join(dir, IndexCheckpointFile))
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, dir string)
		check  string
		since  bool
	}{
		{"entry edited in place", func(t *testing.T, dir string) {
			p := filepath.Join(dir, IndexEntriesFile)
			b, _ := os.ReadFile(p)
			b = bytes.Replace(b, []byte(testEntry(3).OraclePackSHA256), []byte(testEntry(4).OraclePackSHA256), 1)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, CheckRootHash, false},
		{"entries reordered", func(t *testing.T, dir string) {
			p := filepath.Join(dir, IndexEntriesFile)
			b, _ := os.ReadFile(p)
			ls := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
			ls[1], ls[2] = ls[2], ls[1]
			if err := os.WriteFile(p, append(bytes.Join(ls, []byte("\n")), '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}, CheckRootHash, false},
		{"entry removed", func(t *testing.T, dir string) {
			p := filepath.Join(dir, IndexEntriesFile)
			b, _ := os.ReadFile(p)
			ls := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
			if err := os.WriteFile(p, append(bytes.Join(ls[:6], []byte("\n")), '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}, CheckEntryCount, false},
		{"non-canonical spelling", func(t *testing.T, dir string) {
			p := filepath.Join(dir, IndexEntriesFile)
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, bytes.Replace(b, []byte(`{"base`), []byte(`{ "base`), 1), 0o644); err != nil {
				t.Fatal(err)
			}
		}, CheckEntryForm, false},
		{"checkpoint signed by another key", func(t *testing.T, dir string) {
			skey, _, _ := note.GenerateKey(nil, "cases.example.org/index")
			s, _ := note.NewSigner(skey)
			ix, _ := LoadIndex(dir, "")
			root, _ := ix.Root()
			signed, _ := note.Sign(&note.Note{Text: FormatCheckpoint("cases.example.org/index", 7, root)}, s)
			if err := os.WriteFile(filepath.Join(dir, IndexCheckpointFile), signed, 0o644); err != nil {
				t.Fatal(err)
			}
		}, CheckCheckpointSignature, false},
		{"history rewritten and re-signed", func(t *testing.T, dir string) {
			// The key holder rebuilds the log with entry 3 changed: the new
			// checkpoint verifies alone but not as an extension of the
			// trusted one.
			p := filepath.Join(dir, IndexEntriesFile)
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			ix, err := LoadIndexUnchecked(dir)
			if err != nil {
				t.Fatal(err)
			}
			skey, _ := os.ReadFile(key)
			var es []*Entry
			for i := 0; i < 8; i++ {
				e := testEntry(i)
				if i == 3 {
					e.OraclePackSHA256 = testEntry(99).OraclePackSHA256
				}
				es = append(es, e)
			}
			if err := ix.AppendBatch(string(skey), es); err != nil {
				t.Fatal(err)
			}
		}, CheckConsistency, true},
		{"retired case appended again", func(t *testing.T, dir string) {
			ix, _ := LoadIndex(dir, "")
			skey, _ := os.ReadFile(key)
			if err := ix.Retire(string(skey), "A-000001", "2026-02-02"); err != nil {
				t.Fatal(err)
			}
			e := testEntry(1)
			if err := ix.commit(string(skey), e); err != nil {
				t.Fatal(err)
			}
		}, CheckHistoryRules, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := copyDir(t, dir)
			tc.tamper(t, d)
			ix, err := LoadIndex(d, "")
			if err == nil && tc.since {
				_, err = ix.VerifySince(trusted)
			}
			if got := CheckOf(err); got != tc.check {
				t.Fatalf("failed check %q (%v), want %q", got, err, tc.check)
			}
		})
	}
}

func TestIndexProof(t *testing.T) {
	t.Parallel()
	dir, _ := newTestIndex(t, 13)
	ix, err := LoadIndex(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	vkey, _ := os.ReadFile(filepath.Join(dir, IndexPubFile))
	for i := 0; i < 13; i++ {
		proof, err := ix.Prove(testEntry(i).CaseID)
		if err != nil {
			t.Fatal(err)
		}
		p, err := VerifyProof(proof, string(vkey))
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if p.Index != int64(i) || *p.Entry != *testEntry(i) {
			t.Errorf("entry %d: proof says %d %+v", i, p.Index, p.Entry)
		}
	}
	proof, _ := ix.Prove("A-000005")
	_, otherV, _ := note.GenerateKey(nil, "cases.example.org/index")
	forged := bytes.Replace(proof, []byte("extra "+base64.StdEncoding.EncodeToString(ix.Lines[5])),
		[]byte("extra "+base64.StdEncoding.EncodeToString(ix.Lines[6])), 1)
	for _, tc := range []struct {
		name, vkey string
		proof      []byte
		check      string
	}{
		{"another index key", otherV, proof, CheckCheckpointSignature},
		{"entry swapped", string(vkey), forged, CheckInclusion},
		{"index changed", string(vkey), bytes.Replace(proof, []byte("index 5\n"), []byte("index 4\n"), 1), CheckInclusion},
		{"no checkpoint", string(vkey), bytes.Split(proof, []byte("\n\n"))[0], CheckInclusion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifyProof(tc.proof, tc.vkey)
			if got := CheckOf(err); got != tc.check {
				t.Fatalf("failed check %q (%v), want %q", got, err, tc.check)
			}
		})
	}
}

// TestIndexWriterLock: a second writer is refused while one holds the index.
func TestIndexWriterLock(t *testing.T) {
	t.Parallel()
	dir, key := newTestIndex(t, 1)
	unlock, err := lockIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AppendCaseFile(dir, key, testEntry(5)); !errors.Is(err, errIndexBusy) {
		t.Errorf("append while locked: %v, want errIndexBusy", err)
	}
	unlock()
	if _, err := AppendCaseFile(dir, key, testEntry(5)); err != nil {
		t.Errorf("append after unlock: %v", err)
	}
}
