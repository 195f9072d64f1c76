package evidence_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// refusal is one input Read must refuse: the class, the byte offset and the
// JSON Pointer, all worked out by hand from the input.
type refusal struct {
	name  string
	in    string
	class evidence.Class
	off   int64
	ptr   string
}

func refusalRows() []refusal {
	deep65 := strings.Repeat("[", 65) + "0" + strings.Repeat("]", 65)
	deep65ptr := strings.Repeat("/0", 65)
	deepObj := strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65)
	return []refusal{
		// empty
		{"empty", "", evidence.ClassEmpty, 0, ""},

		// bom: only a leading one; elsewhere U+FEFF is not whitespace.
		{"bom-object", "\xef\xbb\xbf{}", evidence.ClassBOM, 0, ""},
		{"bom-alone", "\xef\xbb\xbf", evidence.ClassBOM, 0, ""},
		{"bom-before-invalid-utf8", "\xef\xbb\xbf\"\xff\"", evidence.ClassBOM, 0, ""},
		{"bom-after-space", " \xef\xbb\xbf{}", evidence.ClassSyntax, 1, ""},

		// invalid-utf8: the offset of the first bad byte, the pointer of the
		// value holding it.
		{"invalid-utf8-ff", "\"\xff\"", evidence.ClassInvalidUTF8, 1, ""},
		{"invalid-utf8-overlong-in-member", "{\"a\":\"x\xc0\xaf\"}", evidence.ClassInvalidUTF8, 7, "/a"},
		{"invalid-utf8-in-second-element", "[\"ok\",\"x\xff\"]", evidence.ClassInvalidUTF8, 8, "/1"},
		{"invalid-utf8-in-nested-name", "{\"a\":{\"b\":1,\"\xff\":1}}", evidence.ClassInvalidUTF8, 13, "/a"},
		{"invalid-utf8-encoded-surrogate", "[1,2,\"\xed\xa0\x80\"]", evidence.ClassInvalidUTF8, 6, "/2"},
		{"invalid-utf8-beyond-U+10FFFF", "\"\xf4\x90\x80\x80\"", evidence.ClassInvalidUTF8, 1, ""},
		{"invalid-utf8-truncated-at-end", "\"\xe2\x82", evidence.ClassInvalidUTF8, 1, ""},
		{"invalid-utf8-lone-continuation", "[\"a\x80\"]", evidence.ClassInvalidUTF8, 3, "/0"},
		{"invalid-utf8-outside-string", "[1,\xff]", evidence.ClassInvalidUTF8, 3, "/1"},
		{"invalid-utf8-before-syntax-error", "[\"\xff\",]", evidence.ClassInvalidUTF8, 2, "/0"},

		// syntax: outside the RFC 8259 grammar.
		{"trailing-comma-object", `{"a":1,}`, evidence.ClassSyntax, 7, ""},
		{"trailing-comma-array-in-member", `{"a":[1,]}`, evidence.ClassSyntax, 8, "/a"},
		{"missing-colon", `{"a" 1}`, evidence.ClassSyntax, 5, "/a"},
		{"missing-comma-array", `[1 2]`, evidence.ClassSyntax, 3, ""},
		{"missing-comma-object", `{"a":1 "b":2}`, evidence.ClassSyntax, 7, ""},
		{"missing-value", `{"a":}`, evidence.ClassSyntax, 5, "/a"},
		{"leading-comma", `[,1]`, evidence.ClassSyntax, 1, ""},
		{"double-comma", `[1,,2]`, evidence.ClassSyntax, 3, "/1"},
		{"unquoted-name", `{a:1}`, evidence.ClassSyntax, 1, ""},
		{"number-name", `{1:2}`, evidence.ClassSyntax, 1, ""},
		{"single-quotes", `['a']`, evidence.ClassSyntax, 1, "/0"},
		{"line-comment", "// c\n1", evidence.ClassSyntax, 0, ""},
		{"block-comment-in-array", `[1/*c*/]`, evidence.ClassSyntax, 2, ""},
		{"NaN", `NaN`, evidence.ClassSyntax, 0, ""},
		{"Infinity-in-array", `[Infinity]`, evidence.ClassSyntax, 1, "/0"},
		{"minus-Infinity", `[-Infinity]`, evidence.ClassSyntax, 2, "/0"},
		{"leading-plus", `[+1]`, evidence.ClassSyntax, 1, "/0"},
		{"leading-zero-top", `01`, evidence.ClassSyntax, 1, ""},
		{"leading-zero-negative", `-01`, evidence.ClassSyntax, 2, ""},
		{"double-zero", `00`, evidence.ClassSyntax, 1, ""},
		{"leading-zero-in-array", `[01]`, evidence.ClassSyntax, 2, ""},
		{"leading-zero-in-member", `{"a":01}`, evidence.ClassSyntax, 6, ""},
		{"bare-fraction", `{"a":.5}`, evidence.ClassSyntax, 5, "/a"},
		{"fraction-without-digits", `{"a":1.}`, evidence.ClassSyntax, 7, "/a"},
		{"exponent-without-digits", `{"a":1e}`, evidence.ClassSyntax, 7, "/a"},
		{"lone-minus", `{"a":-}`, evidence.ClassSyntax, 6, "/a"},
		{"hex-number", `[0x1]`, evidence.ClassSyntax, 2, ""},
		{"literal-capitalised", `True`, evidence.ClassSyntax, 0, ""},
		{"literal-truncated-in-array", `[nul]`, evidence.ClassSyntax, 4, "/0"},
		{"literal-wrong-letter", `{"a":tru}`, evidence.ClassSyntax, 8, "/a"},
		{"mismatched-bracket", `{"a":[1,2}`, evidence.ClassSyntax, 9, "/a"},
		{"close-in-value-position", `{"a":[}`, evidence.ClassSyntax, 6, "/a/0"},
		{"unterminated-array", `[1,2`, evidence.ClassSyntax, 4, ""},
		{"unterminated-nested-array", `{"a":[1,2`, evidence.ClassSyntax, 9, "/a"},
		{"unterminated-string", `"abc`, evidence.ClassSyntax, 4, ""},
		{"unterminated-string-in-member", `{"a":"abc`, evidence.ClassSyntax, 9, "/a"},
		{"backslash-at-end", `"\`, evidence.ClassSyntax, 2, ""},
		{"only-whitespace", " \t\r\n", evidence.ClassSyntax, 4, ""},
		{"whitespace-form-feed", "\f1", evidence.ClassSyntax, 0, ""},
		{"whitespace-vertical-tab", "[1,\v2]", evidence.ClassSyntax, 3, "/1"},
		{"whitespace-nbsp", "\u00a01", evidence.ClassSyntax, 0, ""},
		{"whitespace-line-separator", "[\u20281]", evidence.ClassSyntax, 1, "/0"},

		// control-character: raw bytes below 0x20 inside strings.
		{"control-tab-in-string", "\"a\tb\"", evidence.ClassControlChar, 2, ""},
		{"control-newline-in-member", "{\"a\":\"x\ny\"}", evidence.ClassControlChar, 7, "/a"},
		{"control-nul-in-name", "{\"\x00\":1}", evidence.ClassControlChar, 2, ""},
		{"control-in-nested-name", "{\"a\":{\"b\":1,\"\x01\":1}}", evidence.ClassControlChar, 13, "/a"},
		{"control-after-valid-escape", "[\"\\n\x1f\"]", evidence.ClassControlChar, 4, "/0"},

		// bad-escape
		{"bad-escape-x", `"\x"`, evidence.ClassBadEscape, 1, ""},
		{"bad-escape-in-member", `{"a":"\x"}`, evidence.ClassBadEscape, 6, "/a"},
		{"bad-escape-single-quote", `"\'"`, evidence.ClassBadEscape, 1, ""},
		{"bad-escape-short-unicode", `{"a" : "\u12"}`, evidence.ClassBadEscape, 8, "/a"},
		{"bad-escape-non-hex-digit", `"ab\u00G0"`, evidence.ClassBadEscape, 3, ""},
		{"bad-escape-upper-U", `["\U0041"]`, evidence.ClassBadEscape, 2, "/0"},
		{"bad-escape-second-half-malformed", `[ "\uD800\u00"]`, evidence.ClassBadEscape, 9, "/0"},

		// lone-surrogate: offset of the escape.
		{"lone-high", `"\ud800"`, evidence.ClassLoneSurrogate, 1, ""},
		{"lone-high-upper-hex", `"\uDBFF"`, evidence.ClassLoneSurrogate, 1, ""},
		{"lone-low", `"\udc00"`, evidence.ClassLoneSurrogate, 1, ""},
		{"lone-high-in-array-in-member", `{"a":["ok","\ud800"]}`, evidence.ClassLoneSurrogate, 12, "/a/1"},
		{"high-then-non-surrogate", `"\ud800\u0041"`, evidence.ClassLoneSurrogate, 1, ""},
		{"high-then-high", `"\ud800\ud800"`, evidence.ClassLoneSurrogate, 1, ""},
		{"high-then-raw-character", `"\ud800x"`, evidence.ClassLoneSurrogate, 1, ""},
		{"inverted-pair", `"\ude00\ud83d"`, evidence.ClassLoneSurrogate, 1, ""},
		{"lone-after-valid-pair", `"\ud83d\ude00\ud800"`, evidence.ClassLoneSurrogate, 13, ""},
		{"lone-in-name", `{"\udfff":1}`, evidence.ClassLoneSurrogate, 2, ""},
		{"lone-in-nested-name", `{"a":{"b":1,"\udfff":1}}`, evidence.ClassLoneSurrogate, 13, "/a"},

		// non-finite-number: offset of the number.
		{"overflow", `1e400`, evidence.ClassNonFinite, 0, ""},
		{"negative-overflow", `-1e400`, evidence.ClassNonFinite, 0, ""},
		{"overflow-nested-array", `[[1e400]]`, evidence.ClassNonFinite, 2, "/0/0"},
		{"overflow-nested-member", `{"a":{"b":1e400}}`, evidence.ClassNonFinite, 10, "/a/b"},
		{"overflow-second-element", `[0, 1e309]`, evidence.ClassNonFinite, 4, "/1"},
		{"just-past-max-double", `1.7976931348623159e308`, evidence.ClassNonFinite, 0, ""},
		{"overflow-integer-digits", "[" + "1" + strings.Repeat("0", 309) + "]", evidence.ClassNonFinite, 1, "/0"},

		// duplicate-name: offset of the second name, pointer of its member.
		{"duplicate", `{"a":1,"a":2}`, evidence.ClassDuplicateName, 7, "/a"},
		{"duplicate-after-unescape", `{"a":1,"\u0061":2}`, evidence.ClassDuplicateName, 7, "/a"},
		{"duplicate-nested", `{"x":[{"b":1,"b":2}]}`, evidence.ClassDuplicateName, 13, "/x/0/b"},
		{"duplicate-pointer-escaped", `{"a/b":{"c~d":1,"c~d":2}}`, evidence.ClassDuplicateName, 16, "/a~1b/c~0d"},
		{"duplicate-__proto__", `{"__proto__":1,"__proto__":2}`, evidence.ClassDuplicateName, 15, "/__proto__"},
		{"duplicate-empty-name", `{"":1,"":2}`, evidence.ClassDuplicateName, 6, "/"},
		{"duplicate-raw-and-escaped-pair", "{\"\U0001F600\":1,\"\\ud83d\\ude00\":2}", evidence.ClassDuplicateName, 10, "/\U0001F600"},
		{"duplicate-same-value", `{"a":null,"b":0,"a":null}`, evidence.ClassDuplicateName, 16, "/a"},

		// too-deep: a value at depth 65 (the top level is depth 0).
		{"too-deep-arrays", deep65, evidence.ClassTooDeep, 65, deep65ptr},
		{"too-deep-container", strings.Repeat("[", 66) + strings.Repeat("]", 66), evidence.ClassTooDeep, 65, deep65ptr},
		{"too-deep-objects", deepObj, evidence.ClassTooDeep, 65 * 5, strings.Repeat("/a", 65)},

		// Grammar first: an ambiguous class is reported only for a text that
		// is otherwise RFC 8259; a later grammar fault wins, as in JSON.parse.
		{"lone-surrogate-then-unterminated", `["\uD800\"]`, evidence.ClassSyntax, 11, "/0"},
		{"lone-surrogate-then-bad-escape", `["\ud800\x"]`, evidence.ClassBadEscape, 8, "/0"},
		{"lone-surrogate-then-control", "[\"\\ud800\x01\"]", evidence.ClassControlChar, 8, "/0"},
		{"lone-surrogate-then-missing-bracket", `["\ud800"`, evidence.ClassSyntax, 9, ""},
		{"duplicate-then-trailing-comma", `{"a":1,"a":2,}`, evidence.ClassSyntax, 13, ""},
		{"duplicate-then-trailing-data", `{"a":1,"a":2} x`, evidence.ClassTrailingData, 14, ""},
		{"overflow-then-unterminated", `[1e400`, evidence.ClassSyntax, 6, ""},
		{"too-deep-then-trailing-data", deep65 + "x", evidence.ClassTrailingData, 131, ""},
		// Among the ambiguous classes, the first by position.
		{"lone-surrogate-before-duplicate", `{"\ud800":1,"a":1,"a":2}`, evidence.ClassLoneSurrogate, 2, ""},
		{"duplicate-before-lone-surrogate", `{"a":1,"a":"\ud800"}`, evidence.ClassDuplicateName, 7, "/a"},
		{"overflow-before-duplicate", `{"a":1e400,"a":1}`, evidence.ClassNonFinite, 5, "/a"},

		// trailing-data: offset of the first byte after the document and
		// its whitespace.
		{"second-document", `{} {}`, evidence.ClassTrailingData, 3, ""},
		{"trailing-letter", `[1]x`, evidence.ClassTrailingData, 3, ""},
		{"trailing-nul", "{}\x00", evidence.ClassTrailingData, 2, ""},
		{"extra-close-brace", `{"a":1}}`, evidence.ClassTrailingData, 7, ""},
		{"extra-close-bracket", `[1]]`, evidence.ClassTrailingData, 3, ""},
		{"trailing-comma-after-document", "{\"a\":1}  ,", evidence.ClassTrailingData, 9, ""},
		{"two-numbers", `1 2`, evidence.ClassTrailingData, 2, ""},
		{"two-strings", `"a""b"`, evidence.ClassTrailingData, 3, ""},
		{"number-after-array", "[1]\n0", evidence.ClassTrailingData, 4, ""},
	}
}

func TestReadRefusals(t *testing.T) {
	t.Parallel()
	for _, r := range refusalRows() {
		t.Run(r.name, func(t *testing.T) {
			checkRefusal(t, []byte(r.in), r.class, r.off, r.ptr)
		})
	}
}

func checkRefusal(t *testing.T, in []byte, class evidence.Class, off int64, ptr string) {
	t.Helper()
	v, err := evidence.Read(in)
	if err == nil {
		t.Fatalf("accepted %q as %#v; want refusal %s", clipped(in), v, class)
	}
	if v != nil {
		t.Errorf("refusal returned a value %#v as well", v)
	}
	var e *evidence.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *evidence.Error", err, err)
	}
	if !errors.Is(err, class) {
		t.Errorf("errors.Is(err, %s) = false; err = %v", class, err)
	}
	for _, other := range evidence.Classes {
		if other != class && errors.Is(err, other) {
			t.Errorf("errors.Is(err, %s) = true as well; err = %v", other, err)
		}
	}
	if e.Offset != off || e.Pointer != ptr {
		t.Errorf("refused at offset %d pointer %q, want offset %d pointer %q (%v)", e.Offset, e.Pointer, off, ptr, err)
	}
	if !strings.Contains(err.Error(), string(class)) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", off)) {
		t.Errorf("message %q does not name the class and offset", err)
	}
}

