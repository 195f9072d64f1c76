package evidence_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// The differential test reads thousands of generated and mutated documents
// with Read and with JavaScript (testdata/oracle.js: a fatal UTF-8 decode,
// JSON.parse, then a scan for the ambiguities JSON.parse reads silently) and
// requires the same decision, the same value for every accepted document
// (compared as JSDump, which keeps -0), and the same class for every refusal.

const (
	diffGenerated = 6000
	diffMutants   = 6000
	diffSeed      = 20261129
)

// docGen writes random JSON-ish documents: valid most of the time, with
// the inputs the reader must get right mixed in — every escape, surrogate
// pairs and lone halves, astral and raw non-ASCII characters, numbers from
// -0 to 1e420, repeated names, __proto__, deep nesting, a BOM, trailing
// bytes.
type docGen struct {
	r *rand.Rand
	b []byte
}

func (g *docGen) chance(p float64) bool { return g.r.Float64() < p }

func (g *docGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }

func (g *docGen) ws() {
	if g.chance(0.7) {
		return
	}
	for range g.r.IntN(3) + 1 {
		g.b = append(g.b, g.pick(" ", "\t", "\n", "\r", "  ")...)
	}
}

var genKeys = []string{`"a"`, `"b"`, `"\u0061"`, `"__proto__"`, `"0"`, `"1"`, `""`, `"é"`, `"e\u0301"`, "\"\U0001F600\"", `"\ud83d\ude00"`, `"constructor"`, `"a\/b"`}

func (g *docGen) str(name bool) {
	if name && g.chance(0.25) {
		g.b = append(g.b, genKeys[g.r.IntN(len(genKeys))]...)
		return
	}
	g.b = append(g.b, '"')
	for range g.r.IntN(8) {
		switch k := g.r.IntN(100); {
		case k < 40:
			g.b = append(g.b, byte('a'+g.r.IntN(26)))
		case k < 55:
			g.b = append(g.b, g.pick(`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`)...)
		case k < 65:
			g.b = fmt.Appendf(g.b, `\u%04x`, g.r.IntN(0x100))
		case k < 70:
			g.b = fmt.Appendf(g.b, g.pick(`\u%04x`, `\u%04X`), g.r.IntN(0xD800))
		case k < 78:
			r := 0x10000 + g.r.IntN(0x100000)
			hi, lo := 0xD800+(r-0x10000)>>10, 0xDC00+(r-0x10000)&0x3FF
			g.b = fmt.Appendf(g.b, `\u%04x\u%04x`, hi, lo)
		case k < 88:
			g.b = append(g.b, g.pick("é", "日", "\u2028", "\u2029", "\x7f", "\uffff", "\U0001F600", "\ufeff", "\u00a0")...)
		case k < 91:
			g.b = fmt.Appendf(g.b, `\u%04x`, 0xD800+g.r.IntN(0x800)) // a lone half, or half of a pair by luck
		case k < 92:
			g.b = append(g.b, byte(g.r.IntN(0x20))) // raw control character
		case k < 93:
			g.b = append(g.b, g.pick(`\x`, `\'`, `\u12`, `\U0041`, `\a`)...)
		default:
			g.b = append(g.b, byte('0'+g.r.IntN(10)))
		}
	}
	g.b = append(g.b, '"')
}

func (g *docGen) digits(n int) {
	for range n {
		g.b = append(g.b, byte('0'+g.r.IntN(10)))
	}
}

func (g *docGen) number() {
	if g.chance(0.15) {
		g.b = append(g.b, g.pick("-0", "-0.0", "0", "-0e5", "1e-400", "-1e-400", "9007199254740993", "1.7976931348623157e308",
			"1.7976931348623158e308", "1.7976931348623159e308", "5e-324", "2.4703282292062328e-324", "2.4703282292062327e-324",
			"1e21", "1e-7", "123456789012345678901234567890", "1E400", "-1e400", "0.1", "100")...)
		return
	}
	if g.chance(0.3) {
		g.b = append(g.b, '-')
	}
	if g.chance(0.2) {
		g.b = append(g.b, '0')
	} else {
		g.b = append(g.b, byte('1'+g.r.IntN(9)))
		g.digits(g.r.IntN(25))
	}
	if g.chance(0.4) {
		g.b = append(g.b, '.')
		g.digits(g.r.IntN(20) + 1)
	}
	if g.chance(0.4) {
		g.b = append(g.b, g.pick("e", "E")...)
		g.b = append(g.b, g.pick("", "+", "-")...)
		g.b = strconv.AppendInt(g.b, int64(g.r.IntN(421)), 10)
	}
}

