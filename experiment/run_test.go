package experiment

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// runCopyTree copies the regular files and directories of src into dst,
// keeping the permission bits (the candidate binary stays executable).
func runCopyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
}

// newWorld returns a fresh copy of the project's synthetic world
// (testdata/world) with its release issued, in its own temporary directory.
func newWorld(t testing.TB) *World { return newWorldWith(t, nil) }

// newWorldWith is newWorld with prepare (when not nil) changing the copy
// before its release is issued.
func newWorldWith(t testing.TB, prepare func(w *World)) *World {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "world")
	runCopyTree(t, filepath.Join(testshared.RepoRoot(t), "testdata", "world"), dir)
	w, err := OpenWorld(dir)
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(w)
	}
	if _, err := IssueRelease(w.PackageDir(), IssueOptions{SpecRevision: 1, ExperimentRevision: 1, PublicCorpusRevision: 1, HoldoutDir: w.HoldoutDir()}); err != nil {
		t.Fatalf("issuing the synthetic release: %v", err)
	}
	return w
}

func referenceSpec(t testing.TB, w *World) AdapterSpec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.StateDir(), "reference-adapter.json"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ParseAdapterSpec(b, "reference-adapter.json")
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func freezeOpts() FreezeOptions {
	return FreezeOptions{Implementation: "candidate", Files: []string{"implementer/tally-candidate"},
		Binary: "implementer/tally-candidate", Toolchain: "node 22", Model: "scripted-implementer", ToolVersion: "cleanroom-demo 1"}
}

var bg = context.Background()

func mustPin(t testing.TB, w *World) *Transition {
	t.Helper()
	tr, err := Pin(bg, w, PinOptions{Reference: referenceSpec(t, w)})
	if err != nil {
		t.Fatalf("pin: %v", err)
	}
	return tr
}

func mustFreeze(t testing.TB, w *World) *Transition {
	t.Helper()
	tr, err := Freeze(bg, w, freezeOpts())
	if err != nil {
		t.Fatalf("freeze: %v", err)
	}
	return tr
}

func mustReveal(t testing.TB, w *World) *Transition {
	t.Helper()
	tr, err := Reveal(bg, w, RevealOptions{})
	if err != nil {
		t.Fatalf("reveal: %v", err)
	}
	return tr
}

func mustVerify(t testing.TB, w *World, opt VerifyOptions) *RunReport {
	t.Helper()
	rep, err := Verify(bg, w, opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatalf("verify: %v", err)
	}
	return rep
}

// snapshot is every file under the state root with its bytes.
func stateSnapshot(t testing.TB, w *World) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(w.StateDir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(w.StateDir(), p)
		out[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameStateSnapshot(t testing.TB, before, after map[string]string) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("state file %s changed or vanished", k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("state file %s appeared", k)
		}
	}
}

