package experiment

import (
	"errors"
	"testing"
)

// A measurement is taken without the state lock (adapters run for
// minutes); by the time Complete holds the lock, the record may be another
// run whose subjects carry the same labels. Completing it with the earlier
// measurement would archive one binary's observation under another
// binary's digest — a COMPLETE that verifies (replay re-scores the archive,
// it does not re-execute) for a candidate that never ran.
func TestCompleteRefusesAMeasurementOfAnotherRun(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	mustPin(t, w)
	mustFreeze(t, w)
	measured := mustReveal(t, w)
	m := honestMeasurement()
	m.RunID = measured.RunID

	// Meanwhile another operator aborts, re-pins and freezes a different
	// binary under the same label, and reveals.
	if _, err := Abort(bg, w, "replaced", TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	mustPin(t, w)
	writeWorldFile(t, w, "implementer/other-candidate", "#!/bin/sh\nexit 0\n", 0o755)
	o := freezeOpts()
	o.Files, o.Binary = []string{"implementer/other-candidate"}, "implementer/other-candidate"
	if _, err := Freeze(bg, w, o); err != nil {
		t.Fatal(err)
	}
	now := mustReveal(t, w)
	if now.RunID == measured.RunID {
		t.Fatal("the second run has the first run's identity; the test measures nothing")
	}

	before := stateSnapshot(t, w)
	_, _, err := Complete(bg, w, m, CompleteOptions{replay: honestReplay})
	if !errors.Is(err, errMeasuredRun) {
		t.Fatalf("complete with a measurement of %s while the record is %s: err = %v, want %q", measured.RunID, now.RunID, err, errMeasuredRun)
	}
	sameStateSnapshot(t, before, stateSnapshot(t, w))

	// A measurement that names no run is not bound to one either.
	m.RunID = ""
	if _, _, err := Complete(bg, w, m, CompleteOptions{replay: honestReplay}); !errors.Is(err, errMeasuredRun) {
		t.Fatalf("complete with an unbound measurement: err = %v, want %q", err, errMeasuredRun)
	}
}