func (g *docGen) value(depth int) {
	if depth < 3 && g.chance(0.01) {
		// Nesting around the limit: a value at depth 64 is accepted, 65 not.
		n := 60 + g.r.IntN(8)
		g.b = append(g.b, strings.Repeat("[", n)...)
		g.value(depth + n)
		g.b = append(g.b, strings.Repeat("]", n)...)
		return
	}
	k := g.r.IntN(100)
	if depth > 4 {
		k = 30 + g.r.IntN(70)
	}
	switch {
	case k < 15:
		g.b = append(g.b, '{')
		n := g.r.IntN(5)
		for i := range n {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.ws()
			g.str(true)
			g.ws()
			g.b = append(g.b, ':')
			g.ws()
			g.value(depth + 1)
			g.ws()
		}
		g.b = append(g.b, '}')
	case k < 30:
		g.b = append(g.b, '[')
		n := g.r.IntN(5)
		for i := range n {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.ws()
			g.value(depth + 1)
			g.ws()
		}
		g.b = append(g.b, ']')
	case k < 60:
		g.str(false)
	case k < 90:
		g.number()
	default:
		g.b = append(g.b, g.pick("null", "true", "false")...)
	}
}

func (g *docGen) document() []byte {
	g.b = nil
	if g.chance(0.01) {
		g.b = append(g.b, 0xEF, 0xBB, 0xBF)
	}
	g.ws()
	g.value(0)
	g.ws()
	if g.chance(0.02) {
		g.b = append(g.b, g.pick(" x", "]", ",", " {}", "\x00", "0", " 1")...)
	}
	return g.b
}

