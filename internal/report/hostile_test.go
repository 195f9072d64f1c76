package report

import (
	"bytes"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// hostileValues are what a candidate, a model or a forged archive can put
// in any string the report shows: markup, a script end tag, URLs of every
// dangerous scheme, attribute and style break-outs, Markdown table and
// code-span breakers.
var hostileValues = []string{
	`</script><script>alert(1)</script>`,
	`" onmouseover="alert(1)" x="`,
	`' onfocus='alert(1)`,
	`javascript:alert(1)`,
	`data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==`,
	`</style><style>body{background:url(http://127.0.0.1:9/x)}</style>`,
	`</title><meta http-equiv="refresh" content="0;url=http://127.0.0.1:9/">`,
	"a | b | c\n| --- |\n# heading\n<img src=x>",
	"``` fenced\n`tick` ``double``\\",
	`[link](javascript:alert(1)) ![img](http://127.0.0.1:9/x.png) <http://127.0.0.1:9/>`,
}

// fillStrings sets every string (and every element of a []string) reachable
// from v to s, and gives every slice of structs one element, so that every
// field a template or the Markdown writer shows carries s.
func fillStrings(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillStrings(v.Elem(), s)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillStrings(v.Field(i), s)
			}
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		}
		for i := range v.Len() {
			fillStrings(v.Index(i), s)
		}
	case reflect.String:
		v.SetString(s)
	case reflect.Interface:
		if v.IsNil() {
			v.Set(reflect.ValueOf(s))
		}
	}
}

var reTag = regexp.MustCompile(`<[^>]*>`)

// skeleton is the page's elements and attribute names, in order: what a
// value could change only by escaping its context. Attribute values are
// skipped by their quotes (html/template escapes a quote inside one).
func skeleton(page string) []string {
	var out []string
	for _, t := range reTag.FindAllString(page, -1) {
		t = strings.TrimSuffix(strings.TrimPrefix(t, "<"), ">")
		i := strings.IndexAny(t, " \t\n")
		if i < 0 {
			out = append(out, t)
			continue
		}
		e, rest := t[:i], t[i:]
		for {
			rest = strings.TrimLeft(rest, " \t\n/")
			if rest == "" {
				break
			}
			j := strings.IndexAny(rest, "= \t\n")
			if j < 0 {
				e += " " + rest
				break
			}
			e += " " + rest[:j]
			rest = rest[j:]
			if rest[0] != '=' {
				continue
			}
			rest = rest[1:]
			if rest != "" && (rest[0] == '"' || rest[0] == '\'') {
				k := strings.IndexByte(rest[1:], rest[0])
				if k < 0 {
					e += " UNTERMINATED"
					break
				}
				rest = rest[k+2:]
			} else if k := strings.IndexAny(rest, " \t\n"); k >= 0 {
				rest = rest[k:]
			} else {
				rest = ""
			}
		}
		out = append(out, e)
	}
	return out
}

func filledReport(s string) *Report {
	r := &Report{}
	fillStrings(reflect.ValueOf(r), s)
	r.Generated = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range r.Timeline {
		r.Timeline[i].Time = r.Generated
	}
	return r
}

// Every string of the report set to a hostile value: the HTML page has the
// same elements and attributes as with a plain value (nothing was opened,
// closed or added by a value), and no value reached a URL, script or style
// context unescaped.
func TestHTMLEveryFieldHostile(t *testing.T) {
	t.Parallel()
	var plain bytes.Buffer
	if err := filledReport("plain").HTML(&plain); err != nil {
		t.Fatal(err)
	}
	want := skeleton(plain.String())
	for _, h := range hostileValues {
		var b bytes.Buffer
		if err := filledReport(h).HTML(&b); err != nil {
			t.Fatal(err)
		}
		got := skeleton(b.String())
		if !slicesEqual(got, want) {
			t.Errorf("value %q changed the page's elements:\n got %v\nwant %v", h, diffFirst(got, want), "")
		}
		for _, bad := range []string{"<script", "<style>body", "<img", "<meta http-equiv=\"refresh"} {
			if strings.Contains(b.String(), bad) {
				t.Errorf("value %q put %q on the page", h, bad)
			}
		}
	}
}

// Every string of the report set to a hostile value: each Markdown table
// row keeps the cell count of its header, no line starts a heading, a
// fence or raw HTML that a plain value did not, and outside code spans no
// tag, link or image syntax survives.
func TestMarkdownEveryFieldHostile(t *testing.T) {
	t.Parallel()
	lines := func(r *Report) []string {
		var b bytes.Buffer
		if err := r.Markdown(&b); err != nil {
			t.Fatal(err)
		}
		return strings.Split(b.String(), "\n")
	}
	plain := lines(filledReport("plain"))
	cells := func(l string) int {
		// Unescaped pipes: a cell separator is a pipe not preceded by a
		// backslash (GFM splits cells before reading code spans).
		n := 0
		for i := 0; i < len(l); i++ {
			if l[i] == '|' && (i == 0 || l[i-1] != '\\') {
				n++
			}
		}
		return n
	}
	for _, h := range hostileValues {
		got := lines(filledReport(h))
		if len(got) != len(plain) {
			t.Errorf("value %q changed the number of lines: %d, want %d", h, len(got), len(plain))
			continue
		}
		for i, l := range got {
			if cells(l) != cells(plain[i]) {
				t.Errorf("value %q changed a row's cells: %s", h, l)
			}
			for _, start := range []string{"#", "```", "<", "    "} {
				if strings.HasPrefix(l, start) && !strings.HasPrefix(plain[i], start) {
					t.Errorf("value %q starts a line with %q: %s", h, start, l)
				}
			}
			out := outsideCode(l)
			for _, bad := range []string{"<script", "<img", "<style", "<meta", "<http", "[link]"} {
				if strings.Contains(out, bad) {
					t.Errorf("value %q leaves %q outside a code span: %s", h, bad, l)
				}
			}
			// A link or image needs "](" with its bracket unescaped.
			for _, bad := range reLinkEnd.FindAllString(out, -1) {
				if bad[0] != '\\' {
					t.Errorf("value %q leaves %q outside a code span: %s", h, bad, l)
				}
			}
		}
	}
}

var reLinkEnd = regexp.MustCompile(`.\]\(`)

func slicesEqual(a, b []string) bool { return slicesEqualFunc(a, b) }

func slicesEqualFunc(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// diffFirst is the first place two skeletons differ, for the message.
func diffFirst(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return "at " + strings.Join(got[max(0, i-2):min(len(got), i+3)], " ") + " (want " + strings.Join(want[max(0, i-2):min(len(want), i+3)], " ") + ")"
		}
	}
	return "lengths differ"
}
