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
		// Each named range of the doc comment at its edges, and a neighbour
		// outside it that shows as itself.
		{"del\x7f", `del\u{007F}`},
		{"soft\u00adhyphen", `soft\u{00AD}hyphen`},
		{"alm\u061c mvs\u180e", `alm\u{061C} mvs\u{180E}`},
		{"lrm\u200e rlm\u200f", `lrm\u{200E} rlm\u{200F}`},
		{"wj\u2060 inv\u2064", `wj\u{2060} inv\u{2064}`},
		{"nbsp\u00a0 sup\u2070 \u00e9", "nbsp\u00a0 sup\u2070 \u00e9"},
	} {
		if got := Visible(tc.in); got != tc.want {
			t.Errorf("Visible(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
