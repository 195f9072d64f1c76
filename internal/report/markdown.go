package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom/holdout"
)

// Markdown writes the report's twin in GitHub-flavoured Markdown: the same
// sections, in the same order, as the HTML page.
func (r *Report) Markdown(w io.Writer) error {
	b := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	verified := "NOT VERIFIED"
	if r.Verified {
		verified = "VERIFIED"
	}
	p("# cleanroom run report\n\n%s · %s · %s · generated %s\n\n", text(r.Status), verified, code(r.RunID), r.Generated.UTC().Format(time.RFC3339))
	if r.Headline != "" {
		p("**%s**\n\n", text(r.Headline))
	}

	p("## Identities\n\n| | |\n|---|---|\n")
	p("| status | %s (%s) |\n| run_id | %s |\n", text(r.Status), verified, code(r.RunID))
	if r.PreviousRunID != "" {
		p("| previous run_id | %s |\n", code(r.PreviousRunID))
	}
	p("| spec_release_id (srel) | %s |\n| blind_package_id (bpkg) | %s |\n| instrument_digest | %s |\n",
		code(r.SpecReleaseID), code(r.BlindPackageID), code(r.InstrumentDigest))
	if r.HoldoutCommitment != "" {
		p("| holdout_commitment | %s (%d entries) |\n", code(r.HoldoutCommitment), r.HoldoutEntries)
	}
	p("| world | %s |\n\n", code(r.World))
	if len(r.Notes) > 0 {
		p("**Notes**\n\n")
		for _, n := range r.Notes {
			p("- %s\n", text(n))
		}
		p("\n")
	}

	p("## Implementations\n\n| implementation | role | verdict | predicates | missing challenges | package | binary | environment |\n|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Subjects {
		preds, missing := "—", "—"
		if s.Scored {
			preds = fmt.Sprintf("%d: %d pass, %d fail, %d unresolved", s.Total, s.Pass, s.Fail, s.Unr)
			missing = fmt.Sprint(len(s.Missing))
			for _, m := range s.Missing {
				missing += " " + code(m)
			}
		}
		verdict := text(s.Verdict)
		if s.Refused != "" {
			verdict += ": " + text(s.Refused)
		}
		env := "—"
		if s.Model != "" {
			env = fmt.Sprintf("model %s, toolchain %s, tool %s", text(s.Model), text(s.Toolchain), text(s.Tool))
		}
		bin := "—"
		if s.BinaryDigest != "" {
			bin = code(s.Binary) + " " + code(short(s.BinaryDigest))
		}
		p("| **%s** | %s | %s | %s | %s | %s | %s | %s |\n", text(s.Implementation), text(s.Role), verdict, preds, missing, code(short(s.PackageDigest)), bin, env)
	}
	p("\n")

	if m := r.Measurement; m != nil {
		p("**Latest measurement** (not a result: no RESULT asserts it; its observations and scored results are archived in governance/evidence/): %s, state %s, self-test %s, interop %s\n\n",
			code("governance/measurements/"+m.File), text(m.Status), text(val(m.SelfTest)), text(m.InteropLine))
		p("| implementation | state | runner | predicates | reason |\n|---|---|---|---|---|\n")
		for _, ms := range m.Subjects {
			runner := text(ms.Runner)
			if ms.Runner != "" && !ms.Sandboxed {
				runner += " (NOT SANDBOXED)"
			}
			p("| %s | %s | %s | %s | %s |\n", text(ms.Implementation), text(ms.State), runner, text(ms.Predicates), text(ms.Reason))
		}
		p("\n")
	}

	p("## Interop differences\n\n")
	if r.Interop == nil {
		p("Not compared: no archived observations.\n\n")
	} else {
		p("%s: %d pair(s), %d unclassified\n\n", text(r.Interop.Verdict), len(r.Interop.Pairs), r.Interop.Unclassified)
		for _, pair := range r.Interop.Pairs {
			p("### %s vs %s\n\n", text(pair.A), text(pair.B))
			if len(pair.Differences) == 0 {
				p("No differences.\n\n")
				continue
			}
			p("| path | %s | %s | finding | class | ruling |\n|---|---|---|---|---|---|\n", text(pair.A), text(pair.B))
			for _, d := range pair.Differences {
				p("| %s | %s | %s | %s | %s | %s |\n", code(d.Path), code(d.A), code(d.B), code(short(d.FindingID)), text(d.Class), text(d.Ruling))
			}
			p("\n")
		}
	}

	p("## Findings register\n\n")
	if len(r.Findings) == 0 {
		p("No finding of this run.\n\n")
	} else {
		p("| finding | path | sides | class | ruling | entries |\n|---|---|---|---|---|---|\n")
		for _, f := range r.Findings {
			entries := "opened " + code(f.OpenedIn)
			if f.ClassifiedIn != "" {
				entries += ", classified " + code(f.ClassifiedIn)
			}
			p("| %s | %s | %s | %s |\n", findingCells(f), text(findingClass(f)), text(f.Ruling), entries)
		}
		p("\n")
	}

	if len(r.OtherFindings) > 0 {
		p("**Opened in other runs** (not this run's; they block nothing here)\n\n| finding | path | sides | class | opened in run |\n|---|---|---|---|---|\n")
		for _, f := range r.OtherFindings {
			p("| %s | %s | opened in run %s (%s) |\n", findingCells(f), text(findingClass(f)), code(f.RunID), code(f.OpenedIn))
		}
		p("\n")
	}

	p("## Questions log\n\n")
	if len(r.Questions) == 0 {
		p("No questions were asked.\n\n")
	} else {
		p("| entry | revision | question | why the text was not enough | ruling | class |\n|---|---|---|---|---|---|\n")
		for _, q := range r.Questions {
			p("| %s | %s | %s | %s | %s | %s |\n", code(q.File), text(q.Revision), text(q.Question), text(q.Why), text(q.Ruling), text(q.Class))
		}
		p("\n")
	}

	header := func(lead string) {
		p("%s", lead)
		for _, s := range r.Subjects {
			p(" %s |", text(s.Implementation))
		}
		p("\n|%s", strings.Repeat("---|", strings.Count(lead, "|")-1))
		p("%s\n", strings.Repeat("---|", len(r.Subjects)))
	}
	nothing := "Nothing was scored: no archived observation of this run could be read.\n\n"
	p("## Results per challenge\n\n")
	if len(r.Challenges) == 0 {
		p("%s", nothing)
	} else {
		header("| challenge |")
		for _, c := range r.Challenges {
			p("| %s |", code(c.ID))
			for _, cell := range c.Cells {
				p(" %s |", text(cell))
			}
			p("\n")
		}
		p("\nFrom %s.\n\n", text(r.Source))
	}
	p("## Results per predicate\n\n")
	if len(r.Predicates) == 0 {
		p("%s", nothing)
	} else {
		header("| challenge | # | op | path | expected |")
		for _, pr := range r.Predicates {
			expected := "per implementation"
			if pr.Expected != "" {
				expected = code(pr.Expected)
			}
			p("| %s | %d | %s | %s | %s |", code(pr.Challenge), pr.Index, code(pr.Op), code(pr.Path), expected)
			for i, o := range pr.Outcomes {
				cell := text(o)
				if pr.Observed[i] != "" {
					cell += ", observed " + code(pr.Observed[i])
				}
				if pr.Expecteds[i] != "" {
					cell += ", expected " + code(pr.Expecteds[i])
				}
				p(" %s |", cell)
			}
			p("\n")
		}
		p("\nFrom %s.\n\n", text(r.Source))
	}

	p("## Receipt timeline\n\n")
	if len(r.Timeline) == 0 {
		p("No receipt is reachable from the record.\n\n")
	} else {
		p("| written | state | run_id | receipt | sha256 | note |\n|---|---|---|---|---|---|\n")
		for _, e := range r.Timeline {
			note := text(e.Note)
			for _, a := range e.Admitted {
				note += "<br>admits " + text(a)
			}
			p("| %s | %s | %s | %s | %s | %s |\n", e.Time.UTC().Format(time.RFC3339), text(e.Status), code(short(e.RunID)), code(e.Receipt), code(e.SHA256), note)
		}
		p("\nTimes are the receipt files' modification times; the receipts' digests are the identity.\n\n")
	}

	p("## Clean room\n\n")
	if r.Room == nil {
		p("No clean-room transcript was given (cleanroom run report --transcript FILE).\n\n")
	} else {
		rm := r.Room
		p("| | |\n|---|---|\n| transcript | %s |\n| blind_package_id | %s |\n| seal_digest | %s |\n| served files | %s |\n| tool calls | %d |\n| model | %s (turns %s, stop %s) |\n\n",
			code(rm.File), code(rm.BlindPackageID), code(rm.SealDigest), text(val(rm.ServedFiles)), rm.Calls, text(val(rm.Model)), text(val(rm.Turns)), text(val(rm.Stop)))
		list := func(title string, xs []string) {
			p("**%s (%d)**\n\n", title, len(xs))
			for _, x := range xs {
				p("- %s\n", code(x))
			}
			if len(xs) == 0 {
				p("none\n")
			}
			p("\n")
		}
		list("Files read", rm.FilesRead)
		list("Refused reads", rm.RefusedReads)
		p("**Files written (%d)**\n\n", len(rm.FilesWritten))
		for _, f := range rm.FilesWritten {
			p("- %s, %s bytes, sha256 %s\n", code(f.Path), text(val(f.Size)), code(f.SHA256))
		}
		if len(rm.FilesWritten) == 0 {
			p("none\n")
		}
		p("\n")
	}

	p("## Verification\n\n")
	for _, c := range r.Checks {
		mark := "✓"
		switch {
		case !c.OK:
			mark = "✗"
		case c.Skipped != "":
			mark = "–"
		}
		line := mark + " " + text(c.Name)
		if c.Skipped != "" {
			line += " (" + text(c.Skipped) + ")"
		}
		p("- %s\n", line)
		for _, pr := range c.Problems {
			p("  - %s\n", text(pr))
		}
	}
	return b.Flush()
}

