package evidence

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

const (
	// MaxSize is the largest input Read accepts: 8 MiB. It bounds the
	// memory and time one piece of evidence can cost a verifier.
	MaxSize = 8 << 20
	// MaxDepth is the deepest a value may be nested; the top-level value is at
	// depth 0, so 65 nested arrays are accepted and 66 refused. It keeps a
	// document from exhausting the stack of a recursive consumer
	// (Canonical, Stringify, a schema validator, JavaScript's JSON.parse).
	MaxDepth = 64
)

var bom = []byte{0xEF, 0xBB, 0xBF}

// Read parses b strictly and returns the value JSON.parse would return:
// nil, bool, float64, string, []any or *Object. Any refusal is an *Error.
func Read(b []byte) (any, error) {
	switch {
	case len(b) == 0:
		return nil, &Error{Class: ClassEmpty, Detail: "no bytes"}
	case len(b) > MaxSize:
		// Refused before any parsing: a huge input costs nothing more.
		return nil, &Error{Class: ClassTooLarge, Offset: MaxSize, Detail: fmt.Sprintf("%d bytes is more than the %d-byte limit", len(b), MaxSize)}
	case bytes.HasPrefix(b, bom):
		return nil, &Error{Class: ClassBOM, Detail: "leading UTF-8 byte order mark"}
	}
	if !utf8.Valid(b) {
		off := invalidUTF8Offset(b)
		return nil, &Error{Class: ClassInvalidUTF8, Offset: int64(off), Pointer: invalidUTF8Pointer(b, off), Detail: fmt.Sprintf("byte 0x%02x is not valid UTF-8", b[off])}
	}
	r := reader{in: b, dec: jsontext.NewDecoder(bytes.NewReader(b))}
	return r.document()
}

// ReadObject is Read for documents whose top level must be an object.
func ReadObject(b []byte) (*Object, error) {
	v, err := Read(b)
	if err != nil {
		return nil, err
	}
	o, ok := v.(*Object)
	if !ok {
		return nil, &Error{Class: ClassSyntax, Detail: fmt.Sprintf("top-level value is %s, not an object", TypeName(v))}
	}
	return o, nil
}

func invalidUTF8Offset(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// invalidUTF8Pointer returns the JSON Pointer of the value holding the
// invalid byte at off, as the tokenizer reports it when it stops at that
// very byte, or "" (top level, or an earlier syntax error stops it first).
// Only refused inputs pay for this second pass.
func invalidUTF8Pointer(b []byte, off int) string {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	for {
		_, err := dec.ReadToken()
		if err == nil {
			continue
		}
		var se *jsontext.SyntacticError
		if errors.As(err, &se) && se.ByteOffset == int64(off) {
			return string(se.JSONPointer)
		}
		return ""
	}
}

type reader struct {
	in  []byte
	dec *jsontext.Decoder
	// lenient marks the second pass that looks only for grammar faults:
	// duplicates and lone surrogates are let through by the tokenizer,
	// depth and number range are not checked.
	lenient bool
}

// lenientDepth bounds the grammar pass below the tokenizer's own fixed
// nesting limit (10000), whose error is not exported.
const lenientDepth = 9000

// document reads the whole input. A refusal in one of the classes beyond
// RFC 8259 (lone-surrogate, non-finite-number, duplicate-name, too-deep) is
// reported only for a text that is otherwise RFC 8259 grammar: when the text
// also breaks the grammar, later in the input, that fault is reported
// instead, as JSON.parse reports it. So an ambiguous class always names an
// RFC 8259 text whose only problem is ambiguity.
func (r *reader) document() (any, error) {
	v, err := r.walk()
	if err == nil || r.lenient || !ClassOf(err).BeyondRFC8259() {
		return v, err
	}
	g := reader{in: r.in, lenient: true, dec: jsontext.NewDecoder(bytes.NewReader(r.in),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))}
	if _, gerr := g.walk(); gerr != nil && !ClassOf(gerr).BeyondRFC8259() {
		return nil, gerr
	}
	return nil, err
}

type frame struct {
	obj  *Object
	arr  []any
	name string // pending member name when obj != nil
}

