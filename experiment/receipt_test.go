package experiment

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/sign"
)

func TestSignedReceipts(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	key := filepath.Join(t.TempDir(), "operator")
	if err := sign.GenerateKey(key); err != nil {
		t.Fatal(err)
	}
	signer, err := sign.LoadSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	opt := TransitionOptions{Signer: signer}
	p, err := Pin(bg, w, PinOptions{Reference: referenceSpec(t, w), TransitionOptions: opt})
	if err != nil {
		t.Fatal(err)
	}
	o := freezeOpts()
	o.TransitionOptions = opt
	if _, err := Freeze(bg, w, o); err != nil {
		t.Fatal(err)
	}
	pub, err := sign.LoadPublicKey(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	mustVerify(t, w, VerifyOptions{SignerKey: pub})

	// Stock ssh-keygen verifies the same signature over the receipt bytes.
	t.Run("ssh-keygen verifies", func(t *testing.T) {
		if _, err := exec.LookPath("ssh-keygen"); err != nil {
			t.Skip("ssh-keygen not installed (openssh-client): the stock verifier cannot be run")
		}
		allowed := filepath.Join(t.TempDir(), "allowed_signers")
		if err := os.WriteFile(allowed, []byte(sign.AllowedSignersLine("operator", pub, ReceiptNamespace)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		receipt := filepath.Join(w.Root, filepath.FromSlash(p.Receipt))
		body, err := os.ReadFile(receipt)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", allowed, "-I", "operator", "-n", ReceiptNamespace, "-s", receipt+".sig")
		cmd.Stdin = strings.NewReader(string(body))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("ssh-keygen -Y verify: %v\n%s", err, out)
		}
	})

	// Another operator's key does not verify; a deleted signature is named.
	other := filepath.Join(t.TempDir(), "other")
	if err := sign.GenerateKey(other); err != nil {
		t.Fatal(err)
	}
	otherPub, _ := sign.LoadPublicKey(other + ".pub")

	// The signatures are checked on the bytes the chain was checked on: a
	// receipt read with other bytes than the chain's (a swap between the
	// two readings; here the chain's digest stands for the other reading)
	// is refused although its file and signature agree.
	good, _ := Verify(bg, w, VerifyOptions{SignerKey: pub})
	if len(good.Chain) == 0 {
		t.Fatal("no chain links")
	}
	swapped := slices.Clone(good.Chain)
	swapped[0].SHA256 = strings.Repeat("0", 64)
	if ps := w.signatureProblems(swapped, pub); len(ps) != 1 || !errors.Is(ps[0], errSignature) || !strings.Contains(ps[0].Error(), "changed during verification") {
		t.Errorf("signatures over other bytes than the chain's: %v", ps)
	}
	if ps := w.signatureProblems(good.Chain, pub); len(ps) != 0 {
		t.Errorf("signatures over the chain's bytes: %v", ps)
	}

	rep, _ := Verify(bg, w, VerifyOptions{SignerKey: otherPub})
	if !errors.Is(rep.Err(), errSignature) {
		t.Errorf("verify with another key: %v", rep.Err())
	}
	os.Remove(filepath.Join(w.Root, filepath.FromSlash(p.Receipt)) + ".sig")
	rep, _ = Verify(bg, w, VerifyOptions{SignerKey: pub})
	if !errors.Is(rep.Err(), errSignature) {
		t.Errorf("verify with a signature missing: %v", rep.Err())
	}
}

// The holdout may be kept outside the world until the reveal: it is then
// installed into governance/holdout and must match the commitment there; a
// set that does not match is not left behind.
func TestRevealInstallsAnOutsideHoldout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		tamper bool
	}{{"matching", false}, {"one byte changed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			outside := filepath.Join(t.TempDir(), "sealed-holdout")
			if err := os.Rename(w.HoldoutDir(), outside); err != nil {
				t.Fatal(err)
			}
			mustPin(t, w)
			mustFreeze(t, w)
			if tc.tamper {
				p := filepath.Join(outside, "INDEX.json")
				b, _ := os.ReadFile(p)
				if err := os.WriteFile(p, append(b, ' '), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Reveal(bg, w, RevealOptions{Holdout: outside})
			if tc.tamper {
				if !errors.Is(err, errHoldoutCommitment) {
					t.Fatalf("err = %v, want errHoldoutCommitment", err)
				}
				if _, serr := os.Lstat(w.HoldoutDir()); serr == nil {
					t.Error("a refused holdout was left in governance/holdout")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mustVerify(t, w, VerifyOptions{})
			if _, err := os.Stat(filepath.Join(w.HoldoutDir(), "INDEX.json")); err != nil {
				t.Error(err)
			}
		})
	}
}

// A retried transition whose receipt is already on disk with exactly its
// bytes (a crash between receipt and record) completes; the receipt is not
// rewritten.
func TestRetriedTransitionReusesItsReceipt(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	mustPin(t, w)
	r, _ := w.ReadRecord()
	next := r.Clone()
	next.Status = StatusAborted
	next.RunID = next.ComputeRunID()
	body, _ := NewReceipt(next, "aborted: retry", r).Bytes()
	writeWorldFile(t, w, "governance/receipts/"+ReceiptFile(next.RunID, StatusAborted), string(body), 0o444)
	tr, err := Abort(bg, w, "retry", TransitionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Reused || tr.RunID != next.RunID {
		t.Errorf("transition %+v", tr)
	}
	mustVerify(t, w, VerifyOptions{})
}

// The temporary file of an interrupted transition is explained by verify,
// never published under a receipt name, and removed by the next
// transition (which holds the lock, so no live writer owns it).
func TestInterruptedTransitionLeftovers(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	mustPin(t, w)
	stray := filepath.Join(w.ReceiptsDir(), tempPrefix+"brun-x.ABORTED.json.0123")
	writeWorldFile(t, w, "governance/receipts/"+filepath.Base(stray), `{"half": `, 0o644)
	rep := mustVerify(t, w, VerifyOptions{})
	if len(rep.Explained) != 1 || rep.Explained[0] != "receipts/"+filepath.Base(stray) {
		t.Errorf("explained = %v", rep.Explained)
	}
	mustFreeze(t, w)
	if _, err := os.Lstat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover still present after a transition: %v", err)
	}
}

// A reveal interrupted while it installed an outside holdout leaves only a
// staging directory beside governance/holdout, never a partial set there:
// the retried reveal installs the whole set, and the staging directory is
// removed by it.
func TestRevealAfterAnInterruptedInstall(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	outside := filepath.Join(t.TempDir(), "sealed-holdout")
	if err := os.Rename(w.HoldoutDir(), outside); err != nil {
		t.Fatal(err)
	}
	mustPin(t, w)
	mustFreeze(t, w)
	// What a crash during installTree leaves: a staging directory holding
	// part of the set (and a link, which the removal must not follow).
	stage := filepath.Join(w.StateDir(), tempPrefix+HoldoutDirName+".12345")
	if err := os.MkdirAll(filepath.Join(stage, "challenges"), 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(outside, "INDEX.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stage, "INDEX.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(stage, "challenges", "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := Reveal(bg, w, RevealOptions{Holdout: outside}); err != nil {
		t.Fatalf("reveal after an interrupted install: %v", err)
	}
	if _, err := os.Lstat(stage); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the interrupted install's staging directory is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "INDEX.json")); err != nil {
		t.Errorf("removing the staging directory followed its link: %v", err)
	}
	mustVerify(t, w, VerifyOptions{})
	if left, _ := filepath.Glob(filepath.Join(w.StateDir(), tempPrefix+"*")); len(left) != 0 {
		t.Errorf("left beside the holdout: %v", left)
	}
}
