package evidence_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// JSONTestSuite (nst/JSONTestSuite, test_parsing) sorts its files into y_
// (a parser must accept), n_ (must refuse) and i_ (the parser decides).
// This test reads every file in place: y_ accepted except the two whose only
// fault is a duplicate name; n_ refused, each in a class; i_ decided as the
// table below says, file by file.

// jtsDuplicates are the y_ files whose texts repeat a member name: RFC 8259
// grammar allows them, the strict reader refuses them as duplicate-name.
var jtsDuplicates = map[string]int64{
	"y_object_duplicated_key.json":           9, // {"a":"b","a":"c"}: second "a" at byte 9
	"y_object_duplicated_key_and_value.json": 9, // {"a":"b","a":"b"}
}

// jtsDeepOrBOM are the n_ files refused by a rule that is checked before
// the grammar fault that makes them n_: a leading BOM (checked first) or a
// value nested deeper than 64 (met before the missing closers).
var jtsDeepOrBOM = map[string]evidence.Class{
	"n_structure_100000_opening_arrays.json": evidence.ClassTooDeep,
	"n_structure_open_array_object.json":     evidence.ClassTooDeep,
	"n_structure_UTF8_BOM_no_data.json":      evidence.ClassBOM,
}

// jtsImplementationDefined is the decision for every i_ file: the class
// and offset of the refusal, or (class "") the value read.
var jtsImplementationDefined = map[string]struct {
	class evidence.Class
	off   int64
	ptr   string
	value any
}{
	// Numbers within the double range, or that round to zero, read as
	// JSON.parse reads them (Go constants: exact decimal, correctly rounded).
	"i_number_double_huge_neg_exp.json":   {value: []any{0.0}},
	"i_number_real_underflow.json":        {value: []any{0.0}},
	"i_number_too_big_neg_int.json":       {value: []any{-123123123123123123123123123123.0}},
	"i_number_too_big_pos_int.json":       {value: []any{100000000000000000000.0}},
	"i_number_very_big_negative_int.json": {value: []any{-237462374673276894279832749832423479823246327846.0}},
	// Numbers beyond the double range: JSON.parse reads ±Infinity.
	"i_number_huge_exp.json":            {class: evidence.ClassNonFinite, off: 1, ptr: "/0"},
	"i_number_neg_int_huge_exp.json":    {class: evidence.ClassNonFinite, off: 1, ptr: "/0"},
	"i_number_pos_double_huge_exp.json": {class: evidence.ClassNonFinite, off: 1, ptr: "/0"},
	"i_number_real_neg_overflow.json":   {class: evidence.ClassNonFinite, off: 1, ptr: "/0"},
	"i_number_real_pos_overflow.json":   {class: evidence.ClassNonFinite, off: 1, ptr: "/0"},
	// \u escapes naming half a surrogate pair (offset of the escape).
	"i_object_key_lone_2nd_surrogate.json":                {class: evidence.ClassLoneSurrogate, off: 2, ptr: ""},
	"i_string_1st_surrogate_but_2nd_missing.json":         {class: evidence.ClassLoneSurrogate, off: 2, ptr: "/0"},
	"i_string_1st_valid_surrogate_2nd_invalid.json":       {class: evidence.ClassLoneSurrogate, off: 2, ptr: "/0"},
	"i_string_incomplete_surrogate_and_escape_valid.json": {class: evidence.ClassLoneSurrogate, off: 2, ptr: "/0"},
	"i_string_incomplete_surrogate_pair.json":             {class: evidence.ClassLoneSurrogate, off: 2, ptr: "/0"},
	"i_string_incomplete_surrogates_escape_valid.json":    {class: evidence.ClassLoneSurrogate, off: 2, ptr: "/0"},
	"i_string_invalid_lonely_surrogate.json":              {class: evidence.ClassLoneSurrogate, off: 2, ptr: "/0"},
	"i_string_invalid_surrogate.json":                     {class: evidence.ClassLoneSurrogate, off: 2, ptr: "/0"},
	"i_string_inverted_surrogates_U+1D11E.json":           {class: evidence.ClassLoneSurrogate, off: 2, ptr: "/0"},
	"i_string_lone_second_surrogate.json":                 {class: evidence.ClassLoneSurrogate, off: 2, ptr: "/0"},
	// Bytes that are not UTF-8 (offset of the first bad byte).
	"i_string_UTF-8_invalid_sequence.json":         {class: evidence.ClassInvalidUTF8, off: 7, ptr: "/0"}, // 0xfa after 日ш
	"i_string_UTF8_surrogate_U+D800.json":          {class: evidence.ClassInvalidUTF8, off: 2, ptr: "/0"},
	"i_string_invalid_utf-8.json":                  {class: evidence.ClassInvalidUTF8, off: 2, ptr: "/0"},
	"i_string_iso_latin_1.json":                    {class: evidence.ClassInvalidUTF8, off: 2, ptr: "/0"},
	"i_string_lone_utf8_continuation_byte.json":    {class: evidence.ClassInvalidUTF8, off: 2, ptr: "/0"},
	"i_string_not_in_unicode_range.json":           {class: evidence.ClassInvalidUTF8, off: 2, ptr: "/0"},
	"i_string_overlong_sequence_2_bytes.json":      {class: evidence.ClassInvalidUTF8, off: 2, ptr: "/0"},
	"i_string_overlong_sequence_6_bytes.json":      {class: evidence.ClassInvalidUTF8, off: 2, ptr: "/0"},
	"i_string_overlong_sequence_6_bytes_null.json": {class: evidence.ClassInvalidUTF8, off: 2, ptr: "/0"},
	"i_string_truncated-utf-8.json":                {class: evidence.ClassInvalidUTF8, off: 2, ptr: "/0"},
	// UTF-16 texts. RFC 8259 §8.1 requires UTF-8, and the reader decodes
	// UTF-8 before it looks at the grammar (as the reference's fatal
	// TextDecoder does), so each is invalid-utf8 at its first byte that
	// cannot be UTF-8, never bom or syntax: FF FE is the UTF-16LE byte
	// order mark, not the UTF-8 one (EF BB BF), and 0xFF is never UTF-8;
	// without a mark the NUL bytes are valid UTF-8 (U+0000) and the first
	// bad byte is the 0xE9 of "é" followed by 0x00, not a continuation byte.
	"i_string_UTF-16LE_with_BOM.json": {class: evidence.ClassInvalidUTF8, off: 0, ptr: ""},
	"i_string_utf16BE_no_BOM.json":    {class: evidence.ClassInvalidUTF8, off: 5, ptr: ""},
	"i_string_utf16LE_no_BOM.json":    {class: evidence.ClassInvalidUTF8, off: 4, ptr: ""},
	// A leading UTF-8 byte order mark.
	"i_structure_UTF-8_BOM_empty_object.json": {class: evidence.ClassBOM, off: 0, ptr: ""},
	// 500 nested arrays: the array at depth 65 is refused.
	"i_structure_500_nested_arrays.json": {class: evidence.ClassTooDeep, off: 65, ptr: strings.Repeat("/0", 65)},
}

