package evidence

import (
	"errors"
	"fmt"
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