func clipped(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

// TestReadSizeLimit reads exactly MaxSize bytes (accepted) and one byte
// more (refused before anything else is looked at).
func TestReadSizeLimit(t *testing.T) {
	t.Parallel()
	const limit = 8 * 1024 * 1024
	if evidence.MaxSize != limit {
		t.Fatalf("MaxSize = %d, want 8 MiB", evidence.MaxSize)
	}
	// A string document of exactly 8 MiB: '"', 8 MiB - 2 'a's, '"'.
	exact := bytes.Repeat([]byte{'a'}, limit)
	exact[0], exact[limit-1] = '"', '"'
	v, err := evidence.Read(exact)
	if err != nil {
		t.Fatalf("8 MiB document refused: %v", err)
	}
	if s, ok := v.(string); !ok || len(s) != limit-2 {
		t.Fatalf("8 MiB document read as %T of length %d", v, len(s))
	}
	over := append(exact[:limit:limit], ' ')
	checkRefusal(t, over, evidence.ClassTooLarge, limit, "")
	// Size is checked first: an oversized input is too-large whatever
	// else is wrong with it.
	bad := bytes.Repeat([]byte{0xff}, limit+1)
	copy(bad, "\xef\xbb\xbf")
	checkRefusal(t, bad, evidence.ClassTooLarge, limit, "")
}

// obj builds an expected *Object from name, value pairs.
func obj(kv ...any) *evidence.Object {
	o := &evidence.Object{}
	for i := 0; i < len(kv); i += 2 {
		o.Members = append(o.Members, evidence.Member{Name: kv[i].(string), Value: kv[i+1]})
	}
	return o
}

// sameValue compares two read values exactly: floats by their bits (so -0
// and 0 differ), objects member by member in order.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case *evidence.Object:
		y, ok := b.(*evidence.Object)
		if !ok || len(x.Members) != len(y.Members) {
			return false
		}
		for i := range x.Members {
			if x.Members[i].Name != y.Members[i].Name || !sameValue(x.Members[i].Value, y.Members[i].Value) {
				return false
			}
		}
		return true
	}
	return false
}

