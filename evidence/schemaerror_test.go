package evidence_test

import (
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

func TestJSString(t *testing.T) {
	t.Parallel()
	// Expected values are what node prints for String(JSON.parse(doc)).
	tests := []struct{ doc, want string }{
		{`null`, "null"},
		{`true`, "true"},
		{`"a\u0000b"`, "a\x00b"},
		{`-0`, "0"},
		{`1e21`, "1e+21"},
		{`0.000001`, "0.000001"},
		{`1e-7`, "1e-7"},
		{`[1,null,[2,"x"],{}]`, "1,,2,x,[object Object]"},
		{`[]`, ""},
		{`{"a":1}`, "[object Object]"},
	}
	for _, tt := range tests {
		v, err := evidence.Read([]byte(tt.doc))
		if err != nil {
			t.Fatalf("Read(%q): %v", tt.doc, err)
		}
		if got := evidence.JSString(v); got != tt.want {
			t.Errorf("JSString(%s) = %q, want %q", tt.doc, got, tt.want)
		}
	}
}
