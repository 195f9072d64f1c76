package holdout

import (
	"strings"
	"unicode/utf16"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// absent is the result of a path that does not resolve. It is a distinct
// type so no JSON value can be confused with it.
type absentT struct{}

var absent = absentT{}

// absentStable is the stable encoding of an absent value (the reference's
// sentinel): a NUL cannot begin the canonical encoding of any JSON value.
const absentStable = "\x00ABSENT"

// resolve walks a dot-separated path from root. Each segment must name a
// member of an object, or a decimal index of an array; anything else — an
// empty path, a scalar on the way, an index out of range — is absent.
func resolve(root any, path string) any {
	if path == "" {
		return absent
	}
	cur := root
	for seg := range strings.SplitSeq(path, ".") {
		switch x := cur.(type) {
		case *evidence.Object:
			v, ok := x.Get(seg)
			if !ok {
				return absent
			}
			cur = v
		case []any:
			i, ok := arrayIndex(seg)
			if !ok || i >= len(x) {
				return absent
			}
			cur = x[i]
		default:
			return absent
		}
	}
	return cur
}

// arrayIndex parses a canonical decimal array index ("0", "12", never "01"
// or "+1"): the reference's `k in array` sees exactly those names.
func arrayIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// stable returns the stable encoding of v: the canonical (RFC 8785) text of
// a JSON value, or the absent sentinel. Values come from the strict reader,
// which cannot produce anything Canonical refuses; if it ever did, the value
// is encoded as an impossible string so it equals nothing else.
func stable(v any) string {
	if _, ok := v.(absentT); ok {
		return absentStable
	}
	s, err := evidence.CanonicalString(v)
	if err != nil {
		return "\x00UNENCODABLE:" + err.Error()
	}
	return s
}

// clip16 returns the first n UTF-16 code units of s (the reference's
// String.prototype.slice), never splitting a surrogate pair: a Go string
// cannot hold half of one, so a pair straddling the limit is left out.
func clip16(s string, n int) string {
	units := 0
	for i, r := range s {
		w := utf16.RuneLen(r)
		if w < 0 {
			w = 1
		}
		if units+w > n {
			return s[:i]
		}
		units += w
	}
	return s
}

// isNumber reports whether v is a JSON number.
func isNumber(v any) bool {
	_, ok := v.(float64)
	return ok
}

// strictEqual is JavaScript's === over JSON values: scalars by value,
// objects and arrays never (they are distinct references).
func strictEqual(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	default:
		return false
	}
}

// equal reports whether two values have the same stable encoding, without
// building it: the same kind, numbers equal as doubles (so 0 and -0, both
// encoded "0", are equal), strings byte-equal, arrays element-wise, objects
// with the same member names (in any order) and equal members.
func equal(a, b any) bool {
	switch x := a.(type) {
	case absentT:
		_, ok := b.(absentT)
		return ok
	case *evidence.Object:
		y, ok := b.(*evidence.Object)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, m := range x.Members {
			v, ok := y.Get(m.Name)
			if !ok || !equal(m.Value, v) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	default:
		return strictEqual(a, b)
	}
}
