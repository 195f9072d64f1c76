package evidence

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// The self-test's two claims, as [SelfTest] states them.
const (
	ClaimReadsAsJSONParse = "every accepted input reads exactly as JavaScript's JSON.parse reads it"
	ClaimOnlyAmbiguous    = "every refusal of an input that RFC 8259 allows is one of the ambiguous classes; every other refusal is an input outside RFC 8259"
)

// errSelfTest: a vector disagrees with a claim. The check ran and failed
// (internal/fault: refused): a reader that fails its self-test reads nothing.
var errSelfTest = fault.New(fault.Refused, "evidence self-test failed")

// Vector is one built-in self-test input. An accepted vector carries
// JSParse, the JSON.parse reading of Input in the dump form of [JSDump]
// (written by hand, not computed); a refused one carries the Class and
// Offset of the refusal and whether JSON.parse (after a fatal UTF-8 decode
// that does not strip a BOM) would read it.
type Vector struct {
	Name    string
	Input   []byte
	JSParse string // accepted vectors: JSON.parse's reading; "" for refusals
	Class   Class  // refused vectors: the expected class
	Offset  int64  // refused vectors: the expected byte offset
	// InRFC8259 marks a refused vector that RFC 8259 lets a parser accept
	// and that JSON.parse reads after an ordinary UTF-8 decode (a BOM is
	// stripped by TextDecoder): its refusal must be an ambiguous class.
	InRFC8259 bool
}

// Accept reports whether the vector must be accepted.
func (v Vector) Accept() bool { return v.Class == "" }

// VectorResult is the outcome of one vector.
type VectorResult struct {
	Name   string `json:"name"`
	Input  string `json:"input"` // Go-quoted, at most 60 bytes shown
	Want   string `json:"want"`
	Got    string `json:"got"`
	Passed bool   `json:"passed"`
}

// ClaimResult is one claim and whether every vector bearing on it proved it.
type ClaimResult struct {
	Claim    string   `json:"claim"`
	Vectors  int      `json:"vectors"`
	Proved   bool     `json:"proved"`
	Failures []string `json:"failures,omitempty"`
}

// Report is the result of [SelfTest].
type Report struct {
	Vectors   int            `json:"vectors"`
	Accepted  int            `json:"accepted"`
	Refused   int            `json:"refused"`
	BeyondRFC int            `json:"refused_rfc8259_texts"` // refusals JSON.parse would read
	Claims    []ClaimResult  `json:"claims"`
	Results   []VectorResult `json:"results"`
	Passed    bool           `json:"passed"`
}

func nest(depth int, inner string) []byte {
	return []byte(strings.Repeat("[", depth) + inner + strings.Repeat("]", depth))
}