func nested(depth int, inner any) any {
	v := inner
	for range depth {
		v = []any{v}
	}
	return v
}

func TestReadAcceptedEdges(t *testing.T) {
	t.Parallel()
	negZero := math.Copysign(0, -1)
	tests := []struct {
		name string
		in   string
		want any
	}{
		{"minus-zero", `-0`, negZero},
		{"minus-zero-fraction", `-0.0`, negZero},
		{"minus-zero-exponent", `[-0e5]`, []any{negZero}},
		{"plus-zero", `0`, 0.0},
		{"underflow-to-zero", `1e-400`, 0.0},
		{"negative-underflow-to-minus-zero", `-1e-400`, negZero},
		{"beyond-2^53-rounds-to-even", `9007199254740993`, 9007199254740992.0},
		{"2^53+3-rounds-up", `9007199254740995`, 9007199254740996.0},
		{"long-integer", `123456789012345678901234567890`, 1.2345678901234568e29},
		{"largest-double", `1.7976931348623157e308`, math.MaxFloat64},
		{"below-overflow-threshold", `1.7976931348623158e308`, math.MaxFloat64},
		{"smallest-subnormal", `[5e-324,3e-324,2e-324]`, []any{5e-324, 5e-324, 0.0}},
		{"exponent-forms", `[1E2,1e+2,0.1e1,-1.5e-7,1e21]`, []any{100.0, 100.0, 1.0, -1.5e-7, 1e21}},
		{"surrogate-pair", `"\ud83d\ude00"`, "\U0001F600"},
		{"surrogate-pair-upper-hex", `"\uD834\uDD1E"`, "\U0001D11E"},
		{"surrogate-pair-in-name", `{"\ud83d\ude00":1}`, obj("\U0001F600", 1.0)},
		{"escapes", `"\"\\\/\b\f\n\r\t\u0041\u00e9\u00E9"`, "\"\\/\b\f\n\r\tAéé"},
		{"escaped-nul", `"\u0000"`, "\x00"},
		{"raw-del-and-nonchars", "\"\x7f\uffff\u2028\"", "\x7f\uffff\u2028"},
		{"escaped-nonchar", `"\uffff"`, "\uffff"},
		{"bom-inside-string", "\"\xef\xbb\xbf\"", "\ufeff"},
		{"__proto__-ordinary-member", `{"__proto__":{"x":1},"a":2}`, obj("__proto__", obj("x", 1.0), "a", 2.0)},
		{"member-order-kept", `{"b":1,"a":2,"1":3,"0":4}`, obj("b", 1.0, "a", 2.0, "1", 3.0, "0", 4.0)},
		{"same-name-different-objects", `[{"a":1},{"a":{"a":2}}]`, []any{obj("a", 1.0), obj("a", obj("a", 2.0))}},
		{"nfc-and-nfd-names-differ", `{"é":1,"e\u0301":2}`, obj("é", 1.0, "e\u0301", 2.0)},
		{"case-differs", `{"a":1,"A":2}`, obj("a", 1.0, "A", 2.0)},
		{"whitespace-all-four", " \t\n\r{ \t\n\r\"a\" \t\n\r: \t\n\r[ 1 \t\n\r, 2 ] } \t\n\r", obj("a", []any{1.0, 2.0})},
		{"scalars", `[null,true,false,"",0]`, []any{nil, true, false, "", 0.0}},
		{"null-top", `null`, nil},
		{"empty-containers", `[{},[]]`, []any{obj(), []any{}}},
		{"depth-64-scalar", strings.Repeat("[", 64) + "0" + strings.Repeat("]", 64), nested(64, 0.0)},
		{"depth-64-container", strings.Repeat("[", 65) + strings.Repeat("]", 65), nested(64, []any{})},
		{"depth-64-objects", strings.Repeat(`{"a":`, 64) + "1" + strings.Repeat("}", 64), func() any {
			var v any = 1.0
			for range 64 {
				v = obj("a", v)
			}
			return v
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := evidence.Read([]byte(tt.in))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !sameValue(got, tt.want) {
				t.Errorf("read %#v, want %#v", got, tt.want)
			}
		})
	}
}

