package amber

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom/sign"
)

// TestSignedDocumentsEveryByte: every single-bit change of a signed
// manifest, summary, run record, index checkpoint and entries file, and
// each document's signature moved onto another kind of document, is
// refused under the check that reads it.
func TestSignedDocumentsEveryByte(t *testing.T) {
	t.Parallel()
	f, rec, sum, _ := signedRecord(t)
	pub := f.s.PublicKey()
	type doc struct {
		name, path, check string
		verify            func() error
	}
	docs := []doc{
		{"manifest", filepath.Join(f.c.Dir, ManifestFile), CheckManifestSignature, func() error { _, _, err := VerifySignedManifest(f.c.Dir, pub); return err }},
		{"summary", sum, CheckSummarySignature, func() error { _, _, err := VerifySummary(sum, pub); return err }},
		{"record", rec, CheckRecordSignature, func() error { _, err := VerifyRecordSignature(rec, pub); return err }},
	}
	for _, d := range docs {
		t.Run(d.name, func(t *testing.T) {
			orig, err := os.ReadFile(d.path)
			if err != nil {
				t.Fatal(err)
			}
			if err := d.verify(); err != nil {
				t.Fatalf("honest %s: %v", d.name, err)
			}
			t.Cleanup(func() {
				if err := os.WriteFile(d.path, orig, 0o644); err != nil {
					t.Errorf("restoring %s: %v", d.path, err)
				}
			})
			for i := range orig {
				b := append([]byte(nil), orig...)
				b[i] ^= 0x01
				if err := os.WriteFile(d.path, b, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := d.verify(); CheckOf(err) != d.check {
					t.Fatalf("bit flipped at byte %d: check %q (%v), want %q", i, CheckOf(err), err, d.check)
				}
			}
			if err := os.WriteFile(d.path, append(append([]byte(nil), orig...), '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := d.verify(); CheckOf(err) != d.check {
				t.Fatalf("a byte appended: check %q (%v)", CheckOf(err), err)
			}
			if err := os.WriteFile(d.path, orig, 0o644); err != nil {
				t.Fatal(err)
			}
			// The same key's signature over the same bytes in every other
			// namespace.
			sigOrig, err := os.ReadFile(d.path + ".sig")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := os.WriteFile(d.path+".sig", sigOrig, 0o644); err != nil {
					t.Errorf("restoring %s.sig: %v", d.path, err)
				}
			})
			for _, ns := range []string{sign.NamespaceCaseManifest, sign.NamespaceSummary, sign.NamespaceRunRecord, sign.NamespaceReceipt} {
				sig, _ := f.s.Sign(ns, orig)
				if err := os.WriteFile(d.path+".sig", sig, 0o644); err != nil {
					t.Fatal(err)
				}
				err := d.verify()
				if string(sig) == string(sigOrig) {
					if err != nil {
						t.Errorf("own namespace %s: %v", ns, err)
					}
				} else if CheckOf(err) != d.check {
					t.Errorf("namespace %s: check %q (%v), want %q", ns, CheckOf(err), err, d.check)
				}
			}
		})
	}
	t.Run("index", func(t *testing.T) {
		vkey, _ := os.ReadFile(filepath.Join(f.ixDir, IndexPubFile))
		for _, name := range []string{IndexCheckpointFile, IndexEntriesFile} {
			p := filepath.Join(f.ixDir, name)
			orig, _ := os.ReadFile(p)
			for i := range orig {
				b := append([]byte(nil), orig...)
				b[i] ^= 0x01
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
				if _, err := LoadIndex(f.ixDir, string(vkey)); err == nil {
					t.Fatalf("%s: bit flipped at byte %d verifies", name, i)
				}
			}
			if err := os.WriteFile(p, orig, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := LoadIndex(f.ixDir, string(vkey)); err != nil {
			t.Fatal(err)
		}
	})
}
