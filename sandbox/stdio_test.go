package sandbox

import (
	"bytes"
	"testing"
)

// What a candidate writes to a terminal: controls and escape sequences
// become visible text, tab, newline and carriage return and ordinary UTF-8
// pass, and a C1 control split across two writes is still caught.
func TestControlEscaper(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		writes []string
		want   string
	}{
		{"plain", []string{"ok\tdone\r\n"}, "ok\tdone\r\n"},
		{"title sequence", []string{"\x1b]0;pwned\x07x"}, "^[]0;pwned^Gx"},
		{"clear screen", []string{"\x1b[2J"}, "^[[2J"},
		{"backspace and DEL", []string{"a\bb\x7f"}, "a^Hb^?"},
		{"C1 CSI in UTF-8", []string{"\xc2\x9b2J"}, `\u009b2J`},
		{"C1 CSI split across writes", []string{"a\xc2", "\x9bb"}, `a\u009bb`},
		{"é split across writes", []string{"caf\xc3", "\xa9 \xc2", "\xa0"}, "café \u00a0"},
		{"a lone 0xC2 at the end", []string{"x\xc2"}, "x"}, // held until the next write (flushed by the copier at EOF)
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			e := &controlEscaper{w: &out}
			for _, w := range tc.writes {
				if n, err := e.Write([]byte(w)); err != nil || n != len(w) {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if got := out.String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