// TestReadMinusZeroSignBit checks the sign bit directly, not through a
// helper.
func TestReadMinusZeroSignBit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in       string
		negative bool
	}{{`-0`, true}, {`0`, false}, {`-1e-400`, true}, {`1e-400`, false}, {`-0.0e0`, true}} {
		v, err := evidence.Read([]byte(tt.in))
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		f := v.(float64)
		if f != 0 || math.Signbit(f) != tt.negative {
			t.Errorf("%s read as %v with sign bit %v, want 0 with sign bit %v", tt.in, f, math.Signbit(f), tt.negative)
		}
	}
}

// TestReadObjectRefusesNonObject checks ReadObject's extra rule.
func TestReadObject(t *testing.T) {
	t.Parallel()
	o, err := evidence.ReadObject([]byte(`{"b":1,"a":2}`))
	if err != nil || strings.Join(o.Names(), ",") != "b,a" {
		t.Fatalf("ReadObject = %v, %v", o, err)
	}
	for _, in := range []string{`[]`, `1`, `"x"`, `null`} {
		if _, err := evidence.ReadObject([]byte(in)); !errors.Is(err, evidence.ClassSyntax) {
			t.Errorf("ReadObject(%s): %v, want a syntax refusal", in, err)
		}
	}
	if _, err := evidence.ReadObject([]byte(`{"a":1,"a":1}`)); !errors.Is(err, evidence.ClassDuplicateName) {
		t.Errorf("ReadObject duplicate: %v", err)
	}
}

