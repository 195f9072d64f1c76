package evidence

import (
	"encoding"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonical returns the RFC 8785 (JCS) bytes of v — the reference's
// canonicalWire. v may be a value returned by [Read] (nil, bool, float64,
// string, []any, *Object) or a plain Go value of the same shape: any integer
// type (|n| ≤ 2^53, so the double is exact), float32, slices and arrays,
// maps with string keys, and structs (as encoding/json marshals them, then
// read back by [Read]: integer fields beyond 2^53 round as in JavaScript).
//
// Scope, as RFC 8785 §3.2: members are sorted by the UTF-16 code units of
// their names; numbers are written as ECMAScript Number::toString writes
// them, with -0 written as 0; strings are escaped as JSON.stringify escapes
// them. A non-finite number, a string that is not valid UTF-8 (a lone
// surrogate in Go form), or a Go value JSON has no form for is an *Error —
// never clamped, replaced or skipped.
func Canonical(v any) ([]byte, error) {
	w := writer{canonical: true}
	if err := w.value(v, 0); err != nil {
		return nil, err
	}
	return w.buf, nil
}

// Stringify returns the bytes of JavaScript's JSON.stringify(v, null, indent)
// followed by a line feed when indent is not "" — the byte form of the
// reference's records, receipts and release files. Object members keep
// their order (*Object) or, for Go maps, are sorted as Canonical sorts them.
// Numbers and strings are written exactly as Canonical writes them.
func Stringify(v any, indent string) ([]byte, error) {
	w := writer{indent: indent}
	if err := w.value(v, 0); err != nil {
		return nil, err
	}
	if indent != "" {
		w.buf = append(w.buf, '\n')
	}
	return w.buf, nil
}

type writer struct {
	buf       []byte
	canonical bool
	indent    string
}

func (w *writer) newline(depth int) {
	if w.indent == "" {
		return
	}
	w.buf = append(w.buf, '\n')
	for range depth {
		w.buf = append(w.buf, w.indent...)
	}
}

func (w *writer) value(v any, depth int) error {
	if depth > 1000 {
		return &Error{Class: ClassNotJSONValue, Detail: "value nested deeper than 1000 (a cycle?)"}
	}
	switch x := v.(type) {
	case nil:
		w.buf = append(w.buf, "null"...)
	case bool:
		w.buf = strconv.AppendBool(w.buf, x)
	case string:
		return w.str(x)
	case float64:
		return w.num(x)
	case float32:
		return w.num(float64(x))
	case int:
		return w.integer(int64(x))
	case int64:
		return w.integer(x)
	case int32:
		return w.integer(int64(x))
	case uint32:
		return w.integer(int64(x))
	case uint64:
		if x > 1<<53 {
			return &Error{Class: ClassNotJSONValue, Detail: fmt.Sprintf("integer %d is not exact as a double", x)}
		}
		return w.integer(int64(x))
	case []any:
		return w.array(len(x), func(i int) any { return x[i] }, depth)
	case []string:
		return w.array(len(x), func(i int) any { return x[i] }, depth)
	case *Object:
		if x == nil {
			w.buf = append(w.buf, "null"...)
			return nil
		}
		members := x.Members
		if w.canonical {
			members = slices.Clone(members)
			slices.SortFunc(members, func(a, b Member) int { return CompareUTF16(a.Name, b.Name) })
		}
		return w.object(members, depth)
	case map[string]any:
		members := make([]Member, 0, len(x))
		for k, val := range x {
			members = append(members, Member{k, val})
		}
		slices.SortFunc(members, func(a, b Member) int { return CompareUTF16(a.Name, b.Name) })
		return w.object(members, depth)
	default:
		return w.reflected(v, depth)
	}
	return nil
}

func (w *writer) reflected(v any, depth int) error {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			w.buf = append(w.buf, "null"...)
			return nil
		}
		return w.array(rv.Len(), func(i int) any { return rv.Index(i).Interface() }, depth)
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		members := make([]Member, 0, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			members = append(members, Member{iter.Key().String(), iter.Value().Interface()})
		}
		slices.SortFunc(members, func(a, b Member) int { return CompareUTF16(a.Name, b.Name) })
		return w.object(members, depth)
	case reflect.Pointer:
		if rv.IsNil() {
			w.buf = append(w.buf, "null"...)
			return nil
		}
		return w.value(rv.Elem().Interface(), depth)
	case reflect.String:
		return w.str(rv.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return w.integer(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if rv.Uint() > 1<<53 {
			break
		}
		return w.integer(int64(rv.Uint()))
	case reflect.Bool:
		w.buf = strconv.AppendBool(w.buf, rv.Bool())
		return nil
	case reflect.Struct:
		// A struct is written as encoding/json marshals it (field order,
		// tags, omitempty), read back strictly so numbers become the
		// doubles JavaScript would hold.
		if s, bad := invalidString(rv, 0); bad {
			// encoding/json would write U+FFFD in its place: refused here as
			// a top-level string is, never replaced.
			return &Error{Class: ClassInvalidForWrite, Detail: fmt.Sprintf("a Go %T holds string %q, not valid UTF-8 (a lone surrogate?)", v, s)}
		}
		b, err := json.Marshal(v)
		if err != nil {
			return &Error{Class: ClassNotJSONValue, Detail: fmt.Sprintf("a Go %T: %v", v, err)}
		}
		rv, err := Read(b)
		if err != nil {
			return &Error{Class: ClassNotJSONValue, Detail: fmt.Sprintf("a Go %T: %v", v, err)}
		}
		return w.value(rv, depth)
	}
	return &Error{Class: ClassNotJSONValue, Detail: fmt.Sprintf("a Go %T has no JSON form here", v)}
}

// invalidString finds a string (or string map key) that is not valid UTF-8
// anywhere in what encoding/json would marshal of rv: exported fields, the
// fields an embedded struct promotes (whatever its type's name), and the
// text of an encoding.TextMarshaler, each of which it would write with
// U+FFFD in place of the invalid bytes. (A json.Marshaler's output is
// embedded raw and refused when read back.)
func invalidString(rv reflect.Value, depth int) (string, bool) {
	if depth > 1000 {
		return "", false // a cycle: json.Marshal refuses it
	}
	if s, bad, done := invalidText(rv); done {
		return s, bad
	}
	switch rv.Kind() {
	case reflect.String:
		return rv.String(), !utf8.ValidString(rv.String())
	case reflect.Pointer, reflect.Interface:
		if !rv.IsNil() {
			return invalidString(rv.Elem(), depth+1)
		}
	case reflect.Struct:
		for i := range rv.NumField() {
			if f := rv.Type().Field(i); f.IsExported() || f.Anonymous {
				if s, bad := invalidString(rv.Field(i), depth+1); bad {
					return s, true
				}
			}
		}
	case reflect.Slice, reflect.Array:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return "", false // []byte: base64
		}
		for i := range rv.Len() {
			if s, bad := invalidString(rv.Index(i), depth+1); bad {
				return s, true
			}
		}
	case reflect.Map:
		iter := rv.MapRange()
		for iter.Next() {
			k := iter.Key()
			if k.Kind() == reflect.String {
				// A key of a string type is written as it is, even
				// when the type is a TextMarshaler.
				if !utf8.ValidString(k.String()) {
					return k.String(), true
				}
			} else if s, bad, _ := invalidText(k); bad {
				return s, true
			}
			if s, bad := invalidString(iter.Value(), depth+1); bad {
				return s, true
			}
		}
	}
	return "", false
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// invalidText reports, for a value encoding/json marshals through a method
// (done), whether the text it writes is not valid UTF-8.
func invalidText(rv reflect.Value) (s string, bad, done bool) {
	if !rv.IsValid() || !rv.CanInterface() || rv.Kind() == reflect.Pointer && rv.IsNil() {
		return "", false, false
	}
	if rv.Kind() != reflect.Pointer && rv.CanAddr() && (reflect.PointerTo(rv.Type()).Implements(jsonMarshalerType) || reflect.PointerTo(rv.Type()).Implements(textMarshalerType)) {
		rv = rv.Addr() // encoding/json calls a pointer method of an addressable value
	}
	t := rv.Type()
	if t.Implements(jsonMarshalerType) {
		return "", false, true
	}
	if !t.Implements(textMarshalerType) {
		return "", false, false
	}
	b, err := rv.Interface().(encoding.TextMarshaler).MarshalText()
	if err != nil {
		return "", false, true // json.Marshal reports it
	}
	return string(b), !utf8.Valid(b), true
}

func (w *writer) integer(n int64) error {
	if n > 1<<53 || n < -(1<<53) {
		return &Error{Class: ClassNotJSONValue, Detail: fmt.Sprintf("integer %d is not exact as a double", n)}
	}
	w.buf = strconv.AppendInt(w.buf, n, 10)
	return nil
}

func (w *writer) num(f float64) error {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return &Error{Class: ClassNonFinite, Detail: fmt.Sprintf("%v has no JSON form", f)}
	}
	w.buf = AppendNumber(w.buf, f)
	return nil
}