func TestJSONTestSuite(t *testing.T) {
	t.Parallel()
	dir := testshared.Path(t, "conformance", "JSONTestSuite", "test_parsing")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[byte]int{}
	seenI := map[string]bool{}
	for _, ent := range entries {
		name := ent.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		in, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		counts[name[0]]++
		t.Run(name, func(t *testing.T) {
			v, err := evidence.Read(in)
			class := evidence.ClassOf(err)
			if err != nil && !slices.Contains(evidence.Classes, class) {
				t.Fatalf("refusal %v is not in a named class", err)
			}
			switch name[0] {
			case 'y':
				if off, dup := jtsDuplicates[name]; dup {
					var e *evidence.Error
					if !errors.As(err, &e) || e.Class != evidence.ClassDuplicateName || e.Offset != off {
						t.Fatalf("got %v, want duplicate-name at offset %d", err, off)
					}
					return
				}
				if err != nil {
					t.Fatalf("y_ file refused: %v", err)
				}
				// What is accepted must also canonicalise.
				if _, err := evidence.Canonical(v); err != nil {
					t.Errorf("accepted, but Canonical fails: %v", err)
				}
			case 'n':
				if err == nil {
					t.Fatalf("n_ file accepted as %#v", v)
				}
				if want, ok := jtsDeepOrBOM[name]; ok {
					if class != want {
						t.Fatalf("got %v, want %s", err, want)
					}
					return
				}
				// An n_ file is not an RFC 8259 text, so its refusal must
				// be a class that refuses only such texts.
				if class.BeyondRFC8259() {
					t.Errorf("n_ file refused as %s, a class for RFC 8259 texts: %v", class, err)
				}
			case 'i':
				seenI[name] = true
				want, ok := jtsImplementationDefined[name]
				if !ok {
					t.Fatalf("no decision recorded for this i_ file (got %v)", err)
				}
				if want.class == "" {
					if err != nil {
						t.Fatalf("refused: %v; want accepted as %#v", err, want.value)
					}
					if !sameValue(v, want.value) {
						t.Fatalf("read %#v, want %#v", v, want.value)
					}
					return
				}
				var e *evidence.Error
				if !errors.As(err, &e) || e.Class != want.class || e.Offset != want.off || e.Pointer != want.ptr {
					t.Fatalf("got %v (pointer %q), want %s at offset %d pointer %q", err, ptrOf(err), want.class, want.off, want.ptr)
				}
			default:
				t.Fatalf("file name does not start with y_, n_ or i_")
			}
		})
	}
	// The pinned snapshot: 95 y_, 188 n_, 35 i_; every decision was used.
	if counts['y'] != 95 || counts['n'] != 188 || counts['i'] != 35 {
		t.Errorf("found %d y_, %d n_, %d i_ files; the pinned snapshot has 95, 188, 35", counts['y'], counts['n'], counts['i'])
	}
	for name := range jtsImplementationDefined {
		if !seenI[name] {
			t.Errorf("decision for %s, but no such file", name)
		}
	}
}

func ptrOf(err error) string {
	var e *evidence.Error
	if errors.As(err, &e) {
		return e.Pointer
	}
	return ""
}