func TestLifecycleHonest(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	p := mustPin(t, w)
	if p.Status != StatusPinned || p.PreviousRunID != "" {
		t.Fatalf("pin gave %+v", p)
	}
	rep := mustVerify(t, w, VerifyOptions{})
	if len(rep.Chain) != 1 {
		t.Errorf("chain after pin has %d links", len(rep.Chain))
	}
	f := mustFreeze(t, w)
	if f.PreviousRunID != p.RunID || f.RunID == p.RunID {
		t.Errorf("freeze %+v does not follow pin %s", f, p.RunID)
	}
	r := mustReveal(t, w)
	rep = mustVerify(t, w, VerifyOptions{})
	if len(rep.Chain) != 3 || rep.Status != StatusRevealed || rep.RunID != r.RunID {
		t.Errorf("after reveal: status %s, %d links", rep.Status, len(rep.Chain))
	}
	rec, err := w.ReadRecord()
	if err != nil {
		t.Fatal(err)
	}
	c, ok := rec.Adapter("candidate")
	if !ok || c.BinaryDigest == nil || c.Environment == nil || c.Environment.Model != "scripted-implementer" {
		t.Errorf("frozen candidate %+v", c)
	}
	// The receipt on disk is exactly the receipt body of the record.
	got, err := os.ReadFile(filepath.Join(w.ReceiptsDir(), ReceiptFile(r.RunID, StatusRevealed)))
	if err != nil {
		t.Fatal(err)
	}
	// Checked against TRVM-FORMATS §5.2 written out here, not against the
	// code's own receipt builder: member order, the values that bind it to
	// the chain, and the JSON.stringify(v, null, 1) + "\n" byte form.
	o, err := evidence.ReadObject(got)
	if err != nil {
		t.Fatalf("REVEALED receipt refused: %v", err)
	}
	if names := strings.Join(o.Names(), ","); names != "type,run_id,status,previous_run_id,previous_status,spec_release_id,blind_package_id,instrument_digest,adapters,note" {
		t.Errorf("REVEALED receipt members %s", names)
	}
	for _, m := range []struct {
		name string
		want any
	}{
		{"type", "TRVM-BLIND-RUN-RECEIPT-v2"},
		{"run_id", r.RunID},
		{"status", "REVEALED"},
		{"previous_run_id", f.RunID},
		{"previous_status", "CANDIDATE_FROZEN"},
		{"spec_release_id", rec.SpecReleaseID},
		{"blind_package_id", rec.BlindPackageID},
		{"instrument_digest", rec.InstrumentDigest},
		{"note", "challenge set opened"},
	} {
		if v, _ := o.Get(m.name); v != m.want {
			t.Errorf("REVEALED receipt %s = %v, want %v", m.name, v, m.want)
		}
	}
	av, _ := o.Get("adapters")
	adapters, _ := av.([]any)
	if len(adapters) != len(rec.Adapters) {
		t.Errorf("REVEALED receipt has %d adapters, the record %d", len(adapters), len(rec.Adapters))
	}
	for i := range min(len(adapters), len(rec.Adapters)) {
		ao, _ := adapters[i].(*evidence.Object)
		if impl, _ := ao.Get("implementation"); impl != rec.Adapters[i].Implementation {
			t.Errorf("receipt adapter %d is %v, the record's %s (record order)", i, impl, rec.Adapters[i].Implementation)
		}
	}
	if !bytes.HasPrefix(got, []byte("{\n \"type\": \"")) || !bytes.HasSuffix(got, []byte("\n}\n")) {
		t.Errorf("REVEALED receipt is not in the one-space JSON.stringify form:\n%s", got)
	}
	a, err := Abort(bg, w, "test over", TransitionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep = mustVerify(t, w, VerifyOptions{})
	if rep.Status != StatusAborted || len(rep.Chain) != 4 {
		t.Errorf("after abort: %s, %d links", rep.Status, len(rep.Chain))
	}
	// A new run may be pinned after a terminal one; the old history stays.
	p2 := mustPin(t, w)
	if p2.Superseded == "" || !strings.HasPrefix(p2.Superseded, a.RunID) {
		t.Errorf("superseded = %q", p2.Superseded)
	}
	mustVerify(t, w, VerifyOptions{})
}

// The shared TRVM world verifies except for exactly the absent .mjs
// program files (five instrument members, seven reference package files):
// every file-naming problem names one of them, and every other problem is a
// digest mismatch those absences explain.
func TestConformanceVerifySharedWorld(t *testing.T) {
	t.Parallel()
	w, err := OpenWorld(testshared.World(t, "world"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(bg, w, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, f := range []string{"evidence", "holdout_schema", "holdout_score_core", "holdout_runner", "run_state"} {
		want["docs/spec/proof-wire/experiment/"+f+".mjs"] = true
	}
	for _, f := range []string{"js_holdout_adapter", "cas", "nest_bundle", "nest_check", "derive_protocol", "certificate", "schema"} {
		want["governance/"+f+".mjs"] = true
	}
	named := map[string]bool{}
	for _, p := range rep.Problems() {
		if p.Path != "" {
			if !want[p.Path] {
				t.Errorf("problem names %s, which is not an absent .mjs file: %v", p.Path, p)
			}
			named[p.Path] = true
			continue
		}
		switch p.Rule {
		case errInstrumentDigest, errPackageDigest, errBlindPackage:
		default:
			t.Errorf("unexplained problem: %v", p)
		}
	}
	for f := range want {
		if !named[f] {
			t.Errorf("absent file %s is not named", f)
		}
	}
	for _, c := range rep.Checks {
		// The pinned instrument digest recomputes from the recorded list.
		if c.Name == "instrument_digest matches the tree" && (len(c.Details) != 1 || !strings.Contains(c.Details[0], "only their absence differs")) {
			t.Errorf("instrument check: %v", c.Details)
		}
		if c.Name == "receipt chain reaches PINNED" && !c.OK {
			t.Errorf("the PINNED chain does not verify: %v", c.Details)
		}
	}
}

func TestLockExcludesASecondTransition(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	mustPin(t, w)
	lk, err := w.lockState(bg, true)
	if err != nil {
		t.Fatal(err)
	}
	before := stateSnapshot(t, w)
	short, cancel := context.WithTimeout(bg, 150*time.Millisecond)
	defer cancel()
	_, err = Freeze(short, w, freezeOpts())
	if !errors.Is(err, errLocked) {
		t.Fatalf("freeze under another holder's lock: err = %v, want errLocked", err)
	}
	sameStateSnapshot(t, before, stateSnapshot(t, w))
	lk.unlock()
	// Released: the same transition now goes through.
	mustFreeze(t, w)
}

func TestLockWaitsForTheHolder(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	mustPin(t, w)
	lk, err := w.lockState(bg, true)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(bg, 30*time.Second)
		defer cancel()
		_, err := Freeze(c, w, freezeOpts())
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("freeze finished while the lock was held: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	lk.unlock()
	if err := <-done; err != nil {
		t.Fatalf("freeze after the lock was released: %v", err)
	}
}

// Two concurrent freezes of different candidates: exactly one wins, the
// other is refused by the state machine, and the chain verifies.
func TestConcurrentTransitionsSerialise(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	mustPin(t, w)
	errs := make(chan error, 2)
	for _, label := range []string{"cand-a", "cand-b"} {
		go func() {
			o := freezeOpts()
			o.Implementation = label
			c, cancel := context.WithTimeout(bg, 30*time.Second)
			defer cancel()
			_, err := Freeze(c, w, o)
			errs <- err
		}()
	}
	var ok, refused int
	for range 2 {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case errors.Is(err, errIllegalTransition):
			refused++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 || refused != 1 {
		t.Errorf("%d succeeded, %d refused; want 1 and 1", ok, refused)
	}
	mustVerify(t, w, VerifyOptions{})
}
