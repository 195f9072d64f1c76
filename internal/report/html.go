package report

import (
	_ "embed"
	"html/template"
	"io"
	"strings"
	"sync"
	"time"
)

//go:embed report.html.tmpl
var htmlSource string

// CSP is the page's Content-Security-Policy: nothing may be fetched,
// framed or run; only the inline style sheet applies. It closes the page
// to a hostile value that html/template's escaping would somehow miss.
const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; script-src 'none'; form-action 'none'; base-uri 'none'"

// htmlTmpl is parsed on first use, not at start-up: every start of the
// binary (the room's sealed stages too) would otherwise pay for it.
var htmlTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"short": short,
		"time":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"outcomeClass": func(s string) string {
			switch s {
			case Pass:
				return "pass"
			case Fail:
				return "fail"
			case Unresolved:
				return "unresolved"
			case Missing:
				return "missing"
			}
			return "none"
		},
		"verdictClass": func(s string) string {
			switch s {
			case "PASS", "COMPLETE", "ALL FINDINGS CLASSIFIED", "NO DIFFERENCES":
				return "pass"
			case "NOT MEASURED":
				return "none"
			}
			return "fail"
		},
		"statusClass": func(s string) string {
			switch s {
			case "COMPLETE":
				return "pass"
			case "ABORTED":
				return "fail"
			}
			return "none"
		},
		"csp": func() string { return CSP },
		"val": val,
	}).Parse(htmlSource))
})

// HTML writes the report as one self-contained HTML page: inline CSS, no
// script, no external reference.
func (r *Report) HTML(w io.Writer) error {
	return htmlTmpl().Execute(w, r)
}

// short abbreviates an identity for a table cell; the full value is kept
// in the title attribute by the template.
func short(s string) string {
	if i := strings.IndexByte(s, '-'); i > 0 && i < 6 && len(s) > i+17 {
		return s[:i+17] + "…"
	}
	if len(s) > 20 {
		return s[:16] + "…"
	}
	return s
}
