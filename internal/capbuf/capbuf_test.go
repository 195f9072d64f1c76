package capbuf

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestBuffer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		max       int
		writes    []string
		want      string
		truncated bool
	}{
		{max: 8, writes: []string{"abc", "def"}, want: "abcdef"},
		{max: 6, writes: []string{"abc", "def"}, want: "abcdef"},
		{max: 5, writes: []string{"abc", "def"}, want: "abcde", truncated: true},
		{max: 3, writes: []string{"abc", "def", "ghi"}, want: "abc", truncated: true},
		{max: 2, writes: []string{"abcdef"}, want: "ab", truncated: true},
		{max: 0, writes: []string{"a"}, want: "", truncated: true},
		{max: 4, writes: []string{"", "abcd", ""}, want: "abcd"},
	} {
		t.Run(fmt.Sprint(tc.max, tc.writes), func(t *testing.T) {
			b := &Buffer{Max: tc.max}
			for _, w := range tc.writes {
				// Every write is reported whole: the writer never sees an error.
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
			}
			if b.String() != tc.want || string(b.Bytes()) != tc.want || b.Truncated() != tc.truncated {
				t.Errorf("kept %q truncated %v, want %q %v", b.String(), b.Truncated(), tc.want, tc.truncated)
			}
		})
	}
}

// A copy of more than the cap completes: io.Copy sees no short write.
func TestBufferCopy(t *testing.T) {
	t.Parallel()
	b := &Buffer{Max: 10}
	n, err := io.Copy(b, strings.NewReader(strings.Repeat("x", 1<<20)))
	if err != nil || n != 1<<20 || b.String() != "xxxxxxxxxx" || !b.Truncated() {
		t.Errorf("copied %d, %v; kept %q truncated %v", n, err, b.String(), b.Truncated())
	}
}
