package experiment

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkPinFreezeReveal times one full pin → freeze → reveal cycle on a
// fresh copy of the synthetic world (world copy and release issue are not
// timed).
func BenchmarkPinFreezeReveal(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		w := newWorld(b)
		ref := referenceSpec(b, w)
		b.StartTimer()
		if _, err := Pin(bg, w, PinOptions{Reference: ref}); err != nil {
			b.Fatal(err)
		}
		if _, err := Freeze(bg, w, freezeOpts()); err != nil {
			b.Fatal(err)
		}
		if _, err := Reveal(bg, w, RevealOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifySuperseded times `run verify` of a REVEALED run whose
// state root also holds n receipts of superseded runs: the chain walk reads
// only the receipts it needs, so the time should not grow with n beyond the
// directory listing.
func BenchmarkVerifySuperseded(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("receipts=%d", n), func(b *testing.B) {
			w := newWorld(b)
			mustPin(b, w)
			mustFreeze(b, w)
			mustReveal(b, w)
			r, _ := w.ReadRecord()
			for i := range n {
				old := r.Clone()
				var id [32]byte
				rand.Read(id[:])
				old.RunID = "brun-" + hex.EncodeToString(id[:])
				old.Status = States[i%len(States)]
				body, _ := NewReceipt(old, "superseded", nil).Bytes()
				if err := os.WriteFile(filepath.Join(w.ReceiptsDir(), ReceiptFile(old.RunID, old.Status)), body, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				rep, err := Verify(bg, w, VerifyOptions{})
				if err != nil || !rep.OK() {
					b.Fatalf("verify: %v %v", err, rep.Err())
				}
			}
		})
	}
}
