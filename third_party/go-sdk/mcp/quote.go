// Copyright 2025 The Go MCP SDK Authors. All rights reserved.
// Use of this source code is governed by the license
// that can be found in the LICENSE file.

package mcp

import "unicode/utf8"

// cleanroom patch (this file): appendQuotedText appends s as a JSON string
// exactly as encoding/json.Marshal writes a string (HTML-escaped), into a
// destination sized beforehand by quotedTextLen, so that a large text
// content is encoded in one allocation of its final size instead of a
// buffer that doubles as it grows. The loop follows Go's
// encoding/json appendString (Copyright The Go Authors, BSD-style license),
// with escapeHTML set. cleanroom's harness/sdkpatch_test.go checks the
// bytes against encoding/json.

const lowerHex = "0123456789abcdef"

// textEscape is, for each ASCII byte, 0 if it is written as is, the
// character after a backslash for a short escape, or 'u' for \u00XX.
var textEscape = func() (t [utf8.RuneSelf]byte) {
	for b := range utf8.RuneSelf {
		switch {
		case b == '"' || b == '\\':
			t[b] = byte(b)
		case b == '\b':
			t[b] = 'b'
		case b == '\f':
			t[b] = 'f'
		case b == '\n':
			t[b] = 'n'
		case b == '\r':
			t[b] = 'r'
		case b == '\t':
			t[b] = 't'
		case b < 0x20 || b == '<' || b == '>' || b == '&':
			t[b] = 'u'
		}
	}
	return t
}()

// quotedTextLen is len(appendQuotedText(nil, s)).
func quotedTextLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			switch textEscape[b] {
			case 0:
				n++
			case 'u':
				n += 6
			default:
				n += 2
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

func appendQuotedText(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			e := textEscape[b]
			if e == 0 {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			if e == 'u' {
				dst = append(dst, '\\', 'u', '0', '0', lowerHex[b>>4], lowerHex[b&0xf])
			} else {
				dst = append(dst, '\\', e)
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', lowerHex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