func (r *reader) walk() (any, error) {
	var stack []*frame
	var result any
	done := false
	for !done {
		start := r.dec.InputOffset()
		tok, err := r.dec.ReadToken()
		if err != nil {
			return nil, r.classify(err, start)
		}
		kind := tok.Kind()
		if kind == '}' || kind == ']' {
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			var v any
			if f.obj != nil {
				// Indexed now, before the value is shared, so that concurrent
				// readers of a large object find the index ready.
				f.obj.indexOf()
				v = f.obj
			} else {
				if f.arr == nil {
					f.arr = []any{}
				}
				v = f.arr
			}
			if len(stack) == 0 {
				result, done = v, true
			} else {
				stack[len(stack)-1].add(v)
			}
			continue
		}
		top := len(stack) > 0 && stack[len(stack)-1].obj != nil
		if _, n := r.dec.StackIndex(r.dec.StackDepth()); top && kind == '"' && n%2 == 1 {
			// An object member name: jsontext has already refused a duplicate.
			stack[len(stack)-1].name = tok.String()
			continue
		}
		// A value at depth len(stack).
		if r.lenient && len(stack) > lenientDepth {
			return nil, &Error{Class: ClassTooDeep, Offset: r.valueOffset(start), Detail: fmt.Sprintf("value nested deeper than %d", lenientDepth)}
		}
		if len(stack) > MaxDepth && !r.lenient {
			return nil, &Error{Class: ClassTooDeep, Offset: r.valueOffset(start), Pointer: r.pointer(), Detail: fmt.Sprintf("value nested deeper than %d", MaxDepth)}
		}
		var v any
		switch kind {
		case 'n':
			v = nil
		case 't':
			v = true
		case 'f':
			v = false
		case '"':
			v = tok.String()
		case '0':
			f, ferr := parseNumber(tok.String())
			if (ferr != nil || math.IsInf(f, 0) || math.IsNaN(f)) && !r.lenient {
				return nil, &Error{Class: ClassNonFinite, Offset: r.valueOffset(start), Pointer: r.pointer(), Detail: fmt.Sprintf("number %s is outside the range of a double", tok.String())}
			}
			v = f
		case '{':
			stack = append(stack, &frame{obj: &Object{}})
			continue
		case '[':
			stack = append(stack, &frame{})
			continue
		}
		if len(stack) == 0 {
			result, done = v, true
		} else {
			stack[len(stack)-1].add(v)
		}
	}
	// Only whitespace may follow the document.
	end := r.dec.InputOffset()
	if _, err := r.dec.ReadToken(); err != io.EOF {
		// The first byte after the whitespace, even a ',' or ':'.
		off := int64(r.skipSpace(int(end)))
		if _, isNum := result.(float64); isNum && off == end && off < int64(len(r.in)) && isDigit(r.in[off]) {
			// "01", "-01": JSON.parse calls a leading zero a syntax error,
			// and so do we (the tokenizer sees two numbers).
			return nil, &Error{Class: ClassSyntax, Offset: off, Detail: "leading zero in a number"}
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
			var se *jsontext.SyntacticError
			if !errors.As(err, &se) || se.ByteOffset != off {
				// e.g. "{}x": the trailing bytes are not even a token.
				return nil, &Error{Class: ClassTrailingData, Offset: off, Detail: "content after the document"}
			}
		}
		return nil, &Error{Class: ClassTrailingData, Offset: off, Detail: "content after the document"}
	}
	return result, nil
}

