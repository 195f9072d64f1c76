package evidence

import (
	"errors"
	"fmt"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// Class names one refusal rule of the strict reader.
type Class string

// The refusal classes of [Read]. Their string values are stable: they appear
// in command output, transcripts and tests.
const (
	ClassEmpty           Class = "empty"
	ClassTooLarge        Class = "too-large"
	ClassBOM             Class = "bom"
	ClassInvalidUTF8     Class = "invalid-utf8"
	ClassSyntax          Class = "syntax"
	ClassControlChar     Class = "control-character"
	ClassBadEscape       Class = "bad-escape"
	ClassLoneSurrogate   Class = "lone-surrogate"
	ClassNonFinite       Class = "non-finite-number"
	ClassDuplicateName   Class = "duplicate-name"
	ClassTooDeep         Class = "too-deep"
	ClassTrailingData    Class = "trailing-data"
	ClassNotJSONValue    Class = "not-a-json-value" // Canonical/Stringify given a Go value JSON cannot hold
	ClassInvalidForWrite Class = "invalid-string"   // Canonical/Stringify given a string that is not UTF-8
)

// Classes lists every refusal class of [Read], in the order the README and
// the self-test present them.
var Classes = []Class{
	ClassEmpty, ClassTooLarge, ClassBOM, ClassInvalidUTF8, ClassSyntax,
	ClassControlChar, ClassBadEscape, ClassLoneSurrogate, ClassNonFinite,
	ClassDuplicateName, ClassTooDeep, ClassTrailingData,
}

// Error is a refusal: the rule (Class), where it happened (Offset in bytes
// from the start of the input, and Pointer, the RFC 6901 JSON Pointer of the
// value being read, "" at top level), and a short detail.
//
// errors.Is(err, evidence.ClassDuplicateName) reports whether a refusal is of
// one class.
type Error struct {
	Class   Class
	Offset  int64
	Pointer string
	Detail  string
}

func (e *Error) Error() string {
	loc := fmt.Sprintf("offset %d", e.Offset)
	if e.Pointer != "" {
		loc += fmt.Sprintf(", pointer %q", e.Pointer)
	}
	if e.Detail == "" {
		return fmt.Sprintf("evidence: %s at %s", e.Class, loc)
	}
	return fmt.Sprintf("evidence: %s at %s: %s", e.Class, loc, e.Detail)
}

// Is lets errors.Is match an *Error against its Class.
func (e *Error) Is(target error) bool {
	c, ok := target.(Class)
	return ok && c == e.Class
}

// Error makes a Class usable as an errors.Is target.
func (c Class) Error() string { return string(c) }

// ClassOf returns the refusal class of err, or "" when err is not a refusal.
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return ""
}

// classInfo records, for each refusal class of [Read], whether the refused
// inputs can be RFC 8259 JSON texts that JavaScript's JSON.parse reads (the
// class is then a refusal beyond RFC 8259), and why it is refused.
var classInfo = map[Class]struct {
	beyond bool
	why    string
}{
	ClassEmpty:         {false, "no JSON text: RFC 8259 requires one value"},
	ClassTooLarge:      {true, "bounded work: RFC 8259 §9 lets a parser limit the size of texts"},
	ClassBOM:           {true, "RFC 8259 §8.1 lets parsers ignore a byte order mark or reject it; readers disagree"},
	ClassInvalidUTF8:   {false, "RFC 8259 §8.1 requires UTF-8; lenient decoders each repair bad bytes differently"},
	ClassSyntax:        {false, "outside the RFC 8259 grammar (comments, trailing commas, NaN, leading zeros, other whitespace, …)"},
	ClassControlChar:   {false, "RFC 8259 §7: characters below U+0020 must be escaped in strings"},
	ClassBadEscape:     {false, "RFC 8259 §7 allows only \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX"},
	ClassLoneSurrogate: {true, "half a surrogate pair has no Unicode scalar value: JSON.parse keeps the code unit, Go and most readers cannot (RFC 8259 §8.2: unpredictable)"},
	ClassNonFinite:     {true, "a number beyond the double range reads as Infinity in JSON.parse, which no JSON text can write back (RFC 8259 §6, RFC 8785 §3.2.2.3)"},
	ClassDuplicateName: {true, "JSON.parse keeps the last value, other readers the first or all (RFC 8259 §4: names SHOULD be unique)"},
	ClassTooDeep:       {true, "bounded work: RFC 8259 §9 lets a parser limit nesting; readers' limits differ"},
	ClassTrailingData:  {false, "a JSON text is exactly one value: a stream reader would read a second document"},
}

// BeyondRFC8259 reports whether the class refuses texts that are RFC 8259
// JSON and that JSON.parse reads: the ambiguous classes, whose readings
// differ between readers. Every other class refuses only texts that are not
// RFC 8259 JSON at all.
func (c Class) BeyondRFC8259() bool { return classInfo[c].beyond }

// Why says why the class is refused, in one line.
func (c Class) Why() string { return classInfo[c].why }

// FaultClass is Refused (internal/fault): the strict reader refused the bytes.
func (*Error) FaultClass() fault.Class { return fault.Refused }
