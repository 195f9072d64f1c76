package report

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/adapter"
	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/testshared/runworld"
)

// breakEdges makes the world's candidate report one wrong value: H3's
// candidate C2 has 4 edges (H3 predicate 2: EQ
// candidate.C2.structure.edges 4); this candidate says 3. Every other
// predicate still passes.
func breakEdges(t *testing.T) func(root string) {
	return func(root string) {
		p := filepath.Join(root, "implementer", "tally-candidate")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		const at = "const doc = {"
		if !strings.Contains(string(b), at) {
			t.Fatalf("%s: no %q to patch before", p, at)
		}
		b = []byte(strings.Replace(string(b), at, "if (observations.H3) observations.H3.candidate.C2.structure.edges = 3;\n"+at, 1))
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func needNode(t *testing.T) {
	t.Helper()
	if _, err := adapter.ResolveInterpreter("node"); err != nil {
		t.Skipf("node is not installed (the synthetic adapters are node scripts): %v", err)
	}
}

func runOptions(t *testing.T) adapter.RunOptions {
	return adapter.RunOptions{Runner: adapter.UnsandboxedRunner{}, Timeout: time.Minute, Scratch: t.TempDir()}
}

// A candidate failing one predicate is measured, then the run is aborted:
// its observation and per-predicate results stay archived and re-digest,
// and the report (HTML, rendered in Chromium, and Markdown) of the ABORTED
// run names the failing predicate with the expected and observed values.
// An archived file edited afterwards is refused by name.
func TestReportMeasuredThenAborted(t *testing.T) {
	t.Parallel()
	needNode(t)
	ctx := context.Background()
	w, _ := runworld.RevealedWith(t, filepath.Join(t.TempDir(), "world"), breakEdges(t))
	m, err := adapter.MeasureRun(ctx, w, runOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	cand := m.Subjects[1]
	if cand.Implementation != "candidate" || cand.Report == nil || cand.Report.Fail != 1 || cand.Report.Pass != 19 {
		t.Fatalf("candidate measured %+v", cand)
	}
	if _, err := experiment.Abort(ctx, w, "the candidate miscounts edges", experiment.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}

	// Archived: the observation's exact bytes and the scored results, the
	// failing predicate with both values.
	ms, err := experiment.ReadMeasurements(w, nil)
	if err != nil || len(ms) != 1 {
		t.Fatalf("measurements %v, %v", ms, err)
	}
	ls := ms[0].Subjects[1]
	if ms[0].Type != experiment.TypeMeasurement || ls.Observation == nil || ls.Scored == nil {
		t.Fatalf("logged %s, candidate %+v", ms[0].Type, ls)
	}
	obs, err := experiment.ReadArchived(w, ls.Observation)
	if err != nil || string(obs) != string(cand.Observation) {
		t.Fatalf("archived observation: %v (equal to the measured bytes: %v)", err, string(obs) == string(cand.Observation))
	}
	scored, err := experiment.ReadArchived(w, ls.Scored)
	if err != nil {
		t.Fatal(err)
	}
	so, err := evidence.ReadObject(scored)
	if err != nil {
		t.Fatal(err)
	}
	preds, _ := so.Get("predicates")
	rows, _ := preds.([]any)
	var failing []string
	for _, x := range rows {
		o := x.(*evidence.Object)
		g := func(k string) string { v, _ := o.Get(k); return str(v) }
		if g("verdict") != "PASS" {
			failing = append(failing, g("challenge")+"#"+g("index")+" "+g("op")+" "+g("path")+" expected "+g("expected")+" observed "+g("observed")+" "+g("verdict"))
		}
	}
	if want := "H3#2 EQ candidate.C2.structure.edges expected 4 observed 3 FAIL"; len(rows) != 20 || strings.Join(failing, "; ") != want {
		t.Fatalf("%d scored predicates, not passing %q, want %q", len(rows), failing, want)
	}
	rep, err := experiment.Verify(ctx, w, experiment.VerifyOptions{Evidence: true})
	if err != nil || !rep.OK() {
		t.Fatalf("the aborted run with its archive does not verify: %v %v", err, rep.Problems())
	}

	r, err := Gather(ctx, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const headline = "ABORTED after measurement: javascript 20/20 · candidate 19/20, failing H3#2 EQ candidate.C2.structure.edges: expected 4, observed 3"
	if r.Status != "ABORTED" || !r.Verified || r.Headline != headline {
		t.Fatalf("status %s verified %v headline %q, want %q", r.Status, r.Verified, r.Headline, headline)
	}
	var row *PredicateRow
	for i := range r.Predicates {
		if r.Predicates[i].Challenge == "H3" && r.Predicates[i].Index == 2 {
			row = &r.Predicates[i]
		}
	}
	if row == nil || row.Expected != "4" || strings.Join(row.Outcomes, ",") != "pass,fail" || strings.Join(row.Observed, ",") != "4,3" {
		t.Fatalf("H3 #2 row %+v", row)
	}
	page, md := render(t, r)
	for _, want := range []string{
		"**ABORTED after measurement\\: javascript 20/20 · candidate 19/20, failing H3\\#2 EQ candidate.C2.structure.edges\\: expected 4, observed 3**",
		"| `H3` | 2 | `EQ` | `candidate.C2.structure.edges` | `4` | pass, observed `4` | fail, observed `3` |",
		"a measurement, not a result",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	file := filepath.Join(t.TempDir(), "aborted.html")
	if err := WriteFile(file, false, r.HTML); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page, `<td class="mono nowrap">`) {
		t.Errorf("the timeline's time cells may wrap")
	}
	dom, log := chromium(t, file, "--dump-dom")
	if msgs := consoleMessages(log); len(msgs) > 0 {
		t.Errorf("console messages while rendering the report:\n%s", strings.Join(msgs, "\n"))
	}
	for _, want := range []string{
		`<div class="headline" id="headline">` + headline + `</div>`,
		`<td><code>candidate.C2.structure.edges</code></td><td><code>4</code></td>`,
		`<span class="pill fail">fail</span> <code>3</code>`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}

	// An archived file edited afterwards is named by the rule.
	sp := filepath.Join(w.StateDir(), filepath.FromSlash(ls.Scored.File))
	if err := os.Chmod(sp, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sp, []byte(strings.Replace(string(scored), `"observed": "3"`, `"observed": "4"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err = experiment.Verify(ctx, w, experiment.VerifyOptions{Evidence: true})
	if err != nil {
		t.Fatal(err)
	}
	if ps := rep.Problems(); len(ps) != 1 || !errors.Is(ps[0], experiment.ErrMeasurementEvidence) || !strings.Contains(ps[0].Error(), ls.Scored.File) {
		t.Fatalf("tampered scored results: problems %v, want one naming %s (%v)", ps, ls.Scored.File, experiment.ErrMeasurementEvidence)
	}
	if r, err := Gather(ctx, w, Options{}); err != nil || r.Verified {
		t.Errorf("the report of a run with a tampered archive is verified: %v", err)
	}
}

// A finding opened in an aborted run belongs to that run: a later run of
// the same world that completes shows it apart, as opened in the earlier
// run, never among its own outstanding findings under the green badge.
func TestReportFindingsOfOtherRunsApart(t *testing.T) {
	t.Parallel()
	needNode(t)
	ctx := context.Background()
	var original []byte
	w, first := runworld.RevealedWith(t, filepath.Join(t.TempDir(), "world"), func(root string) {
		var err error
		if original, err = os.ReadFile(filepath.Join(root, "implementer", "tally-candidate")); err != nil {
			t.Fatal(err)
		}
		breakEdges(t)(root)
	})
	if _, err := adapter.MeasureRun(ctx, w, runOptions(t)); err != nil {
		t.Fatal(err)
	}
	reg := holdout.OpenRegister(w.StateDir())
	opened, err := reg.Findings()
	if err != nil {
		t.Fatal(err)
	}
	var edges *holdout.FindingRecord
	for _, f := range opened {
		if f.Path == "H3.candidate.C2.structure.edges" {
			edges = f
		}
	}
	if edges == nil || edges.RunID != first.RunID {
		t.Fatalf("the miscounted edges were not opened as a finding of run %s: %+v", first.RunID, opened)
	}
	if _, err := experiment.Abort(ctx, w, "the candidate miscounts edges", experiment.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}

	// The second run: the same release, the correct candidate.
	if err := os.WriteFile(filepath.Join(w.Root, "implementer", "tally-candidate"), original, 0o755); err != nil {
		t.Fatal(err)
	}
	runworld.PinFreezeReveal(t, w, "second")
	m, err := adapter.MeasureRun(ctx, w, runOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	// This run sees only the deliberate H4 disagreements; the earlier
	// run's unclassified finding is not this run's to classify.
	for _, f := range m.Findings {
		if f.ID == edges.ID {
			t.Fatalf("the second run saw the first run's finding")
		}
		if _, err := reg.Classify(f.ID, "SPEC_GAP", "the recipe grammar is silent"); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := adapter.CompleteRun(ctx, w, runOptions(t)); err != nil {
		t.Fatalf("complete: %v (a finding of the aborted run must not block it)", err)
	}

	r, err := Gather(ctx, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "COMPLETE" || !r.Verified || r.Interop == nil || r.Interop.Verdict != "ALL FINDINGS CLASSIFIED" {
		t.Fatalf("status %s verified %v interop %+v", r.Status, r.Verified, r.Interop)
	}
	for _, f := range r.Findings {
		if f.ID == edges.ID || f.Class == "" {
			t.Errorf("this run's findings list %s (%s, class %q)", f.ID, f.Path, f.Class)
		}
	}
	if len(r.Findings) != len(m.Findings) || len(r.OtherFindings) != 1 || r.OtherFindings[0].ID != edges.ID || r.OtherFindings[0].RunID != first.RunID {
		t.Fatalf("findings %d (measured %d), others %+v", len(r.Findings), len(m.Findings), r.OtherFindings)
	}
	page, md := render(t, r)
	// The page's own findings table shows no unclassified finding; the
	// other run's is in the section apart, with the run that opened it.
	own, others, ok := strings.Cut(page[strings.Index(page, `<section id="findings">`):], `<h3 id="other-findings">`)
	if !ok || strings.Contains(own, "UNCLASSIFIED_FINDING") || !strings.Contains(others, "opened in run "+short(first.RunID)) {
		t.Errorf("findings section: this run's part has an unclassified finding, or the other run's is not apart")
	}
	if !strings.Contains(md, "**Opened in other runs**") || !strings.Contains(md, "opened in run `"+first.RunID+"`") {
		t.Errorf("Markdown does not list the other run's finding apart")
	}
}
