package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/adapter"
	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
)

// Two runs of the same world in sequence: the first COMPLETE, the second
// pinned on identical content after it. Both are listed, and both verify
// and report with --run; the re-pin says which earlier run shares its
// state instead of blaming an interrupted attempt.
func TestRunsAddressable(t *testing.T) {
	t.Parallel()
	if _, err := adapter.ResolveInterpreter("node"); err != nil {
		t.Skipf("node is not installed: %v", err)
	}
	w, must := runWorld(t), mustExit(t)
	pin := []string{"run", "pin", "--world", w, "--reference", filepath.Join(w, "governance/reference-adapter.json")}
	first := must(0, pin...)
	if strings.Contains(first, "same state as earlier run") {
		t.Errorf("the first pin names an earlier run:\n%s", first)
	}
	must(0, "run", "freeze", "--world", w, "--implementation", "candidate", "--files", "implementer/tally-candidate",
		"--binary", "implementer/tally-candidate", "--toolchain", "node", "--model", "scripted", "--tool-version", "test")
	must(0, "run", "reveal", "--world", w)
	out := must(1, "run", "complete", "--world", w, "--no-sandbox")
	ids := regexp.MustCompile(`find-[0-9a-f]{64}`).FindAllString(out, -1)
	// The shell completes the unclassified finding ids (and, see
	// TestCompletionOfFlagValues, the classes).
	if code, comp, _ := runCLI(t, "__complete", "run", "finding", "classify", "--world", w, ""); code != 0 || len(ids) == 0 || !strings.Contains(comp, ids[0]+"\t") {
		t.Errorf("finding ids %v are not completed: exit %d\n%s", ids, code, comp)
	}
	for _, id := range ids {
		must(0, "run", "finding", "classify", "--world", w, id, "--class", "SPEC_GAP", "--ruling", "the grammar does not say")
	}
	code, out, errs := runCLI(t, "run", "complete", "--world", w, "--no-sandbox")
	if code != 0 {
		t.Fatalf("complete: exit %d\n%s%s", code, out, errs)
	}
	// Each adapter's start and end, with its time, on stderr only.
	for _, re := range []string{`(?m)^cleanroom: run complete: adapter candidate \[candidate\]: started$`, `(?m)^cleanroom: run complete: adapter candidate \[candidate\]: MEASURED in [0-9.]+m?s$`,
		`(?m)^cleanroom: run complete: adapter javascript \[reference\]: MEASURED in [0-9.]+m?s$`} {
		if !regexp.MustCompile(re).MatchString(errs) || strings.Contains(out, "adapter candidate [candidate]: started") {
			t.Errorf("no progress line %s on stderr:\n%s", re, errs)
		}
	}
	complete := regexp.MustCompile(`COMPLETE (brun-[0-9a-f]{64})`).FindStringSubmatch(out)
	if complete == nil {
		t.Fatalf("complete:\n%s", out)
	}

	// The second pin: identical content, so the same PINNED state.
	second := must(0, pin...)
	pinned := regexp.MustCompile(`PINNED (brun-[0-9a-f]{64})`).FindStringSubmatch(second)
	if pinned == nil || !strings.Contains(first, pinned[1]) {
		t.Fatalf("identical content must pin the same run_id (TRVM-FORMATS §5.2):\nfirst:\n%s\nsecond:\n%s", first, second)
	}
	for _, want := range []string{"same state as earlier run " + complete[1], "COMPLETE: ", "--run " + complete[1], "cleanroom release issue"} {
		if !strings.Contains(second, want) {
			t.Errorf("the re-pin does not say %q:\n%s", want, second)
		}
	}
	if strings.Contains(second, "interrupted") {
		t.Errorf("the re-pin blames an interrupted attempt:\n%s", second)
	}

	// run list: both runs, the current one last, the shared state marked.
	list := must(0, "run", "list", "--world", w)
	if !strings.Contains(list, complete[1]+" COMPLETE\n") || !strings.Contains(list, pinned[1]+" PINNED  (current record)") || !strings.Contains(list, "(shared)") {
		t.Errorf("run list:\n%s", list)
	}
	code, js, _ := runCLI(t, "--json", "run", "list", "--world", w)
	v, err := evidence.ReadObject([]byte(js))
	if code != 0 || err != nil {
		t.Fatalf("run list --json: exit %d %v\n%s", code, err, js)
	}
	rv, _ := v.Get("runs")
	runs, _ := rv.([]any)
	if len(runs) != 2 {
		t.Fatalf("run list --json has %d runs, want 2:\n%s", len(runs), js)
	}
	wantRuns := []struct {
		id, status string
		states     int
	}{{complete[1], "COMPLETE", 4}, {pinned[1], "PINNED", 1}}
	for i, want := range wantRuns {
		o := runs[i].(*evidence.Object)
		id, _ := o.Get("run_id")
		st, _ := o.Get("status")
		sts, _ := o.Get("states")
		if id != want.id || st != want.status || len(sts.([]any)) != want.states {
			t.Errorf("run %d: %v %v with %d states, want %s %s with %d", i, id, st, len(sts.([]any)), want.id, want.status, want.states)
		}
	}

	// --run completes with the runs of the world.
	if _, comp, _ := runCLI(t, "__complete", "run", "verify", "--world", w, "--run", ""); !strings.Contains(comp, complete[1]+"\tCOMPLETE") || !strings.Contains(comp, pinned[1]+"\tPINNED") {
		t.Errorf("--run does not complete the runs:\n%s", comp)
	}

	// Both runs verify and report by --run; the default is the current one.
	for _, r := range wantRuns {
		out := must(0, "run", "verify", "--world", w, "--run", r.id)
		if !strings.Contains(out, "run    "+r.id+" "+r.status) || !strings.Contains(out, "VERIFIED") {
			t.Errorf("verify --run %s:\n%s", r.id, out)
		}
		md := must(0, "run", "report", "--world", w, "--run", r.id)
		if !strings.Contains(md, r.id) {
			t.Errorf("report --run %s does not name the run:\n%s", r.id, md)
		}
		st := must(0, "run", "status", "--world", w, "--run", r.id)
		if strings.Count(st, "receipt ") != r.states {
			t.Errorf("status --run %s shows %d receipts, want %d:\n%s", r.id, strings.Count(st, "receipt "), r.states, st)
		}
	}
	for _, o := range []string{first, second, list} {
		if strings.Contains(o, "<nil>") || strings.Contains(o, "map[") {
			t.Errorf("a Go value in human output:\n%s", o)
		}
	}
	if out := must(0, "run", "report", "--world", w, "--run", complete[1]); !strings.Contains(out, "RESULT") {
		t.Errorf("the COMPLETE run's report has no RESULT:\n%s", out)
	}
	if out := must(0, "run", "verify", "--world", w); !strings.Contains(out, pinned[1]+" PINNED") {
		t.Errorf("verify without --run is the current record:\n%s", out)
	}
	// A run_id no receipt names, and one that is not a run_id, are unusable
	// arguments naming the rule.
	for _, id := range []string{"brun-" + strings.Repeat("0", 64), "../blind-run"} {
		if out := must(2, "run", "verify", "--world", w, "--run", id); !strings.Contains(out, "no such run in the state root") {
			t.Errorf("--run %s:\n%s", id, out)
		}
	}
	// An archived record whose content is not the run_id it is filed under
	// is refused, never believed.
	arch := filepath.Join(w, "governance/receipts", experiment.ArchivedRecordFile(complete[1]))
	b, err := os.ReadFile(arch)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(arch, []byte(strings.Replace(string(b), `"scripted"`, `"another"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := must(1, "run", "verify", "--world", w, "--run", complete[1]); !strings.Contains(out, "run_id does not identify the record") {
		t.Errorf("a tampered archived record:\n%s", out)
	}
}