// val shows an optional transcript value ("—" when absent), on the page and
// in the Markdown.
func val(v any) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprint(v)
}

// mdEscaper escapes the characters that start Markdown or HTML markup, or end
// a table cell. GitHub's extensions are markup too: ":" (http://, https://,
// mailto: autolinks), "www." and "@" (www and e-mail autolinks) are escaped
// so a hostile value never becomes a link a reader may follow, "~"
// (strikethrough) and "$" (math) so it cannot restyle the text around it.
var mdEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`,
	"<", "&lt;", ">", "&gt;", "&", "&amp;", "|", `\|`, "#", `\#`, "!", `\!`,
	":", `\:`, "@", `\@`, "www.", `www\.`, "~", `\~`, "$", `\$`,
	"\r", " ", "\n", " ")

// findingCells is a finding's first three cells (id, path, both sides),
// the same in the register and in the list of other runs' findings.
func findingCells(f Finding) string {
	return fmt.Sprintf("%s | %s | %s: %s<br>%s: %s", code(f.ID), code(f.Path), text(f.A), code(f.AValue), text(f.B), code(f.BValue))
}

// findingClass is a finding's class, holdout.Unclassified while it has none.
func findingClass(f Finding) string {
	if f.Class == "" {
		return holdout.Unclassified
	}
	return f.Class
}

// text escapes s for Markdown prose or a table cell.
func text(s string) string { return mdEscaper.Replace(s) }

// code renders s as a code span whatever backticks it holds: the fence is
// one backtick longer than the longest run inside; a pipe, which ends a
// table cell even inside a code span, is escaped (GFM unescapes it there),
// and line breaks become spaces.
func code(s string) string {
	if s == "" {
		return "—"
	}
	s = strings.NewReplacer("|", `\|`, "\r", " ", "\n", " ").Replace(s)
	longest, run := 0, 0
	for _, c := range s {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", longest+1)
	if longest > 0 || strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}
