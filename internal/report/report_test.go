package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/adapter"
	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/testshared/runworld"
	"golang.org/x/sys/unix"
)

// hostile is written wherever a person or a model supplies text (a ruling,
// a transcript path): it must reach the page as text, never as markup.
const hostile = `<script>alert(1)</script><img src="http://127.0.0.1:9/x.png">| **bold** ` + "`tick`"

// revealedWorld is a run of the synthetic world at REVEALED (see
// runworld.Revealed).
func revealedWorld(t *testing.T) *experiment.World {
	t.Helper()
	w, _ := runworld.Revealed(t, filepath.Join(t.TempDir(), "world"))
	return w
}

// completeWorld takes a revealed world to COMPLETE through the adapter
// package: measure (which opens the deliberate interop findings), classify
// them with the given ruling, complete. The adapters run unsandboxed: the
// sandboxed path is the adapter package's to test.
func completeWorld(t *testing.T, w *experiment.World, ruling string) []*holdout.FindingRecord {
	t.Helper()
	if _, err := adapter.ResolveInterpreter("node"); err != nil {
		t.Skipf("node is not installed (the synthetic adapters are node scripts): %v", err)
	}
	ctx := context.Background()
	opt := adapter.RunOptions{Runner: adapter.UnsandboxedRunner{}, Timeout: time.Minute, Scratch: t.TempDir()}
	if _, err := adapter.MeasureRun(ctx, w, opt); err != nil && !strings.Contains(err.Error(), "a frozen subject was not measured") {
		t.Logf("measure: %v", err)
	}
	reg := holdout.OpenRegister(w.StateDir())
	open, err := reg.Findings()
	if err != nil {
		t.Fatal(err)
	}
	if len(open) == 0 {
		t.Fatal("the synthetic world's candidate must disagree with the reference (the deliberate interop finding)")
	}
	for _, f := range open {
		if _, err := reg.Classify(f.ID, "GO_PRODUCER_DEFECT", ruling); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, _, err := adapter.CompleteRun(ctx, w, opt); err != nil {
		t.Fatalf("complete: %v", err)
	}
	fs, err := reg.Findings()
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// writeTranscript writes a clean-room transcript in the room's JSON Lines
// format: one served read, one refused read of a hostile path, one write.
func writeTranscript(t *testing.T, bpkg string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "room.jsonl")
	sum := strings.Repeat("ab", 32)
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(hostile)
	lines := []string{
		`{"blind_package_id":"` + bpkg + `","event":"start","instruction_path":"experiment/CLEAN-ROOM-PROMPT-v1.md","instruction_sha256":"` + sum + `","seal_digest":"` + sum + `","served_file_count":30,"time":"2026-01-01T00:00:00Z","type":"TRVM-CLEAN-ROOM-TRANSCRIPT-v1","view_mountinfo":"","workspace":"/ws"}`,
		`{"event":"call","outcome":"served","path":"TOY-TALLY-v1.md","seq":1,"time":"2026-01-01T00:00:01Z","tool":"read_file"}`,
		`{"event":"call","outcome":"refused","path":"` + esc + `","seq":2,"time":"2026-01-01T00:00:02Z","tool":"read_file"}`,
		`{"bytes":13,"event":"call","outcome":"written","path":"tally/main.go","seq":3,"sha256":"` + sum + `","time":"2026-01-01T00:00:03Z","tool":"write_source"}`,
		`{"calls":3,"event":"end","files_read":["TOY-TALLY-v1.md"],"files_written":[{"path":"tally/main.go","sha256":"` + sum + `","size":13}],"refused_reads":["` + esc + `"],"time":"2026-01-01T00:00:04Z"}`,
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func render(t *testing.T, r *Report) (html, md string) {
	t.Helper()
	var h, m bytes.Buffer
	if err := r.HTML(&h); err != nil {
		t.Fatal(err)
	}
	if err := r.Markdown(&m); err != nil {
		t.Fatal(err)
	}
	return h.String(), m.String()
}

// A revealed run has a timeline and its subjects but nothing scored: the
// report says so rather than showing zeros.
func TestReportRevealed(t *testing.T) {
	t.Parallel()
	w := revealedWorld(t)
	r, err := Gather(context.Background(), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "REVEALED" || !r.Verified {
		t.Errorf("status %s verified %v, want REVEALED verified", r.Status, r.Verified)
	}
	var states []string
	for _, e := range r.Timeline {
		states = append(states, e.Status)
	}
	if got := strings.Join(states, " "); got != "PINNED CANDIDATE_FROZEN REVEALED" {
		t.Fatalf("timeline %q", got)
	}
	// Each event names its receipt world-relative and lists a subject only
	// at the receipt that first admits it: the reference at the pin, the
	// candidate at the freeze.
	for i, want := range []struct{ status, admitted string }{
		{"PINNED", "javascript (reference)"},
		{"CANDIDATE_FROZEN", "candidate (candidate)"},
		{"REVEALED", ""},
	} {
		e := r.Timeline[i]
		if file := "governance/receipts/" + e.RunID + "." + want.status + ".json"; e.Receipt != file || !strings.HasPrefix(e.RunID, "brun-") {
			t.Errorf("%s: receipt %q of run %q, want %q", want.status, e.Receipt, e.RunID, file)
		}
		if got := strings.Join(e.Admitted, "; "); !strings.HasPrefix(got, want.admitted) || (want.admitted == "") != (got == "") || strings.Count(got, "; ") != 0 {
			t.Errorf("%s admits %q, want one entry starting %q", want.status, got, want.admitted)
		}
	}
	if last := r.Timeline[len(r.Timeline)-1]; last.RunID != r.RunID {
		t.Errorf("the last receipt is of run %s, the record's run is %s", last.RunID, r.RunID)
	}
	if len(r.Subjects) != 2 || r.Subjects[0].Implementation != "javascript" || r.Subjects[1].Implementation != "candidate" {
		t.Fatalf("subjects %+v", r.Subjects)
	}
	for _, s := range r.Subjects {
		if s.Scored || s.Verdict != "NOT MEASURED" {
			t.Errorf("%s: scored %v verdict %q before completion", s.Implementation, s.Scored, s.Verdict)
		}
	}
	if len(r.Predicates) != 0 || r.Interop != nil {
		t.Errorf("a revealed run shows no results: %d predicates, interop %v", len(r.Predicates), r.Interop)
	}
	html, md := render(t, r)
	for _, want := range []string{r.RunID, r.SpecReleaseID, r.BlindPackageID, r.InstrumentDigest, "CANDIDATE_FROZEN", "scripted-implementer", "cleanroom run complete"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
		if !strings.Contains(strings.ReplaceAll(md, `\_`, "_"), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
}

// A COMPLETE run: every predicate of both implementations, the deliberate
// interop difference side by side with its class and ruling, the register
// and the transcript summary — and every hostile string escaped.
func TestReportComplete(t *testing.T) {
	t.Parallel()
	w := revealedWorld(t)
	findings := completeWorld(t, w, hostile)
	rec, err := w.ReadRecord()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Gather(context.Background(), w, Options{Transcript: writeTranscript(t, rec.BlindPackageID)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "COMPLETE" || !r.Verified || len(r.Notes) != 0 {
		t.Fatalf("status %s verified %v notes %q", r.Status, r.Verified, r.Notes)
	}
	if r.HoldoutEntries != 7 || len(r.Challenges) != 7 {
		t.Errorf("holdout entries %d, challenge rows %d; the synthetic holdout has 7 (H1–H7)", r.HoldoutEntries, len(r.Challenges))
	}
	// The synthetic holdout has 20 predicates; both adapters satisfy all.
	if len(r.Predicates) != 20 {
		t.Errorf("%d predicate rows, want 20", len(r.Predicates))
	}
	for _, p := range r.Predicates {
		if p.Challenge == "H3" && p.Index == 5 && p.Path != "candidate.C2.structure.films_below_distinct vs candidate.C2.structure.films_below_by_edge_multiplicity" {
			t.Errorf("H3 #5 compares two roots; shown as %q", p.Path)
		}
		if strings.Join(p.Outcomes, ",") != "pass,pass" {
			t.Errorf("%s #%d: %v", p.Challenge, p.Index, p.Outcomes)
		}
	}
	// Each challenge's cell tallies its predicates: all pass, for both.
	perChallenge := map[string]int{}
	for _, p := range r.Predicates {
		perChallenge[p.Challenge]++
	}
	for _, c := range r.Challenges {
		want := fmt.Sprintf("%d pass, 0 fail, 0 unresolved", perChallenge[c.ID])
		if perChallenge[c.ID] == 0 || strings.Join(c.Cells, "|") != want+"|"+want || strings.Join(c.Class, ",") != "pass,pass" {
			t.Errorf("%s: cells %q classes %v, want %q for both", c.ID, c.Cells, c.Class, want)
		}
	}
	for _, s := range r.Subjects {
		if !s.Scored || s.Total != 20 || s.Pass != 20 || s.Verdict != "PASS" || s.ResultPredicates == nil || s.ResultPredicates.Satisfied != 20 {
			t.Errorf("%s: %+v", s.Implementation, s)
		}
	}
	if r.Interop == nil || len(r.Interop.Pairs) != 1 || r.Interop.Verdict != "ALL FINDINGS CLASSIFIED" {
		t.Fatalf("interop %+v", r.Interop)
	}
	diffs := r.Interop.Pairs[0].Differences
	paths := map[string]Difference{}
	for _, d := range diffs {
		paths[d.Path] = d
	}
	if d, ok := paths["H4.candidate"]; !ok || d.B != "ABSENT" || d.Class != "GO_PRODUCER_DEFECT" || d.Ruling != hostile {
		t.Errorf("H4.candidate difference %+v (all: %+v)", d, diffs)
	}
	if len(r.Findings) != len(findings) {
		t.Errorf("%d findings shown, the register has %d", len(r.Findings), len(findings))
	}
	if r.Room == nil || len(r.Room.FilesRead) != 1 || len(r.Room.RefusedReads) != 1 || len(r.Room.FilesWritten) != 1 || r.Room.Calls != 3 {
		t.Fatalf("room %+v", r.Room)
	}

	page, md := render(t, r)
	for _, want := range []string{"H4.candidate", "GO_PRODUCER_DEFECT", "TOY-TALLY-v1.md", "tally/main.go", "RESULT verifies and replays", html.EscapeString(CSP)} {
		if !strings.Contains(page, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// html/template escapes the hostile text: no tag, no fetch survives.
	for _, bad := range []string{"<script", "<img", "http://127.0.0.1:9/x.png\">"} {
		if strings.Contains(page, bad) {
			t.Errorf("HTML carries %q from a hostile value", bad)
		}
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the hostile ruling is not shown as text")
	}
	// Markdown: the hostile ruling cannot open a tag or split a table row.
	for _, line := range strings.Split(md, "\n") {
		if strings.Contains(line, "alert(1)") {
			if out := outsideCode(line); strings.Contains(out, "<script") || strings.Contains(out, "<img") {
				t.Errorf("Markdown line carries raw markup: %s", line)
			}
			if strings.HasPrefix(line, "|") && strings.Count(line, "|")-strings.Count(line, `\|`) != 7 {
				t.Errorf("a hostile value changed the table's cells: %s", line)
			}
		}
	}
	for _, want := range []string{"## Interop differences", "`H4.candidate`", "## Clean room", "**Refused reads (1)**", "| `H1` | 3 | `VERDICT_EQ` | `D.verdict` | `\"VERIFIED\"` | pass, observed `\"VERIFIED\"` | pass, observed `\"VERIFIED\"` |"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
}

// A world with no run record is refused; a broken part of a run becomes a
// note naming the file, and the rest is still rendered.
func TestReportBrokenParts(t *testing.T) {
	t.Parallel()
	w := revealedWorld(t)
	r, err := Gather(context.Background(), w, Options{Transcript: filepath.Join(t.TempDir(), "absent.jsonl")})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Notes) != 2 || !strings.Contains(r.Notes[1], "absent.jsonl") || !strings.Contains(r.Notes[1], "no such file") {
		t.Errorf("notes %q: want the run state and the absent transcript named", r.Notes)
	}
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"event":"start"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err = Gather(context.Background(), w, Options{Transcript: bad})
	if err != nil {
		t.Fatal(err)
	}
	if r.Room != nil || !strings.Contains(strings.Join(r.Notes, "\n"), "malformed transcript") {
		t.Errorf("a malformed transcript: room %v notes %q", r.Room, r.Notes)
	}
	// A FIFO named as the transcript is refused at once, not waited on
	// (no writer ever opens it here).
	fifo := filepath.Join(t.TempDir(), "fifo.jsonl")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err = Gather(context.Background(), w, Options{Transcript: fifo})
	if err != nil {
		t.Fatal(err)
	}
	if notes := strings.Join(r.Notes, "\n"); r.Room != nil || !strings.Contains(notes, "fifo.jsonl") || !strings.Contains(notes, evidence.ErrNotRegular.Error()) {
		t.Errorf("a FIFO as transcript: room %v notes %q", r.Room, r.Notes)
	}
	if err := os.Remove(w.RecordPath()); err != nil {
		t.Fatal(err)
	}
	if _, err := Gather(context.Background(), w, Options{}); err == nil || !strings.Contains(err.Error(), "no run record") {
		t.Errorf("no record: %v, want %q", err, "no run record")
	}
}

// Output files are created exclusively; --replace swaps them atomically;
// a failed render writes nothing.
func TestWriteFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "r.html")
	page := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	errRender := errors.New("boom")
	cases := []struct {
		name    string
		replace bool
		render  func(io.Writer) error
		wantErr error
		want    string
	}{
		{"create", false, page("one"), nil, "one"},
		{"exists", false, page("two"), fs.ErrExist, "one"},
		{"replace", true, page("three"), nil, "three"},
		{"render fails", true, func(io.Writer) error { return errRender }, errRender, "three"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := WriteFile(p, c.replace, c.render)
			if !errors.Is(err, c.wantErr) { // errors.Is(err, nil) is err == nil
				t.Errorf("err %v, want %v", err, c.wantErr)
			}
			b, _ := os.ReadFile(p)
			if string(b) != c.want {
				t.Errorf("file holds %q, want %q", b, c.want)
			}
		})
	}
	// Whatever a write leaves behind carries the durable writer's prefix.
	left, _ := filepath.Glob(filepath.Join(dir, durable.TempPrefix+"*"))
	if len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// outsideCode removes the code spans of a Markdown line (a run of n
// backticks up to the next run of exactly n), where markup is inert.
func outsideCode(line string) string {
	var b strings.Builder
	for i := 0; i < len(line); {
		if line[i] != '`' {
			b.WriteByte(line[i])
			i++
			continue
		}
		n := 0
		for i+n < len(line) && line[i+n] == '`' {
			n++
		}
		fence := strings.Repeat("`", n)
		end := -1
		for k := i + n; k < len(line); {
			j := strings.Index(line[k:], fence)
			if j < 0 {
				break
			}
			j += k
			m := 0
			for j+m < len(line) && line[j+m] == '`' {
				m++
			}
			if m == n {
				end = j
				break
			}
			k = j + m
		}
		if end < 0 {
			b.WriteString(line[i:])
			break
		}
		i = end + n
	}
	return b.String()
}

// A run measured but not complete: the latest measurement of this run is
// shown as such (with the unsandboxed runner flagged), its archived
// observations are scored in the tables labelled as a measurement, the
// questions log is shown, and nothing pretends to be a result.
func TestReportMeasuredNotComplete(t *testing.T) {
	t.Parallel()
	if _, err := adapter.ResolveInterpreter("node"); err != nil {
		t.Skipf("node is not installed (the synthetic adapters are node scripts): %v", err)
	}
	w := revealedWorld(t)
	ctx := context.Background()
	if _, err := adapter.MeasureRun(ctx, w, adapter.RunOptions{Runner: adapter.UnsandboxedRunner{}, Timeout: time.Minute, Scratch: t.TempDir()}); err != nil {
		t.Logf("measure: %v", err)
	}
	if _, err := holdout.AskQuestion(w.StateDir(), holdout.Question{FrozenSpecRevision: 1, Question: hostile,
		WhyInsufficient: "§3 is silent", Ruling: "refused", Classification: "SPEC_GAP"}); err != nil {
		t.Fatal(err)
	}
	r, err := Gather(ctx, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := r.Measurement
	if m == nil || m.Status != "REVEALED" || len(m.Subjects) != 2 {
		t.Fatalf("measurement %+v", m)
	}
	for _, s := range m.Subjects {
		if s.State != "MEASURED" || s.Sandboxed || !strings.HasPrefix(s.Predicates, "20: 20 satisfied") {
			t.Errorf("measured subject %+v", s)
		}
	}
	// The tables show the measurement's archived observations, re-scored,
	// and say so: a measurement, never a RESULT.
	if len(r.Predicates) != 20 || !r.Subjects[0].Scored || r.Subjects[0].ResultPredicates != nil {
		t.Errorf("measured tables: %d predicate rows, scored %v, RESULT predicates %v", len(r.Predicates), r.Subjects[0].Scored, r.Subjects[0].ResultPredicates)
	}
	if !strings.Contains(r.Source, "a measurement, not a result") || !strings.HasPrefix(r.Headline, "REVEALED, measured, not complete: javascript 20/20") {
		t.Errorf("source %q, headline %q", r.Source, r.Headline)
	}
	if len(r.Questions) != 1 || r.Questions[0].Question != hostile || r.Questions[0].Class != "SPEC_GAP" {
		t.Fatalf("questions %+v", r.Questions)
	}
	page, md := render(t, r)
	for _, want := range []string{"Latest measurement", "NOT SANDBOXED", "Questions log", "§3 is silent"} {
		if !strings.Contains(page, want) || !strings.Contains(md, want) {
			t.Errorf("HTML or Markdown lacks %q", want)
		}
	}
	if strings.Contains(page, "<script") {
		t.Errorf("the hostile question reached the page as markup")
	}
}

// An aborted run: the timeline ends in ABORTED with the reason given, the
// report says there is no result, and the reason is shown as text.
func TestReportAborted(t *testing.T) {
	t.Parallel()
	w := revealedWorld(t)
	if _, err := experiment.Abort(context.Background(), w, hostile, experiment.TransitionOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := Gather(context.Background(), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	last := r.Timeline[len(r.Timeline)-1]
	if r.Status != "ABORTED" || last.Status != "ABORTED" || last.Note != "aborted: "+hostile {
		t.Fatalf("status %s, last receipt %+v", r.Status, last)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "no result") {
		t.Errorf("notes %q", r.Notes)
	}
	page, _ := render(t, r)
	if strings.Contains(page, "<script") || !strings.Contains(page, "&lt;script&gt;") {
		t.Errorf("the abort reason is not shown as text")
	}
}

// The RESULT and the archived observations are read beneath the world's
// receipts directory as run verify reads them: a symbolic link planted in
// their place (to bytes outside the world, a FIFO that would hang the
// report, /dev/zero that would exhaust its memory) is not followed; the
// part becomes a note naming the file, and nothing read through the link
// is shown.
func TestReportDoesNotFollowLinksInReceipts(t *testing.T) {
	t.Parallel()
	w := revealedWorld(t)
	completeWorld(t, w, "ruled")
	rec, err := w.ReadRecord()
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	link := func(t *testing.T, rel string) {
		t.Helper()
		p := filepath.Join(w.ReceiptsDir(), filepath.FromSlash(rel))
		moved := filepath.Join(outside, filepath.Base(p))
		if err := os.Rename(p, moved); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(moved, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			os.Remove(p)
			if err := os.Rename(moved, p); err != nil {
				t.Errorf("restoring %s: %v", p, err)
			}
		})
	}
	t.Run("RESULT", func(t *testing.T) {
		file := experiment.ResultFile(rec.RunID)
		link(t, file)
		r, err := Gather(context.Background(), w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.HoldoutCommitment != "" || len(r.Predicates) != 0 {
			t.Errorf("the RESULT was read through a symbolic link: commitment %q, %d predicate rows", r.HoldoutCommitment, len(r.Predicates))
		}
		if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, file) {
			t.Errorf("no note names %s: %q", file, r.Notes)
		}
	})
	t.Run("observation", func(t *testing.T) {
		file := experiment.ObservationFile(rec.RunID, "candidate")
		link(t, file)
		r, err := Gather(context.Background(), w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range r.Subjects {
			if s.Implementation == "candidate" && s.Scored {
				t.Errorf("the candidate's observation was read through a symbolic link and scored %s", s.Verdict)
			}
		}
		if notes := strings.Join(r.Notes, "\n"); !strings.Contains(notes, file) {
			t.Errorf("no note names %s: %q", file, r.Notes)
		}
	})
}

// GitHub-flavoured Markdown turns bare text into links (extended
// autolinks: http:// and https:// URLs, www. domains, e-mail addresses)
// and into markup that escaping <, [ and * does not cover (~~strike~~,
// $math$). A candidate's value or a model's ruling shown as text must do
// neither: each trigger is escaped, so the rendered text is the same and
// nothing becomes a link a reader may follow.
func TestMarkdownTextMakesNoLinks(t *testing.T) {
	t.Parallel()
	// bad is what must not appear outside a code span: a trigger not
	// preceded by a backslash (or, for www., the four characters).
	cases := []struct{ in, bad string }{
		{"log in at https://evil.example/login", ":"},
		{"see http://evil.example", ":"},
		{"mailto:admin@evil.example", ":"},
		{"mirror at www.evil.example/x", "www."},
		{"mail admin@evil.example", "@"},
		{"verdict ~~FAIL~~ PASS", "~"},
		{"~FAIL~ PASS", "~"},
		{`$\color{green}{PASS}$`, "$"},
	}
	unescaped := func(s, bad string) bool {
		if len(bad) > 1 {
			return strings.Contains(s, bad)
		}
		for i := 0; i < len(s); i++ {
			if s[i] == bad[0] && (i == 0 || s[i-1] != '\\') {
				return true
			}
		}
		return false
	}
	for _, c := range cases {
		r := &Report{Findings: []Finding{{ID: "fnd-1", Path: "p", A: "a", B: "b", Class: "SPEC_GAP", Ruling: c.in}}}
		var b bytes.Buffer
		if err := r.Markdown(&b); err != nil {
			t.Fatal(err)
		}
		var row string
		for _, l := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(l, "| `fnd-1`") {
				row = l
			}
		}
		if row == "" {
			t.Fatalf("%q: no findings row in\n%s", c.in, b.String())
		}
		// The ruling's cell: between the class and the entries.
		cell, _, _ := strings.Cut(row[strings.Index(row, "SPEC\\_GAP |")+len("SPEC\\_GAP |"):], " | opened")
		if unescaped(outsideCode(cell), c.bad) {
			t.Errorf("%q is shown with %q unescaped: %s", c.in, c.bad, row)
		}
	}
}

// A run that run verify refuses is shown as such: the report still renders
// what its files claim (a broken run can be looked at), but a note says the
// claims are not verified, and its COMPLETE status is not shown as a pass.
func TestReportUnverifiedRunSaysSo(t *testing.T) {
	t.Parallel()
	w := revealedWorld(t)
	completeWorld(t, w, "ruled")
	// The frozen candidate binary changes after completion: the RESULT's
	// scores still re-derive from the archive, the run no longer verifies.
	bin := filepath.Join(w.Root, "implementer", "tally-candidate")
	f, err := os.OpenFile(bin, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n# changed after the freeze\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Gather(context.Background(), w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verified || r.Status != "COMPLETE" {
		t.Fatalf("verified %v status %s: the tamper did not make the run fail verification", r.Verified, r.Status)
	}
	if len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "run verify refuses this run") {
		t.Errorf("notes %q: the first should say run verify refuses the run", r.Notes)
	}
	page, md := render(t, r)
	if strings.Contains(page, `<dt>status</dt><dd><span class="pill pass">COMPLETE</span>`) {
		t.Errorf("the unverified COMPLETE status is shown as a pass")
	}
	if !strings.Contains(md, "run verify refuses this run") {
		t.Errorf("the Markdown does not say the run is refused")
	}
}

// The transcript keeps what the model sent raw — a refused path with a
// right-to-left override, a zero-width space and a terminal escape — and
// the report shows each of them spelled out, on the page and in the
// Markdown, never as the character itself.
func TestReportTranscriptInvisibleEscaped(t *testing.T) {
	t.Parallel()
	w := revealedWorld(t)
	rec, err := w.ReadRecord()
	if err != nil {
		t.Fatal(err)
	}
	const path = "gpj.\u202eexe\u200b\x1b[2J.md"
	p := filepath.Join(t.TempDir(), "room.jsonl")
	sum := strings.Repeat("ab", 32)
	q, _ := json.Marshal(path)
	lines := []string{
		`{"blind_package_id":"` + rec.BlindPackageID + `","event":"start","instruction_path":"experiment/CLEAN-ROOM-PROMPT-v1.md","instruction_sha256":"` + sum + `","seal_digest":"` + sum + `","served_file_count":30,"time":"2026-01-01T00:00:00Z","type":"TRVM-CLEAN-ROOM-TRANSCRIPT-v1","view_mountinfo":"","workspace":"/ws"}`,
		`{"event":"call","outcome":"refused","path":` + string(q) + `,"seq":1,"time":"2026-01-01T00:00:02Z","tool":"read_file"}`,
		`{"calls":1,"event":"end","files_read":[],"files_written":[],"refused_reads":[` + string(q) + `],"time":"2026-01-01T00:00:04Z"}`,
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(p); !strings.Contains(string(raw), "\u202e") || !strings.Contains(string(raw), "\u200b") {
		t.Fatal("the transcript does not hold the characters raw")
	}
	r, err := Gather(context.Background(), w, Options{Transcript: p})
	if err != nil {
		t.Fatal(err)
	}
	if r.Room == nil || len(r.Room.RefusedReads) != 1 {
		t.Fatalf("room %+v, notes %q", r.Room, r.Notes)
	}
	html, md := render(t, r)
	for name, page := range map[string]string{"html": html, "markdown": md} {
		for _, c := range []string{"\u202e", "\u200b", "\x1b"} {
			if strings.Contains(page, c) {
				t.Errorf("%s shows %q raw", name, c)
			}
		}
		if !strings.Contains(page, "202E") || !strings.Contains(page, "200B") {
			t.Errorf("%s does not spell out the hidden characters", name)
		}
	}
}