func (f *frame) add(v any) {
	if f.obj != nil {
		// Names are unique: the tokenizer refused duplicates.
		f.obj.Members = append(f.obj.Members, Member{Name: f.name, Value: v})
		return
	}
	f.arr = append(f.arr, v)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// parseNumber reads the RFC 8259 number literal lit as JSON.parse does
// (round to nearest double). strconv.ParseFloat alone is not enough for
// long literals: it stops accumulating an exponent at 10000, so
// "0.<100001 zeros>1e100002" (JSON.parse: 1) read as 0, and its exact
// fallback keeps 800 digits and takes the position of the decimal point
// from them, so an integer part of more than 800 digits is misplaced
// ("188<2997 zeros>e-585" is Infinity, not 1.88e215). A long literal is
// first rewritten as 0.<significant digits>e<x> with x computed exactly,
// a form ParseFloat reads exactly; a nonzero x beyond ±400 is out of any
// double's reach.
func parseNumber(lit string) (float64, error) {
	if len(lit) <= 800 {
		if e := strings.IndexAny(lit, "eE"); e < 0 || len(strings.TrimLeft(lit[e+1:], "+-0")) < 5 {
			// At most 800 digits and an exponent below 10000: exact.
			return strconv.ParseFloat(lit, 64)
		}
	}
	i := 0
	neg := lit != "" && lit[0] == '-'
	if neg {
		i++
	}
	// Significant digits, and the decimal exponent of the point before
	// them: value = 0.<sig> × 10^point × 10^exp.
	var sig []byte
	point := 0
	seenDot := false
	for ; i < len(lit) && (isDigit(lit[i]) || lit[i] == '.'); i++ {
		c := lit[i]
		switch {
		case c == '.':
			seenDot = true
		case c == '0' && len(sig) == 0:
			if seenDot {
				point--
			}
		default:
			sig = append(sig, c)
			if !seenDot {
				point++
			}
		}
	}
	expDigits := ""
	expNeg := false
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			expNeg = lit[i] == '-'
			i++
		}
		expDigits = strings.TrimLeft(lit[i:], "0")
	}
	for len(sig) > 0 && sig[len(sig)-1] == '0' {
		sig = sig[:len(sig)-1]
	}
	zero := 0.0
	if neg {
		zero = math.Copysign(0, -1)
	}
	if len(sig) == 0 {
		return zero, nil
	}
	// point is bounded by the input size (8 MiB); an exponent of more than
	// 15 digits puts the value far beyond either end of the double range.
	var x int64
	if len(expDigits) > 15 {
		x = math.MaxInt32
	} else if expDigits != "" {
		x, _ = strconv.ParseInt(expDigits, 10, 64)
	}
	if expNeg {
		x = -x
	}
	x += int64(point)
	switch {
	case x > 400:
		x = 400 // still +Inf with ErrRange from ParseFloat
	case x < -400:
		return zero, nil
	}
	s := make([]byte, 0, len(sig)+12)
	if neg {
		s = append(s, '-')
	}
	s = append(s, "0."...)
	s = append(s, sig...)
	s = append(s, 'e')
	s = strconv.AppendInt(s, x, 10)
	return strconv.ParseFloat(string(s), 64)
}

func (r *reader) pointer() string { return string(r.dec.StackPointer()) }

// valueOffset skips whitespace, at most one ',' or ':', and whitespace
// again from off to the start of the next token.
func (r *reader) valueOffset(off int64) int64 {
	i := r.skipSpace(int(off))
	if i < len(r.in) && (r.in[i] == ',' || r.in[i] == ':') {
		i = r.skipSpace(i + 1)
	}
	return int64(i)
}

func (r *reader) skipSpace(i int) int {
	for i < len(r.in) {
		switch r.in[i] {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		}
		break
	}
	return i
}

// classify turns a tokenizer error into a refusal class. Problems inside a
// string are located by scanning the string ourselves, so the class never
// depends on the wording of the tokenizer's messages.
func (r *reader) classify(err error, start int64) error {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return &Error{Class: ClassSyntax, Offset: int64(len(r.in)), Pointer: r.pointer(), Detail: "unexpected end of input"}
		}
		return &Error{Class: ClassSyntax, Offset: start, Detail: err.Error()}
	}
	ptr := string(se.JSONPointer)
	if errors.Is(err, jsontext.ErrDuplicateName) {
		return &Error{Class: ClassDuplicateName, Offset: se.ByteOffset, Pointer: ptr, Detail: "duplicate member name " + quoteName(ptr)}
	}
	at := r.valueOffset(start)
	// Only a problem inside the string literal is the string's: "{"a" "b"}"
	// fails at the second string's first byte (a missing ':'), which is
	// syntax whatever that string holds.
	if at < int64(len(r.in)) && r.in[at] == '"' && se.ByteOffset > at {
		if class, off, detail := scanString(r.in, int(at)); class != "" {
			return &Error{Class: class, Offset: int64(off), Pointer: ptr, Detail: detail}
		}
	}
	if errors.Is(se.Err, io.ErrUnexpectedEOF) {
		return &Error{Class: ClassSyntax, Offset: int64(len(r.in)), Pointer: ptr, Detail: "unexpected end of input"}
	}
	if off := int(se.ByteOffset); off < len(r.in) && r.in[off] == ',' {
		// A trailing comma: the tokenizer blames the comma, JSON.parse
		// (and a reader of the message) the bracket after it.
		if j := r.skipSpace(off + 1); j < len(r.in) && (r.in[j] == '}' || r.in[j] == ']') {
			return &Error{Class: ClassSyntax, Offset: int64(j), Pointer: ptr, Detail: fmt.Sprintf("trailing comma before %q", r.in[j])}
		}
	}
	return &Error{Class: ClassSyntax, Offset: se.ByteOffset, Pointer: ptr, Detail: se.Err.Error()}
}

