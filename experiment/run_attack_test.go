package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// editRecord rewrites the live record's bytes with edit (an attacker with
// write access to the state root).
func editRecord(t *testing.T, w *World, edit func(string) string) {
	t.Helper()
	b, err := os.ReadFile(w.RecordPath())
	if err != nil {
		t.Fatal(err)
	}
	out := edit(string(b))
	if out == string(b) {
		t.Fatal("edit did not change the record")
	}
	if err := os.WriteFile(w.RecordPath(), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}

// forgeRecord rewrites the live record through the API: mutate, optionally
// recompute run_id (as an attacker with this package's own functions can).
func forgeRecord(t *testing.T, w *World, recompute bool, mutate func(r *Record)) *Record {
	t.Helper()
	r, err := w.ReadRecord()
	if err != nil {
		t.Fatal(err)
	}
	mutate(r)
	if recompute {
		r.RunID = r.ComputeRunID()
	}
	b, err := r.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.RecordPath(), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

func writeWorldFile(t *testing.T, w *World, rel, content string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(w.Root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// freezeSplit freezes a candidate whose source file is separate from its
// binary, so the two can be attacked one at a time.
func freezeSplit(t *testing.T, w *World) {
	t.Helper()
	writeWorldFile(t, w, "implementer/src/main.txt", "source of the candidate\n", 0o644)
	o := freezeOpts()
	o.Files = []string{"implementer/src/main.txt", "implementer/tally-candidate"}
	if _, err := Freeze(bg, w, o); err != nil {
		t.Fatalf("freeze: %v", err)
	}
}

func verifyErr(w *World) error {
	rep, err := Verify(bg, w, VerifyOptions{})
	if err != nil {
		return err
	}
	return rep.Err()
}

func revealErr(w *World) error { _, err := Reveal(bg, w, RevealOptions{}); return err }

// The lifecycle attacks of TRVM-FORMATS §11.2 that apply before scoring,
// each in its own world: the attack is set up, then the operation it
// targets is refused by the named rule and the state root is byte-for-byte
// what it was before the operation.
func TestLifecycleAttacks(t *testing.T) {
	t.Parallel()
	pinned := func(t *testing.T, w *World) { mustPin(t, w) }
	frozen := func(t *testing.T, w *World) { mustPin(t, w); mustFreeze(t, w) }
	split := func(t *testing.T, w *World) { mustPin(t, w); freezeSplit(t, w) }
	revealed := func(t *testing.T, w *World) { mustPin(t, w); mustFreeze(t, w); mustReveal(t, w) }
	freezeWith := func(mod func(o *FreezeOptions)) func(w *World) error {
		return func(w *World) error {
			o := freezeOpts()
			mod(&o)
			_, err := Freeze(bg, w, o)
			return err
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, w *World)
		op    func(w *World) error
		rule  error
	}{
		{"A reveal before freeze", pinned, revealErr, errIllegalTransition},
		{"G complete from PINNED", pinned, func(w *World) error {
			_, _, err := Complete(bg, w, Measurement{}, CompleteOptions{replay: func(_ context.Context, in replayInput) (*replayOutcome, error) { return nil, nil }})
			return err
		}, errIllegalTransition},
		{"B candidate source modified after freeze", func(t *testing.T, w *World) {
			split(t, w)
			writeWorldFile(t, w, "implementer/src/main.txt", "source edited after the freeze\n", 0o644)
		}, revealErr, errPackageDigest},
		{"K only the frozen binary mutated", func(t *testing.T, w *World) {
			split(t, w)
			f, err := os.OpenFile(filepath.Join(w.Root, "implementer", "tally-candidate"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("\n// mutated\n"); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}, revealErr, errBinaryDigest},
		{"C command altered after freeze", func(t *testing.T, w *World) {
			frozen(t, w)
			editRecord(t, w, func(s string) string { return strings.Replace(s, `"{{OUT}}"`, `"{{OUT}}", "--lenient"`, 1) })
		}, revealErr, errRunID},
		{"C command altered after freeze, run_id re-derived", func(t *testing.T, w *World) {
			frozen(t, w)
			forgeRecord(t, w, true, func(r *Record) { r.Adapters[1].Command = append(r.Adapters[1].Command, "--lenient") })
		}, revealErr, errReceiptMissing},
		{"D command pointing outside the frozen subject", pinned, freezeWith(func(o *FreezeOptions) {
			o.Command = []string{o.Binary, "/etc/passwd", PlaceholderChallenges, PlaceholderOut}
		}), errCommand},
		{"D command[0] is not the frozen binary", pinned, freezeWith(func(o *FreezeOptions) {
			o.Command = []string{"/bin/sh", PlaceholderChallenges, PlaceholderOut}
		}), errCommand},
		{"E missing model", pinned, freezeWith(func(o *FreezeOptions) { o.Model = "" }), errProvenance},
		{"E missing toolchain", pinned, freezeWith(func(o *FreezeOptions) { o.Toolchain = " " }), errProvenance},
		{"E missing tool version", pinned, freezeWith(func(o *FreezeOptions) { o.ToolVersion = "" }), errProvenance},
		{"E missing files", pinned, freezeWith(func(o *FreezeOptions) { o.Files = nil }), errProvenance},
		{"L no binary", pinned, freezeWith(func(o *FreezeOptions) { o.Binary = "" }), errBinaryRequired},
		{"L binary that does not exist", pinned, freezeWith(func(o *FreezeOptions) { o.Binary = "implementer/none" }), errBinaryRequired},
		{"binary outside the world", pinned, freezeWith(func(o *FreezeOptions) { o.Binary = "../outside" }), errOutsideWorld},
		// Contained, but a second spelling of a subject: refused as a name,
		// not left for the digest to trip over.
		{"binary named through ..", pinned, freezeWith(func(o *FreezeOptions) { o.Binary = "governance/../" + o.Binary }), errOutsideWorld},
		{"package file named through .", pinned, freezeWith(func(o *FreezeOptions) { o.Files = append(o.Files, "./"+o.Files[0]) }), errOutsideWorld},
		{"forged record naming a package file through ..", func(t *testing.T, w *World) {
			frozen(t, w)
			forgeRecord(t, w, false, func(r *Record) {
				r.Adapters[1].PackageFiles = append(r.Adapters[1].PackageFiles, "implementer/../"+r.Adapters[1].PackageFiles[0])
			})
		}, verifyErr, errOutsideWorld},
		{"binary is a symlink out of the world", func(t *testing.T, w *World) {
			pinned(t, w)
			if err := os.Symlink("/bin/true", filepath.Join(w.Root, "implementer", "link")); err != nil {
				t.Fatal(err)
			}
		}, freezeWith(func(o *FreezeOptions) { o.Binary = "implementer/link" }), errOutsideWorld},
		{"P candidate freezes the challenge set", pinned, freezeWith(func(o *FreezeOptions) {
			o.Files = []string{"implementer/tally-candidate", "governance/holdout"}
		}), errSubjectInState},
		{"P candidate freezes the whole state root", pinned, freezeWith(func(o *FreezeOptions) {
			o.Files = []string{"governance"}
		}), errSubjectInState},
		{"P forged record authorising the receipts as a package file", func(t *testing.T, w *World) {
			frozen(t, w)
			forgeRecord(t, w, false, func(r *Record) {
				r.Adapters[1].PackageFiles = append(r.Adapters[1].PackageFiles, "governance/receipts")
			})
		}, revealErr, errSubjectInState},
		{"run_id that is a path", func(t *testing.T, w *World) {
			frozen(t, w)
			forgeRecord(t, w, false, func(r *Record) { r.RunID = "../blind-run" })
		}, verifyErr, errChain},
		{"J state root is a symlink to a REVEALED copy elsewhere", func(t *testing.T, w *World) {
			frozen(t, w)
			other := newWorld(t)
			revealed(t, other)
			if err := os.Rename(w.StateDir(), w.StateDir()+".orig"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other.StateDir(), w.StateDir()); err != nil {
				t.Fatal(err)
			}
		}, verifyErr, errStateRoot},
		{"J transition through a symlinked state root", func(t *testing.T, w *World) {
			frozen(t, w)
			other := newWorld(t)
			revealed(t, other)
			if err := os.Rename(w.StateDir(), w.StateDir()+".orig"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other.StateDir(), w.StateDir()); err != nil {
				t.Fatal(err)
			}
		}, func(w *World) error { _, err := Abort(bg, w, "via a link", TransitionOptions{}); return err }, errStateRoot},
		{"X implementation ../../../escape", pinned, freezeWith(func(o *FreezeOptions) { o.Implementation = "../../../escape" }), errLabel},
		{"duplicate label", pinned, freezeWith(func(o *FreezeOptions) { o.Implementation = "javascript" }), errDuplicateLabel},
		{"M status edited to REVEALED, run_id recomputed, no receipt", func(t *testing.T, w *World) {
			frozen(t, w)
			forgeRecord(t, w, true, func(r *Record) { r.Status = StatusRevealed })
		}, verifyErr, errReceiptMissing},
		{"M forged REVEALED cannot complete", func(t *testing.T, w *World) {
			frozen(t, w)
			forgeRecord(t, w, true, func(r *Record) { r.Status = StatusRevealed })
		}, func(w *World) error {
			_, _, err := Complete(bg, w, Measurement{}, CompleteOptions{replay: func(_ context.Context, in replayInput) (*replayOutcome, error) { return nil, nil }})
			return err
		}, errReceiptMissing},
		{"AA1 duplicate status in the record", func(t *testing.T, w *World) {
			frozen(t, w)
			editRecord(t, w, func(s string) string {
				return strings.Replace(s, `"status": "CANDIDATE_FROZEN",`, `"status": "REVEALED", "status": "CANDIDATE_FROZEN",`, 1)
			})
		}, revealErr, evidence.ClassDuplicateName},
		{"AA2 duplicate status in a receipt", func(t *testing.T, w *World) {
			frozen(t, w)
			r, _ := w.ReadRecord()
			p := filepath.Join(w.ReceiptsDir(), ReceiptFile(r.RunID, r.Status))
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"status": "CANDIDATE_FROZEN",`, `"status": "REVEALED", "status": "CANDIDATE_FROZEN",`, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, revealErr, evidence.ClassDuplicateName},
		{"receipt re-indented (same reading, other bytes)", func(t *testing.T, w *World) {
			frozen(t, w)
			r, _ := w.ReadRecord()
			p := filepath.Join(w.ReceiptsDir(), ReceiptFile(r.RunID, r.Status))
			b, _ := os.ReadFile(p)
			var buf bytes.Buffer
			if err := json.Indent(&buf, bytes.TrimSpace(b), "", "    "); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, append(buf.Bytes(), '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}, verifyErr, errReceiptForm},
		{"predecessor receipt without its final line feed", func(t *testing.T, w *World) {
			frozen(t, w)
			rc, _ := os.ReadDir(w.ReceiptsDir())
			for _, e := range rc {
				if strings.HasSuffix(e.Name(), ".PINNED.json") {
					p := filepath.Join(w.ReceiptsDir(), e.Name())
					b, _ := os.ReadFile(p)
					if err := os.WriteFile(p, bytes.TrimSuffix(b, []byte("\n")), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
		}, revealErr, errReceiptForm},
		{"AA2 unknown member in a predecessor receipt", func(t *testing.T, w *World) {
			frozen(t, w)
			r, _ := w.ReadRecord()
			rc, _ := os.ReadDir(w.ReceiptsDir())
			for _, e := range rc {
				if strings.HasSuffix(e.Name(), ".PINNED.json") {
					p := filepath.Join(w.ReceiptsDir(), e.Name())
					b, _ := os.ReadFile(p)
					if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"note": "pinned"`, `"note": "pinned", "approved_by": "root"`, 1)), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			_ = r
		}, revealErr, errRunShape},
		{"AA5 verdict_override in the record", func(t *testing.T, w *World) {
			frozen(t, w)
			editRecord(t, w, func(s string) string {
				return strings.Replace(s, `"status": "CANDIDATE_FROZEN",`, `"status": "CANDIDATE_FROZEN", "verdict_override": "COMPLETE_AND_VERIFIED",`, 1)
			})
		}, revealErr, errRunShape},
		{"AA6 blindness on an adapter", func(t *testing.T, w *World) {
			frozen(t, w)
			editRecord(t, w, func(s string) string {
				return strings.Replace(s, `"role": "candidate",`, `"role": "candidate", "blindness": "DISQUALIFIED",`, 1)
			})
		}, revealErr, errRunShape},
		{"AA7 instrument_files seat re-added", func(t *testing.T, w *World) {
			frozen(t, w)
			editRecord(t, w, func(s string) string {
				return strings.Replace(s, `"adapters": [`, `"instrument_files": [], "adapters": [`, 1)
			})
		}, revealErr, errRunShape},
		{"AA9 raw 0xFF in the record", func(t *testing.T, w *World) {
			frozen(t, w)
			editRecord(t, w, func(s string) string { return strings.Replace(s, `"candidate"`, "\"cand\xffidate\"", 1) })
		}, revealErr, evidence.ClassInvalidUTF8},
		{"AA10 role arbiter with run_id re-derived", func(t *testing.T, w *World) {
			frozen(t, w)
			forgeRecord(t, w, true, func(r *Record) { r.Adapters[1].Role = "arbiter" })
		}, revealErr, errRole},
		{"dirty state root: the receipt to write exists with other bytes", func(t *testing.T, w *World) {
			pinned(t, w)
			r, _ := w.ReadRecord()
			r.Status = StatusAborted
			writeWorldFile(t, w, "governance/receipts/"+ReceiptFile(r.ComputeRunID(), StatusAborted), "{\"planted\": true}\n", 0o644)
		}, func(w *World) error { _, err := Abort(bg, w, "test", TransitionOptions{}); return err }, errReceiptExists},
		{"pin while a run is in flight", pinned, func(w *World) error {
			_, err := Pin(bg, w, PinOptions{Reference: referenceSpec(t, w)})
			return err
		}, errRunInProgress},
		{"pin a package that leaks", func(t *testing.T, w *World) {
			writeWorldFile(t, w, "docs/spec/proof-wire/requirements/open/review-notes.md", "reviewer notes\n", 0o644)
		}, func(w *World) error { _, err := Pin(bg, w, PinOptions{Reference: referenceSpec(t, w)}); return err }, errBlindPackage},
		{"pin a release that is not archived", func(t *testing.T, w *World) {
			ents, _ := os.ReadDir(filepath.Join(w.PackageDir(), "releases"))
			for _, e := range ents {
				os.Remove(filepath.Join(w.PackageDir(), "releases", e.Name()))
			}
		}, func(w *World) error { _, err := Pin(bg, w, PinOptions{Reference: referenceSpec(t, w)}); return err }, errRunReleaseNotArchived},
		{"AB7 package grows after the pin", func(t *testing.T, w *World) {
			pinned(t, w)
			writeWorldFile(t, w, "docs/spec/proof-wire/requirements/open/EXTRA.md", "extra\n", 0o644)
		}, func(w *World) error { _, err := Freeze(bg, w, freezeOpts()); return err }, errBlindPackage},
		{"instrument moved after the pin", func(t *testing.T, w *World) {
			frozen(t, w)
			p := filepath.Join(w.PackageDir(), "experiment", "holdout-recipe-v1.schema.json")
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, append(b, ' '), 0o644); err != nil {
				t.Fatal(err)
			}
		}, revealErr, errInstrumentDigest},
		{"a later release while the run is in flight", func(t *testing.T, w *World) {
			frozen(t, w)
			if _, err := IssueRelease(w.PackageDir(), IssueOptions{SpecRevision: 1, ExperimentRevision: 2, PublicCorpusRevision: 1, HoldoutDir: w.HoldoutDir()}); err != nil {
				t.Fatal(err)
			}
		}, revealErr, errReleaseDrift},
		{"holdout with one byte changed", func(t *testing.T, w *World) {
			frozen(t, w)
			p := filepath.Join(w.HoldoutDir(), "INDEX.json")
			b, _ := os.ReadFile(p)
			if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}, revealErr, errHoldoutCommitment},
		{"R COMPLETE transition without a RESULT", func(t *testing.T, w *World) {
			revealed(t, w)
			prev, _ := w.ReadRecord()
			next := prev.Clone()
			next.Status = StatusComplete
			next.RunID = next.ComputeRunID()
			body, _ := NewReceipt(next, "completed", prev).Bytes()
			writeWorldFile(t, w, "governance/receipts/"+ReceiptFile(next.RunID, StatusComplete), string(body), 0o644)
			b, _ := next.Bytes()
			writeWorldFile(t, w, "governance/blind-run.json", string(b), 0o644)
		}, verifyErr, errResultMissing},
		{"receipt chain starts in the middle", func(t *testing.T, w *World) {
			frozen(t, w)
			ents, _ := os.ReadDir(w.ReceiptsDir())
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), ".PINNED.json") {
					os.Remove(filepath.Join(w.ReceiptsDir(), e.Name()))
				}
			}
		}, revealErr, errReceiptMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			tc.setup(t, w)
			before := stateSnapshot(t, w)
			err := tc.op(w)
			if !errors.Is(err, tc.rule) {
				t.Fatalf("err = %v\nwant rule %q", err, tc.rule)
			}
			sameStateSnapshot(t, before, stateSnapshot(t, w))
		})
	}
}
