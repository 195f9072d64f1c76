package evidence_test

import (
	"bytes"
	"math"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// The seed corpora are in testdata/fuzz/FuzzRead and testdata/fuzz/FuzzCanonical.
// Run: go test -run '^$' -fuzz FuzzRead -fuzztime 30s ./evidence/

// FuzzRead: Read never panics; a refusal is an *Error in a named class
// located inside the input; an accepted value canonicalises, and reading
// the canonical bytes (or the Stringify bytes) back gives the same value,
// -0 excepted (RFC 8785 and JSON.stringify write it as 0).
func FuzzRead(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := evidence.Read(in)
		if err != nil {
			e, ok := err.(*evidence.Error)
			if !ok {
				t.Fatalf("error %v (%T) is not an *evidence.Error", err, err)
			}
			if !slices.Contains(evidence.Classes, e.Class) {
				t.Fatalf("refusal class %q is not a named class", e.Class)
			}
			if e.Offset < 0 || e.Offset > int64(len(in)) {
				t.Fatalf("offset %d outside the %d-byte input: %v", e.Offset, len(in), err)
			}
			if v != nil {
				t.Fatalf("refusal returned a value too")
			}
			return
		}
		want, err := evidence.JSDump(zeroSign(v))
		if err != nil {
			t.Fatalf("accepted value does not dump: %v", err)
		}
		c, err := evidence.Canonical(v)
		if err != nil {
			// Every value Read accepts has a canonical form: finite
			// numbers, UTF-8 strings, unique names.
			t.Fatalf("accepted %q, but Canonical fails (class %q): %v", in, evidence.ClassOf(err), err)
		}
		s, err := evidence.Stringify(v, " ")
		if err != nil {
			t.Fatalf("accepted, but Stringify fails: %v", err)
		}
		for form, b := range map[string][]byte{"canonical": c, "stringify": s} {
			back, err := evidence.Read(b)
			if err != nil {
				t.Fatalf("%s bytes %q of accepted %q are refused: %v", form, b, in, err)
			}
			got, err := evidence.JSDump(back)
			if err != nil || got != want {
				t.Fatalf("%s round trip of %q: read back %s, want %s (%v)", form, in, got, want, err)
			}
		}
	})
}

// FuzzCanonical: canonical bytes are a fixed point — read and canonicalised
// again they do not change — and are UTF-8 with no whitespace outside
// strings.
func FuzzCanonical(f *testing.F) {
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := evidence.Read(in)
		if err != nil {
			return
		}
		c1, err := evidence.Canonical(v)
		if err != nil {
			t.Fatalf("Canonical of accepted %q: %v", in, err)
		}
		if !utf8.Valid(c1) {
			t.Fatalf("canonical bytes %q are not UTF-8", c1)
		}
		if hasWhitespaceOutsideStrings(c1) {
			t.Fatalf("canonical bytes %q have whitespace between tokens", c1)
		}
		v2, err := evidence.Read(c1)
		if err != nil {
			t.Fatalf("canonical bytes %q refused: %v", c1, err)
		}
		c2, err := evidence.Canonical(v2)
		if err != nil {
			t.Fatalf("Canonical of %q: %v", c1, err)
		}
		if !bytes.Equal(c1, c2) {
			t.Fatalf("canonicalising changed canonical bytes\n  first %q\n second %q", c1, c2)
		}
	})
}

// zeroSign returns v with every -0 replaced by 0.
func zeroSign(v any) any {
	switch x := v.(type) {
	case float64:
		if x == 0 && math.Signbit(x) {
			return 0.0
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = zeroSign(e)
		}
		return out
	case *evidence.Object:
		out := &evidence.Object{Members: make([]evidence.Member, len(x.Members))}
		for i, m := range x.Members {
			out.Members[i] = evidence.Member{Name: m.Name, Value: zeroSign(m.Value)}
		}
		return out
	}
	return v
}

func hasWhitespaceOutsideStrings(b []byte) bool {
	in := false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return true
		}
	}
	return false
}