// splices are what the mutator inserts or substitutes.
var splices = []string{
	`\ud800`, `\udc00`, "\xff", "\xc0\xaf", "\xed\xa0\x80", "\xef\xbb\xbf", `,"a":1`, `"a":1,`, `1e400`, `-0`, `01`,
	"\u2028", `"__proto__"`, `]`, `}`, `[`, `{`, `,`, `:`, `"`, `\`, "\f", "\v", "\u00a0", `/*`, `'`, "\x00", "\t",
	`\u0061`, `\ud83d\ude00`, `NaN`, `+`, `.`, `e`, `-`, `null`, ` `,
}

func mutateDoc(r *rand.Rand, doc []byte) []byte {
	out := slices.Clone(doc)
	for range r.IntN(3) + 1 {
		pos := 0
		if len(out) > 0 {
			pos = r.IntN(len(out) + 1)
		}
		switch r.IntN(5) {
		case 0, 1: // insert a splice
			out = slices.Insert(out, pos, []byte(splices[r.IntN(len(splices))])...)
		case 2: // delete up to 3 bytes
			end := min(len(out), pos+1+r.IntN(3))
			out = slices.Delete(out, pos, end)
		case 3: // replace one byte
			if pos < len(out) {
				out[pos] = splices[r.IntN(len(splices))][0]
			}
		case 4: // truncate or duplicate a chunk
			if r.IntN(2) == 0 {
				out = out[:pos]
			} else if pos < len(out) {
				end := min(len(out), pos+1+r.IntN(8))
				out = slices.Insert(out, end, out[pos:end]...)
			}
		}
	}
	return out
}

// diffCorpus returns the documents of the test: the self-test vectors that
// fit on a line, generated documents, and mutants of both.
func diffCorpus() [][]byte {
	r := rand.New(rand.NewPCG(diffSeed, diffSeed))
	g := &docGen{r: r}
	var docs [][]byte
	for _, v := range evidence.Vectors() {
		if len(v.Input) < 1<<16 {
			docs = append(docs, v.Input)
		}
	}
	for range diffGenerated {
		docs = append(docs, g.document())
	}
	base := len(docs)
	for range diffMutants {
		docs = append(docs, mutateDoc(r, docs[r.IntN(base)]))
	}
	return append(docs, longNumbers()...)
}

// longNumbers are number literals of hundreds to thousands of digits with
// exponents of up to six digits, where strconv.ParseFloat alone misreads
// (an integer part beyond 800 digits, an exponent of 10000 or more). Their
// own generator keeps the rest of the corpus as it was.
func longNumbers() [][]byte {
	r := rand.New(rand.NewPCG(diffSeed, 800))
	digits := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('0' + r.IntN(10))
		}
		return string(b)
	}
	var docs [][]byte
	for range 400 {
		sig := "1" + digits(r.IntN(30))
		pad := r.IntN(3000)
		var lit string
		var shift int
		switch r.IntN(3) {
		case 0:
			lit, shift = sig+strings.Repeat("0", pad), -(len(sig) + pad)
		case 1:
			lit, shift = "0."+strings.Repeat("0", pad)+sig, pad
		default:
			lit, shift = sig+strings.Repeat("0", pad)+"."+digits(r.IntN(50)), -(len(sig) + pad)
		}
		e := shift + r.IntN(700) - 340
		if r.IntN(4) == 0 {
			e += (r.IntN(2)*2 - 1) * 100000
		}
		docs = append(docs, fmt.Appendf(nil, "[%s%se%d]", []string{"", "-"}[r.IntN(2)], lit, e))
	}
	return docs
}

// goAnswer is the Go reader's line in the oracle's format.
func goAnswer(t *testing.T, doc []byte) string {
	v, err := evidence.Read(doc)
	if err != nil {
		e, ok := err.(*evidence.Error)
		if !ok {
			t.Fatalf("%q: error %v is not an *evidence.Error", doc, err)
		}
		return fmt.Sprintf("R %s %d", e.Class, e.Offset)
	}
	d, err := evidence.JSDump(v)
	if err != nil {
		t.Fatalf("%q: accepted but JSDump fails: %v", doc, err)
	}
	return "A " + d
}

// runOracle feeds every document to one node process and returns its
// answers, one per document.
func runOracle(t *testing.T, docs [][]byte) []string {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the differential test against JSON.parse needs it (apt-get install nodejs)")
	}
	var in bytes.Buffer
	for _, d := range docs {
		in.WriteString(base64.StdEncoding.EncodeToString(d))
		in.WriteByte('\n')
	}
	cmd := exec.Command(node, filepath.Join("testdata", "oracle.js"))
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node oracle.js: %v\n%s", err, stderr.Bytes())
	}
	var answers []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		answers = append(answers, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(answers) != len(docs) {
		t.Fatalf("oracle answered %d lines for %d documents", len(answers), len(docs))
	}
	return answers
}

func TestDifferentialJSONParse(t *testing.T) {
	t.Parallel()
	docs := diffCorpus()
	answers := runOracle(t, docs)
	var accepted, refused int
	classes := map[string]int{}
	fail, labelDiffs := 0, 0
	report := func(format string, args ...any) {
		fail++
		if fail <= 20 {
			t.Errorf(format, args...)
		}
	}
	for i, doc := range docs {
		goLine, jsLine := goAnswer(t, doc), answers[i]
		if goLine[0] != jsLine[0] {
			report("doc %d %q: accept/reject differ\n   go: %s\n   js: %s", i, doc, goLine, jsLine)
			continue
		}
		if goLine[0] == 'A' {
			accepted++
			if goLine != jsLine {
				report("doc %d %q: values differ\n   go: %s\n   js: %s", i, doc, goLine, jsLine)
			}
			continue
		}
		refused++
		goF, jsF := strings.Fields(goLine), strings.Fields(jsLine)
		goClass, jsClass := evidence.Class(goF[1]), evidence.Class(jsF[1])
		classes[goF[1]]++
		if !slices.Contains(evidence.Classes, goClass) {
			report("doc %d %q: refusal class %q is not a named class", i, doc, goClass)
		}
		if goClass != jsClass {
			if expectedLabelDifference(doc, goClass, jsClass, goF[2]) {
				labelDiffs++
				continue
			}
			report("doc %d %q: classes differ: go %s, js %s", i, doc, goLine, jsLine)
			continue
		}
		// The oracle locates what it finds itself (ambiguities) in bytes,
		// with the reader's meaning of the offset.
		if jsF[2] != "-1" && jsF[2] != goF[2] {
			report("doc %d %q: offsets differ: go %s, js %s", i, doc, goLine, jsLine)
		}
	}
	if fail > 20 {
		t.Errorf("… and %d more differences", fail-20)
	}
	t.Logf("%d documents: %d accepted and equal, %d refused by both (%d with the documented label difference); refusals by class: %v", len(docs), accepted, refused, labelDiffs, classes)
	// The corpus must exercise both sides and every class it can reach.
	if accepted < 2000 || refused < 2000 {
		t.Errorf("corpus too one-sided: %d accepted, %d refused", accepted, refused)
	}
	for _, c := range evidence.Classes {
		if c != evidence.ClassTooLarge && classes[string(c)] == 0 {
			t.Errorf("no document was refused as %s", c)
		}
	}
}

// expectedLabelDifference is the one documented difference between the
// reader's class and the class read from V8's message: a backslash followed
// by a non-ASCII character is a bad escape to the reader, and V8 reports it
// as "Unexpected token" rather than "Bad escaped character". Both refuse the
// text as outside RFC 8259; only the label differs.
func expectedLabelDifference(doc []byte, goClass, jsClass evidence.Class, goOffset string) bool {
	off, err := strconv.Atoi(goOffset)
	return err == nil && goClass == evidence.ClassBadEscape && jsClass == evidence.ClassSyntax &&
		off+1 < len(doc) && doc[off] == '\\' && doc[off+1] >= 0x80
}