// TestEveryClassHasARefusalRow keeps the table honest as classes are added.
func TestEveryClassHasARefusalRow(t *testing.T) {
	t.Parallel()
	seen := map[evidence.Class]bool{evidence.ClassTooLarge: true} // TestReadSizeLimit
	for _, r := range refusalRows() {
		seen[r.class] = true
	}
	for _, c := range evidence.Classes {
		if !seen[c] {
			t.Errorf("no refusal row for class %s", c)
		}
		if c.Why() == "" {
			t.Errorf("class %s has no reason", c)
		}
	}
}

// Reading an Object never writes it: a value Read returned can be read from
// many goroutines (run with -race), and members appended directly are
// found.
func TestObjectReadOnlyGet(t *testing.T) {
	t.Parallel()
	v, err := evidence.Read([]byte(`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10}`))
	if err != nil {
		t.Fatal(err)
	}
	o := v.(*evidence.Object)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, ok := o.Get("j"); !ok || got != 10.0 {
				t.Errorf("Get(j) = %v, %v", got, ok)
			}
		}()
	}
	wg.Wait()
	o.Members = append(o.Members, evidence.Member{Name: "k", Value: "appended"})
	if got, ok := o.Get("k"); !ok || got != "appended" {
		t.Errorf("Get of a member appended directly = %v, %v", got, ok)
	}
	o.Set("k", "set")
	o.Set("l", "new")
	if got, _ := o.Get("k"); got != "set" || o.Len() != 12 {
		t.Errorf("after Set: k = %v, %d members", got, o.Len())
	}
	if got, _ := o.Get("l"); got != "new" {
		t.Errorf("Get(l) = %v", got)
	}
	var nilObj *evidence.Object
	if nilObj.Names() != nil || nilObj.Has("a") {
		t.Error("a nil *Object is not empty")
	}
}

