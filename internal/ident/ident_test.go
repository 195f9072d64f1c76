package ident

import (
	"errors"
	"strings"
	"testing"
)

// A digest written out by hand (SHA-256 of the empty string), not computed.
const d = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func TestIsDigest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{d, true},
		{strings.Repeat("0", 64), true},
		{strings.ToUpper(d), false}, // one spelling per digest
		{d[:63], false},
		{d + "0", false},
		{d[:63] + "g", false},
		{d[:63] + " ", false},
		{"", false},
		{"srel-" + d, false},
		{d[:62] + "\u00e9", false}, // 64 bytes, not hex
	} {
		if got := IsDigest(tc.s); got != tc.want {
			t.Errorf("IsDigest(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s, prefix, digest string
		errHas            string // "" for no error
	}{
		{"srel-" + d, "srel-", d, ""},
		{"bpkg-" + d, "bpkg-", d, ""},
		{"brun-" + d, "brun-", d, ""},
		{"srel-" + strings.ToUpper(d), "", "", `want "srel-" followed by 64`},
		{"bpkg-" + d[:63], "", "", `want "bpkg-" followed by 64`},
		{"brun-" + d + "a", "", "", `want "brun-" followed by 64`},
		{"brun-", "", "", `want "brun-"`},
		{"SREL-" + d, "", "", "want srel-, bpkg- or brun-"},
		{"xrun-" + d, "", "", "want srel-, bpkg- or brun-"},
		{d, "", "", "want srel-, bpkg- or brun-"},
		{"", "", "", "want srel-, bpkg- or brun-"},
		{" srel-" + d, "", "", "want srel-, bpkg- or brun-"},
	} {
		p, dg, err := Parse(tc.s)
		if tc.errHas == "" {
			if err != nil || p != tc.prefix || dg != tc.digest {
				t.Errorf("Parse(%q) = %q, %q, %v; want %q, %q", tc.s, p, dg, err, tc.prefix, tc.digest)
			}
			continue
		}
		if !errors.Is(err, errForm) || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("Parse(%q) error = %v, want errForm saying %q", tc.s, err, tc.errHas)
		}
		if p != "" || dg != "" {
			t.Errorf("Parse(%q) returned %q, %q with an error", tc.s, p, dg)
		}
	}
}

func TestIsAndCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefix, s string
		want      bool
	}{
		{Srel, "srel-" + d, true},
		{Bpkg, "srel-" + d, false}, // the right form of the wrong identity
		{Brun, "brun-" + d, true},
		{Brun, "brun-../" + d[3:], false},
		{"", d, true},
		{"", "bpkg-" + d, false},
	} {
		if got := Is(tc.prefix, tc.s); got != tc.want {
			t.Errorf("Is(%q, %q) = %v, want %v", tc.prefix, tc.s, got, tc.want)
		}
		err := Check(tc.prefix, tc.s)
		if tc.want != (err == nil) || (err != nil && !errors.Is(err, errForm)) {
			t.Errorf("Check(%q, %q) = %v, want ok=%v (else errForm)", tc.prefix, tc.s, err, tc.want)
		}
	}
	if err := Check(Bpkg, "x"); err == nil || !strings.Contains(err.Error(), `want "bpkg-" followed by 64 lowercase hex digits`) {
		t.Errorf("Check(Bpkg, x) = %v, want it to say the form", err)
	}
}
