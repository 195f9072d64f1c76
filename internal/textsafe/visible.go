package textsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Visible returns s with every character that does not show as itself
// written as \u{XXXX} (and a backslash doubled, so the escape cannot be
// forged): C0 and C1 controls and DEL (a terminal's escape sequences, a
// carriage return that overwrites the line), the bidirectional controls
// (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069: "Trojan Source"
// reordering), the zero-width and invisible characters (U+00AD,
// U+180E, U+200B–U+200D, U+2060–U+2064, U+FEFF) and the line and paragraph
// separators (U+2028, U+2029). Bytes that are not UTF-8 are written
// \x{XX}. Everything else is unchanged, so ordinary text reads as before.
// The transcript and the records keep the raw bytes; this is for showing
// them.
func Visible(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x{%02X}`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case hidden(r):
			fmt.Fprintf(&b, `\u{%04X}`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func needsEscape(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if r == '\\' || hidden(r) {
			return true
		}
	}
	return false
}

// hidden reports whether r controls the display or does not show.
func hidden(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f: // C0, DEL, C1
		return true
	case r == 0x00ad, r == 0x061c, r == 0x180e:
		return true
	case r >= 0x200b && r <= 0x200f: // zero-width, LRM, RLM
		return true
	case r >= 0x2028 && r <= 0x202e: // separators, embeddings, overrides
		return true
	case r >= 0x2060 && r <= 0x2069: // word joiner, invisible operators, isolates
		return true
	case r == 0xfeff:
		return true
	}
	return false
}