// An object built by appending to Members directly is looked up through an
// index too, from many goroutines at once (go test -race checks that the
// index is published without a data race), and stays correct after more
// direct appends, Set and Delete.
func TestObjectAppendedDirectly(t *testing.T) {
	t.Parallel()
	o := &evidence.Object{}
	for i := range 2000 {
		o.Members = append(o.Members, evidence.Member{Name: fmt.Sprintf("n%d", i), Value: float64(i)})
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := g; i < 2000; i += 4 {
				if got, ok := o.Get(fmt.Sprintf("n%d", i)); !ok || got != float64(i) {
					t.Errorf("Get(n%d) = %v, %v", i, got, ok)
					return
				}
			}
		})
	}
	wg.Wait()
	o.Members = append(o.Members, evidence.Member{Name: "late", Value: "x"})
	if got, ok := o.Get("late"); !ok || got != "x" {
		t.Errorf("Get after a further direct append = %v, %v", got, ok)
	}
	o.Delete("n5")
	if o.Has("n5") {
		t.Error("n5 found after Delete")
	}
	if got, ok := o.Get("n6"); !ok || got != 6.0 {
		t.Errorf("Get(n6) after Delete = %v, %v (the index must follow the shifted positions)", got, ok)
	}
	o.Set("n5", "back")
	if got, _ := o.Get("n5"); got != "back" || o.Members[o.Len()-1].Name != "n5" {
		t.Errorf("Set after Delete: %v, last member %q", got, o.Members[o.Len()-1].Name)
	}
	if _, ok := o.Get("absent"); ok {
		t.Error("Get(absent) found something")
	}
}

