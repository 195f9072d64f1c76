package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestEvidenceCheckCLI(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"good.json":          `{"b":[1,-0],"a":"x"}`,
		"dup.json":           `{"a":1,"a":2}`,
		"deep.json":          `{"x":[{"b":1e400}]}`,
		"bom.json":           "\xef\xbb\xbf{}",
		"schema.json":        `{"type":"object","required":["a"],"properties":{"a":{"type":"string"}}}`,
		"broken-schema.json": `{"type":7}`,
		"nota.json":          `{"b":1}`,
	})
	p := func(name string) string { return filepath.Join(dir, name) }
	big := p("big.json")
	if err := os.WriteFile(big, []byte(strings.Repeat(" ", evidence.MaxSize)+"0"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := p("fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want []string // substrings of stdout+stderr, in any order
	}{
		{"accepted", []string{p("good.json")}, 0, []string{p("good.json") + ": accepted"}},
		{"duplicate", []string{p("dup.json")}, 1, []string{p("dup.json") + `: refused duplicate-name at offset 7 pointer "/a"`}},
		{"non-finite-nested", []string{p("deep.json")}, 1, []string{`refused non-finite-number at offset 11 pointer "/x/0/b"`}},
		{"bom", []string{p("bom.json")}, 1, []string{p("bom.json") + ": refused bom at offset 0"}},
		{"too-large", []string{big}, 1, []string{big + ": refused too-large at offset 8388608"}},
		{"one-of-two-refused", []string{p("good.json"), p("dup.json")}, 1, []string{": accepted", ": refused duplicate-name", "1 of 2 files refused"}},
		{"schema-accepted", []string{"--schema", p("schema.json"), p("good.json")}, 0, []string{"accepted (schema"}},
		{"schema-refused", []string{"--schema", p("schema.json"), p("nota.json")}, 1, []string{p("nota.json") + `: refused schema at pointer ""`, "required"}},
		{"missing-file", []string{p("absent.json")}, 2, []string{p("absent.json") + ": unreadable"}},
		{"fifo", []string{fifo}, 2, []string{"not a regular file"}},
		{"no-arguments", nil, 2, []string{"requires at least 1 arg"}},
		{"schema-does-not-compile", []string{"--schema", p("broken-schema.json"), p("good.json")}, 2, []string{"broken-schema.json"}},
		// A schema the strict reader refuses is refused (1) like any file
		// it refuses, whichever argument names it (docs/exit-codes.md).
		{"schema-refused-by-reader", []string{"--schema", p("dup.json"), p("good.json")}, 1, []string{"duplicate-name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runCLI(t, append([]string{"evidence", "check"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errs)
			}
			for _, w := range tt.want {
				if !strings.Contains(out+errs, w) {
					t.Errorf("output lacks %q\nstdout: %s\nstderr: %s", w, out, errs)
				}
			}
		})
	}
}

func TestEvidenceCheckCLIJSON(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{"dup.json": `{"x":{"b":1,"b":2}}`, "good.json": `[]`})
	code, out, errs := runCLI(t, "--json", "evidence", "check", filepath.Join(dir, "good.json"), filepath.Join(dir, "dup.json"))
	if code != 1 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	o, err := evidence.ReadObject([]byte(out))
	if err != nil {
		t.Fatalf("--json output is not strict JSON: %v\n%s", err, out)
	}
	files, _ := o.Get("files")
	list, ok := files.([]any)
	if !ok || len(list) != 2 {
		t.Fatalf("files = %#v", files)
	}
	good, bad := list[0].(*evidence.Object), list[1].(*evidence.Object)
	verdict, _ := good.Get("verdict")
	class, _ := bad.Get("class")
	off, _ := bad.Get("offset")
	ptr, _ := bad.Get("pointer")
	if verdict != "accepted" || class != "duplicate-name" || off != 12.0 || ptr != "/x/b" {
		t.Errorf("good verdict %v; bad class %v offset %v pointer %v", verdict, class, off, ptr)
	}
	if refused, _ := o.Get("refused"); refused != 1.0 {
		t.Errorf("refused = %v", refused)
	}
}

func TestEvidenceCanonCLI(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"doc.json": " {\"b\": 1, \"a\": [-0, 1e21, \"\\u00e9\\n\"], \"\\ud83d\\ude00\": null, \"\\ufb33\": true}\n",
		"bad.json": `{"a":"\ud800"}`,
	})
	// RFC 8785 by hand: names by UTF-16 units (U+1F600's high surrogate
	// D83D sorts before U+FB33), -0 as 0, 1e21 as 1e+21, é raw, \n escaped.
	want := "{\"a\":[0,1e+21,\"é\\n\"],\"b\":1,\"\U0001F600\":null,\"\ufb33\":true}"
	code, out, errs := runCLI(t, "evidence", "canon", filepath.Join(dir, "doc.json"))
	if code != 0 || out != want {
		t.Fatalf("exit %d\n got %q\nwant %q\n%s", code, out, want, errs)
	}
	code, out, errs = runCLI(t, "--json", "evidence", "canon", filepath.Join(dir, "doc.json"))
	o, err := evidence.ReadObject([]byte(out))
	if code != 0 || err != nil {
		t.Fatalf("exit %d, %v\n%s%s", code, err, out, errs)
	}
	sum := sha256.Sum256([]byte(want))
	if c, _ := o.Get("canonical"); c != want {
		t.Errorf("canonical = %q", c)
	}
	if s, _ := o.Get("sha256"); s != hex.EncodeToString(sum[:]) {
		t.Errorf("sha256 = %v, want %x", s, sum)
	}

	code, out, errs = runCLI(t, "evidence", "canon", filepath.Join(dir, "bad.json"))
	if code != 1 || out != "" || !strings.Contains(errs, "bad.json") || !strings.Contains(errs, "lone-surrogate at offset 6") {
		t.Errorf("refused file: exit %d stdout %q stderr %q", code, out, errs)
	}
	code, _, errs = runCLI(t, "evidence", "canon", filepath.Join(dir, "absent.json"))
	if code != 2 || !strings.Contains(errs, "absent.json") {
		t.Errorf("missing file: exit %d stderr %q", code, errs)
	}
	if code, _, _ = runCLI(t, "evidence", "canon", filepath.Join(dir, "doc.json"), filepath.Join(dir, "bad.json")); code != 2 {
		t.Errorf("two files: exit %d, want 2", code)
	}
}

func TestEvidenceSelftestCLI(t *testing.T) {
	t.Parallel()
	code, out, errs := runCLI(t, "evidence", "selftest")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	for _, w := range []string{"claim 1: " + evidence.ClaimReadsAsJSONParse + " — PROVED", "claim 2: " + evidence.ClaimOnlyAmbiguous + " — PROVED", "\nPASS\n", "duplicate-name"} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q\n%s", w, out)
		}
	}
	code, out, _ = runCLI(t, "--json", "evidence", "selftest")
	o, err := evidence.ReadObject([]byte(out))
	if code != 0 || err != nil {
		t.Fatalf("exit %d, %v", code, err)
	}
	passed, _ := o.Get("passed")
	vectors, _ := o.Get("vectors")
	if passed != true || vectors.(float64) < 43 {
		t.Errorf("passed %v vectors %v", passed, vectors)
	}
	if code, _, _ := runCLI(t, "evidence", "selftest", "extra"); code != 2 {
		t.Errorf("selftest with an argument: exit %d, want 2", code)
	}
}