// Vectors returns the built-in self-test vectors: accepted edges, and at
// least one refusal of every class of [Classes].
func Vectors() []Vector {
	acc := func(name, in, js string) Vector { return Vector{Name: name, Input: []byte(in), JSParse: js} }
	ref := func(name, in string, c Class, off int64, inRFC bool) Vector {
		return Vector{Name: name, Input: []byte(in), Class: c, Offset: off, InRFC8259: inRFC}
	}
	large := make([]byte, MaxSize+1)
	for i := range large {
		large[i] = ' '
	}
	large[len(large)-1] = '0'
	return []Vector{
		acc("object", `{"b":1,"a":[true,false,null]}`, `{"a":[true,false,null],"b":1}`),
		acc("minus-zero", `-0`, `-0`),
		acc("minus-zero-fraction", `[-0.0,0.0]`, `[-0,0]`),
		acc("underflow-to-zero", `[1e-400,-1e-400]`, `[0,-0]`),
		acc("beyond-2^53", `9007199254740993`, `9007199254740992`),
		acc("long-integer", `123456789012345678901234567890`, `1.2345678901234568e+29`),
		acc("largest-double", `1.7976931348623157e308`, `1.7976931348623157e+308`),
		acc("exponent-forms", `[1E2,1e+2,0.1e1,-1.5e-7,1e21,123e-20]`, `[100,100,1,-1.5e-7,1e+21,1.23e-18]`),
		acc("surrogate-pair", `"\ud83d\ude00"`, "\"\U0001F600\""),
		acc("__proto__-member", `{"__proto__":{"x":1}}`, `{"__proto__":{"x":1}}`),
		acc("escapes", `"\"\\\/\b\f\n\r\t\u0041\u00E9\u00e9"`, `"\"\\/\b\f\n\r\tAéé"`),
		acc("escaped-nul", `"\u0000\u001f"`, `"\u0000\u001f"`),
		acc("raw-unicode", "\"é\u2028\x7f\uffff\"", "\"é\u2028\x7f\uffff\""),
		acc("whitespace", " \t\n\r{ \"a\" : [ 1 , 2 ] } \r\n", `{"a":[1,2]}`),
		acc("scalar-string", `"x"`, `"x"`),
		acc("empty-containers", `[{},[],""]`, `[{},[],""]`),
		acc("depth-64", string(nest(64, "0")), string(nest(64, "0"))),

		ref("empty", ``, ClassEmpty, 0, false),
		ref("too-large", string(large), ClassTooLarge, MaxSize, true),
		ref("bom", "\xef\xbb\xbf{}", ClassBOM, 0, true),
		ref("invalid-utf8-byte", "\"\xff\"", ClassInvalidUTF8, 1, false),
		ref("overlong-utf8", "\"\xc0\xaf\"", ClassInvalidUTF8, 1, false),
		ref("utf8-encoded-surrogate", "\"\xed\xa0\x80\"", ClassInvalidUTF8, 1, false),
		ref("truncated-utf8", "[\"\xe2\x82\"]", ClassInvalidUTF8, 2, false),
		ref("trailing-comma", `{"a":1,}`, ClassSyntax, 7, false),
		ref("comment", "// c\n1", ClassSyntax, 0, false),
		ref("single-quotes", `['a']`, ClassSyntax, 1, false),
		ref("unquoted-name", `{a:1}`, ClassSyntax, 1, false),
		ref("NaN", `NaN`, ClassSyntax, 0, false),
		ref("leading-plus", `[+1]`, ClassSyntax, 1, false),
		ref("leading-zero", `[01]`, ClassSyntax, 2, false),
		ref("bare-fraction", `.5`, ClassSyntax, 0, false),
		ref("unterminated", `[1,2`, ClassSyntax, 4, false),
		ref("form-feed-whitespace", "\f1", ClassSyntax, 0, false),
		ref("nbsp-whitespace", "\u00a01", ClassSyntax, 0, false),
		ref("raw-tab-in-string", "\"a\tb\"", ClassControlChar, 2, false),
		ref("raw-nul-in-name", "{\"\x00\":1}", ClassControlChar, 2, false),
		ref("unknown-escape", `"\x"`, ClassBadEscape, 1, false),
		ref("short-unicode-escape", `"\u12"`, ClassBadEscape, 1, false),
		ref("upper-U-escape", `["\U0041"]`, ClassBadEscape, 2, false),
		ref("lone-high-surrogate", `"\ud800"`, ClassLoneSurrogate, 1, true),
		ref("lone-low-surrogate", `"\udc00"`, ClassLoneSurrogate, 1, true),
		ref("high-then-non-low", `"\ud800\u0041"`, ClassLoneSurrogate, 1, true),
		ref("inverted-pair", `"\ude00\ud83d"`, ClassLoneSurrogate, 1, true),
		ref("lone-surrogate-in-name", `{"\udfff":1}`, ClassLoneSurrogate, 2, true),
		ref("overflow", `1e400`, ClassNonFinite, 0, true),
		ref("negative-overflow", `[-1e400]`, ClassNonFinite, 1, true),
		ref("just-past-max-double", `{"a":1.8e308}`, ClassNonFinite, 5, true),
		ref("duplicate-name", `{"a":1,"a":2}`, ClassDuplicateName, 7, true),
		ref("duplicate-after-unescape", `{"a":1,"\u0061":2}`, ClassDuplicateName, 7, true),
		ref("nested-duplicate", `[{"x":{"b":1,"b":1}}]`, ClassDuplicateName, 13, true),
		ref("duplicate-__proto__", `{"__proto__":1,"__proto__":2}`, ClassDuplicateName, 15, true),
		ref("depth-65", string(nest(65, "0")), ClassTooDeep, 65, true),
		ref("depth-65-container", string(nest(66, "")), ClassTooDeep, 65, true),
		// Grammar first: a text that is not RFC 8259 is never refused in
		// an ambiguous class, even when the ambiguity comes first.
		ref("lone-surrogate-then-bad-escape", `["\ud800\x"]`, ClassBadEscape, 8, false),
		ref("duplicate-then-trailing-comma", `{"a":1,"a":2,}`, ClassSyntax, 13, false),
		ref("overflow-then-unterminated", `[1e400`, ClassSyntax, 6, false),
		ref("second-document", `{} {}`, ClassTrailingData, 3, false),
		ref("trailing-garbage", `[1]x`, ClassTrailingData, 3, false),
		ref("trailing-nul", "{}\x00", ClassTrailingData, 2, false),
	}
}