func (w *writer) array(n int, at func(int) any, depth int) error {
	w.buf = append(w.buf, '[')
	for i := range n {
		if i > 0 {
			w.buf = append(w.buf, ',')
		}
		w.newline(depth + 1)
		if err := w.value(at(i), depth+1); err != nil {
			return err
		}
	}
	if n > 0 {
		w.newline(depth)
	}
	w.buf = append(w.buf, ']')
	return nil
}

func (w *writer) object(members []Member, depth int) error {
	w.buf = append(w.buf, '{')
	for i, m := range members {
		if i > 0 {
			if w.canonical && m.Name == members[i-1].Name {
				return &Error{Class: ClassDuplicateName, Detail: fmt.Sprintf("member %q twice", m.Name)}
			}
			w.buf = append(w.buf, ',')
		}
		w.newline(depth + 1)
		if err := w.str(m.Name); err != nil {
			return err
		}
		w.buf = append(w.buf, ':')
		if w.indent != "" {
			w.buf = append(w.buf, ' ')
		}
		if err := w.value(m.Value, depth+1); err != nil {
			return err
		}
	}
	if len(members) > 0 {
		w.newline(depth)
	}
	w.buf = append(w.buf, '}')
	return nil
}

const hexDigits = "0123456789abcdef"

// str writes s as JSON.stringify does: \" \\ \b \f \n \r \t, other C0
// controls as \u00xx (lowercase hex), everything else raw.
func (w *writer) str(s string) error {
	if !utf8.ValidString(s) {
		// In Go a lone surrogate can only appear as invalid UTF-8; RFC 8785
		// §3.2.2.2 requires an error, never a replacement character.
		return &Error{Class: ClassInvalidForWrite, Detail: fmt.Sprintf("string %q is not valid UTF-8 (a lone surrogate?)", s)}
	}
	w.buf = append(w.buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		w.buf = append(w.buf, s[start:i]...)
		switch c {
		case '"':
			w.buf = append(w.buf, '\\', '"')
		case '\\':
			w.buf = append(w.buf, '\\', '\\')
		case '\b':
			w.buf = append(w.buf, '\\', 'b')
		case '\f':
			w.buf = append(w.buf, '\\', 'f')
		case '\n':
			w.buf = append(w.buf, '\\', 'n')
		case '\r':
			w.buf = append(w.buf, '\\', 'r')
		case '\t':
			w.buf = append(w.buf, '\\', 't')
		default:
			w.buf = append(w.buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	w.buf = append(w.buf, s[start:]...)
	w.buf = append(w.buf, '"')
	return nil
}

// AppendNumber appends ECMAScript Number::toString(f) for a finite f
// (ECMA-262 §6.1.6.1.20): the shortest digits that round-trip, plain
// notation for exponents from -7 to 20, otherwise d.ddde±n; -0 is "0".
func AppendNumber(buf []byte, f float64) []byte {
	if f == 0 {
		return append(buf, '0')
	}
	if f < 0 {
		buf = append(buf, '-')
		f = -f
	}
	// Shortest round-trip digits and exponent: "d.ddde±xx".
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64)
	ePos := 0
	for e[ePos] != 'e' {
		ePos++
	}
	mant := e[:ePos]
	exp, _ := strconv.Atoi(string(e[ePos+1:]))
	digits := make([]byte, 0, 17)
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	k := len(digits)
	n := exp + 1 // the decimal point sits after n digits
	switch {
	case k <= n && n <= 21:
		buf = append(buf, digits...)
		for range n - k {
			buf = append(buf, '0')
		}
	case 0 < n && n <= 21:
		buf = append(buf, digits[:n]...)
		buf = append(buf, '.')
		buf = append(buf, digits[n:]...)
	case -6 < n && n <= 0:
		buf = append(buf, '0', '.')
		for range -n {
			buf = append(buf, '0')
		}
		buf = append(buf, digits...)
	default:
		buf = append(buf, digits[0])
		if k > 1 {
			buf = append(buf, '.')
			buf = append(buf, digits[1:]...)
		}
		buf = append(buf, 'e')
		if n-1 >= 0 {
			buf = append(buf, '+')
		}
		buf = strconv.AppendInt(buf, int64(n-1), 10)
	}
	return buf
}

// CompareUTF16 orders strings by their UTF-16 code units, as JavaScript's
// default sort and RFC 8785 §3.2.3 do (U+1F602 sorts before U+FB33).
func CompareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return cmpUnits(ra, rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func cmpUnits(ra, rb rune) int {
	ua, ub := firstUnit(ra), firstUnit(rb)
	if ua != ub {
		return int(ua) - int(ub)
	}
	// Same high surrogate: compare the low ones.
	_, la := utf16.EncodeRune(ra)
	_, lb := utf16.EncodeRune(rb)
	return int(la) - int(lb)
}

func firstUnit(r rune) rune {
	if r >= 0x10000 {
		hi, _ := utf16.EncodeRune(r)
		return hi
	}
	return r
}

// CanonicalString is Canonical for callers that hash text.
func CanonicalString(v any) (string, error) {
	b, err := Canonical(v)
	return string(b), err
}