func quoteName(ptr string) string {
	i := len(ptr) - 1
	for i >= 0 && ptr[i] != '/' {
		i--
	}
	name := ptr[i+1:]
	// Undo RFC 6901 escaping for the message.
	name = string(bytes.ReplaceAll(bytes.ReplaceAll([]byte(name), []byte("~1"), []byte("/")), []byte("~0"), []byte("~")))
	return fmt.Sprintf("%q", name)
}

// scanString checks the string literal starting at b[i] == '"' and returns
// the class, offset and detail of its problem, or "" if it has none. A
// grammar fault (control character, bad escape) anywhere in the literal
// comes before a lone surrogate, and so does an unterminated literal
// (syntax at the end of the input): JSON.parse reports those whatever
// surrogates precede them.
func scanString(b []byte, i int) (Class, int, string) {
	var lone struct {
		off    int
		detail string
	}
	lone.off = -1
	surrogate := func(off int, detail string) {
		if lone.off < 0 {
			lone.off, lone.detail = off, detail
		}
	}
	for j := i + 1; j < len(b); j++ {
		c := b[j]
		switch {
		case c == '"':
			if lone.off >= 0 {
				return ClassLoneSurrogate, lone.off, lone.detail
			}
			return "", 0, ""
		case c < 0x20:
			return ClassControlChar, j, fmt.Sprintf("raw control character 0x%02x in a string", c)
		case c == '\\':
			if j+1 >= len(b) {
				break
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				u, ok := hex4(b, j+2)
				if !ok {
					return ClassBadEscape, j, fmt.Sprintf("escape %q is not \\u and four hex digits", clip(b[j:], 6))
				}
				switch {
				case u >= 0xDC00 && u <= 0xDFFF:
					surrogate(j, fmt.Sprintf("low surrogate \\u%04x without a high surrogate before it", u))
					j += 5
				case u >= 0xD800 && u <= 0xDBFF:
					lo, ok := -1, false
					if j+7 < len(b) && b[j+6] == '\\' && b[j+7] == 'u' {
						// A malformed second escape ("\ud800\uzz") is
						// found as a bad escape by the next round.
						lo, ok = hex4(b, j+8)
					}
					if !ok || lo < 0xDC00 || lo > 0xDFFF {
						surrogate(j, fmt.Sprintf("high surrogate \\u%04x not followed by a \\u low surrogate", u))
						j += 5
						continue
					}
					j += 11
				default:
					j += 5
				}
			default:
				return ClassBadEscape, j, fmt.Sprintf("unknown escape %q", clip(b[j:], 2))
			}
		}
	}
	return ClassSyntax, len(b), "unterminated string"
}

// DecodeStringLenient decodes the JSON string literal whose body starts at
// b[i] (after the opening quote), leniently: unknown escapes stand for the
// escaped byte, a lone surrogate for U+FFFD. It returns the text and the
// index of the closing quote (len(b) when there is none). It is for
// scanning bytes the strict reader refused, never for a value that is
// hashed or compared.
func DecodeStringLenient(b []byte, i int) (string, int) {
	var out []byte
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			return string(out), i
		case c == '\\' && i+1 < len(b):
			i++
			switch e := b[i]; e {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				u, ok := hex4(b, i+1)
				if !ok {
					out = append(out, 'u')
					continue
				}
				i += 4
				r := rune(u)
				if utf16.IsSurrogate(r) && i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
					if lo, ok := hex4(b, i+3); ok {
						if p := utf16.DecodeRune(r, rune(lo)); p != utf8.RuneError {
							r = p
							i += 6
						}
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				out = append(out, e)
			}
		default:
			out = append(out, c)
		}
	}
	return string(out), len(b)
}

func hex4(b []byte, i int) (int, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	v := 0
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

func clip(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// TypeName names the JSON type of a value read by Read.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case *Object:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