// SelfTest reads every built-in vector and proves the two claims against
// them. The report lists every vector; Passed is false when any claim
// failed, and the error is then non-nil too.
func SelfTest() (Report, error) {
	vs := Vectors()
	rep := Report{Vectors: len(vs)}
	parse := ClaimResult{Claim: ClaimReadsAsJSONParse}
	ambig := ClaimResult{Claim: ClaimOnlyAmbiguous}
	covered := map[Class]bool{}
	for _, vec := range vs {
		r := VectorResult{Name: vec.Name, Input: shortQuote(vec.Input)}
		v, err := Read(vec.Input)
		if vec.Accept() {
			rep.Accepted++
			parse.Vectors++
			r.Want = "accept " + vec.JSParse
			if err != nil {
				r.Got = err.Error()
			} else {
				d, derr := JSDump(v)
				r.Got = "accept " + d
				if derr != nil {
					r.Got = derr.Error()
				}
			}
			r.Passed = r.Got == r.Want
			if !r.Passed {
				parse.Failures = append(parse.Failures, fmt.Sprintf("%s: want %s, got %s", vec.Name, r.Want, r.Got))
			}
		} else {
			rep.Refused++
			ambig.Vectors++
			if vec.InRFC8259 {
				rep.BeyondRFC++
			}
			covered[vec.Class] = true
			r.Want = fmt.Sprintf("refuse %s at offset %d", vec.Class, vec.Offset)
			got := ClassOf(err)
			switch {
			case err == nil:
				r.Got = "accepted"
			case got == "":
				r.Got = "unclassified error: " + err.Error()
			default:
				r.Got = fmt.Sprintf("refuse %s at offset %d", got, err.(*Error).Offset)
			}
			r.Passed = r.Got == r.Want
			if !r.Passed {
				ambig.Failures = append(ambig.Failures, fmt.Sprintf("%s: want %s, got %s", vec.Name, r.Want, r.Got))
			}
			// The claim itself: an RFC 8259 text may only be refused in an
			// ambiguous class, and an ambiguous class only refuses such
			// texts in this set (so the labels cannot drift apart).
			if got != "" && got.BeyondRFC8259() != vec.InRFC8259 {
				ambig.Failures = append(ambig.Failures, fmt.Sprintf("%s: class %s (beyond RFC 8259: %v) for an input that RFC 8259 allows: %v", vec.Name, got, got.BeyondRFC8259(), vec.InRFC8259))
			}
		}
		rep.Results = append(rep.Results, r)
	}
	for _, c := range Classes {
		if !covered[c] {
			ambig.Failures = append(ambig.Failures, fmt.Sprintf("no vector refused as %s", c))
		}
	}
	parse.Proved = len(parse.Failures) == 0 && parse.Vectors > 0
	ambig.Proved = len(ambig.Failures) == 0 && ambig.Vectors > 0
	rep.Claims = []ClaimResult{parse, ambig}
	rep.Passed = parse.Proved && ambig.Proved
	if !rep.Passed {
		return rep, fmt.Errorf("%w: %s", errSelfTest, strings.Join(slices.Concat(parse.Failures, ambig.Failures), "; "))
	}
	return rep, nil
}

func shortQuote(b []byte) string {
	if len(b) > 60 {
		return fmt.Sprintf("%q… (%d bytes)", b[:60], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// JSDump renders a value read by [Read] in a form that keeps everything
// JSON.parse's result distinguishes and JSON.stringify loses: numbers as
// ECMAScript Number::toString but -0 as "-0", strings as JSON.stringify
// writes them, arrays in order, object members sorted by UTF-16 code units
// (so JavaScript's own ordering of index-like names does not matter). The
// differential test renders JSON.parse's result the same way in JavaScript.
func JSDump(v any) (string, error) {
	var b bytes.Buffer
	if err := jsDump(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

func jsDump(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case float64:
		if x == 0 && math.Signbit(x) {
			b.WriteString("-0")
			return nil
		}
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := jsDump(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case *Object:
		ms := slices.Clone(x.Members)
		slices.SortFunc(ms, func(a, b Member) int { return CompareUTF16(a.Name, b.Name) })
		b.WriteByte('{')
		for i, m := range ms {
			if i > 0 {
				b.WriteByte(',')
			}
			name, err := Canonical(m.Name)
			if err != nil {
				return err
			}
			b.Write(name)
			b.WriteByte(':')
			if err := jsDump(b, m.Value); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	}
	out, err := Canonical(v)
	if err != nil {
		return err
	}
	b.Write(out)
	return nil
}
