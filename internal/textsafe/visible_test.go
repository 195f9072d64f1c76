package textsafe

import "testing"

func TestVisible(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"spec/ADD.md", "spec/ADD.md"},
		{"naïve – café 日本", "naïve – café 日本"},
		{"a\u202eexe.txt", `a\u{202E}exe.txt`},
		{"x\u2066y\u2069", `x\u{2066}y\u{2069}`},
		{"zero\u200bwidth\ufeff", `zero\u{200B}width\u{FEFF}`},
		{"\x1b[2Jclear", `\u{001B}[2Jclear`},
		{"line\r\nbreak\u2028", `line\u{000D}\u{000A}break\u{2028}`},
		{"c1\u009b", `c1\u{009B}`},
		{`forged \u{202E}`, `forged \\u{202E}`},
		{"bad\xffutf8", `bad\x{FF}utf8`},
	} {
		if got := Visible(tc.in); got != tc.want {
			t.Errorf("Visible(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
