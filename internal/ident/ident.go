package ident

import (
	"errors"
	"fmt"
	"strings"
)

// The prefixes of the identities' text forms.
const (
	Srel = "srel-" // spec_release_id
	Bpkg = "bpkg-" // blind_package_id
	Brun = "brun-" // run_id
)

// DigestLen is the length of a digest's text form.
const DigestLen = 64

// errForm is the refusal of a string that is not the identity asked for.
var errForm = errors.New("not an identity")

// IsDigest reports whether s is DigestLen lowercase hex digits.
func IsDigest(s string) bool {
	if len(s) != DigestLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		// Upper case is refused: a second spelling of one digest would
		// let two strings name one identity.
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Is reports whether s is prefix followed by a digest. An empty prefix
// asks for a bare digest.
func Is(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	return ok && IsDigest(rest)
}

// Check is [Is] as an error: errForm, quoting s and saying the form wanted.
func Check(prefix, s string) error {
	if Is(prefix, s) {
		return nil
	}
	if prefix == "" {
		return fmt.Errorf("%q: %w: want %d lowercase hex digits", s, errForm, DigestLen)
	}
	return fmt.Errorf("%q: %w: want %q followed by %d lowercase hex digits", s, errForm, prefix, DigestLen)
}

// Parse splits an identity of any of the three prefixed forms into its
// prefix (Srel, Bpkg or Brun) and digest.
func Parse(s string) (prefix, digest string, err error) {
	for _, p := range []string{Srel, Bpkg, Brun} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			if err := Check(p, s); err != nil {
				return "", "", err
			}
			return p, rest, nil
		}
	}
	return "", "", fmt.Errorf("%q: %w: want srel-, bpkg- or brun- followed by %d lowercase hex digits", s, errForm, DigestLen)
}