// TestReadNumbersWithLongExponents: a number whose exponent has five or
// more digits, offset by as many leading or trailing zeros, is an ordinary
// double to JSON.parse. strconv.ParseFloat stops counting an exponent at
// 10000, so such a text once read as 0 (or Infinity) where JSON.parse reads
// 1 — a document whose value differs between cleanroom and the reference.
// Every want is what node 20's JSON.parse returned for the same bytes.
func TestReadNumbersWithLongExponents(t *testing.T) {
	t.Parallel()
	z := func(n int) string { return strings.Repeat("0", n) }
	negZero := math.Copysign(0, -1)
	tests := []struct {
		name string
		in   string
		want float64 // NaN: refused as non-finite-number
	}{
		{"leading-zeros-then-big-exponent", "0." + z(100001) + "1e100002", 1},
		{"trailing-zeros-then-big-negative-exponent", "1" + z(100001) + "e-100001", 1},
		{"negative-fraction", "-0." + z(100001) + "25e100002", -2.5},
		{"exponent-leading-zeros", "1e00000000000000000000000000001", 10},
		{"just-past-10000", "0." + z(10000) + "1e10001", 1},
		{"integer-20000-zeros", "1" + z(20000) + "e-20000", 1},
		{"fraction-digits", "123" + z(30000) + "e-30002", 1.23},
		{"largest-double", "0." + z(30000) + "17976931348623157e30309", math.MaxFloat64},
		{"smallest-subnormal", "0." + z(30000) + "5e29677", 5e-324},
		{"tiny", "1e-99999", 0},
		{"tiny-negative", "-1e-99999", negZero},
		{"zero-big-exponent", "0e99999", 0},
		{"minus-zero-big-exponent", "-0e99999", negZero},
		{"tiny-25-digit-exponent", "1e-99999999999999999999999", 0},
		{"overflow", "1e99999", math.NaN()},
		{"overflow-25-digit-exponent", "1e99999999999999999999999", math.NaN()},
		{"overflow-after-zeros", "0." + z(30000) + "17976931348623159e30309", math.NaN()},
		// More than 800 digits before the point, short exponents: strconv's
		// exact fallback keeps 800 digits and placed the point after them.
		{"integer-part-1001-digits-subnormal", "5" + z(1000) + "e-1324", 5e-324},
		{"integer-part-1002-digits-subnormal", "25" + z(1000) + "e-1325", 5e-324},
		{"integer-part-3000-digits-overflow", "188" + z(2997) + "e-585", math.NaN()},
		{"integer-part-3000-digits-then-fraction", "188" + z(2997) + ".5e-2900", 1.88e99},
		{"integer-part-3000-digits-then-fraction-overflow", "188" + z(2997) + ".5e-500", math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := evidence.Read([]byte(tt.in))
			if math.IsNaN(tt.want) {
				if !errors.Is(err, evidence.ClassNonFinite) {
					t.Fatalf("read %v, %v; want a %s refusal", got, err, evidence.ClassNonFinite)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			f, ok := got.(float64)
			if !ok || f != tt.want || math.Signbit(f) != math.Signbit(tt.want) {
				t.Errorf("read %v, want %v (JSON.parse)", got, tt.want)
			}
		})
	}
}

// DecodeStringLenient reads what JSON.parse would read from a string
// literal, escapes decoded, and never fails: it serves scans of bytes the
// strict reader refused.
func TestDecodeStringLenient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		end      int // index of the closing quote in in
	}{
		{`abc"`, "abc", 3},
		{`\u0069d"`, "id", 7},
		{`H\u0031-x"`, "H1-x", 9},
		{`\ud83d\ude00"`, "\U0001F600", 12},
		{`\ud83d"`, "\uFFFD", 6},      // lone surrogate
		{`\n\t\/\"q"`, "\n\t/\"q", 9}, // short escapes, an escaped quote
		{`\x"`, "x", 2},               // unknown escape: the escaped byte
		{`\u12"`, "u12", 4},           // short \u: not an escape
		{`open`, "open", 4},           // unterminated
	} {
		got, end := evidence.DecodeStringLenient([]byte(tc.in), 0)
		if got != tc.want || end != tc.end {
			t.Errorf("DecodeStringLenient(%q) = %q, %d; want %q, %d", tc.in, got, end, tc.want, tc.end)
		}
	}
}
