package pkgwalk

import (
	"bytes"
	"regexp"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"golang.org/x/text/unicode/norm"
)

// segmentRules returns the rules one path segment breaks: the portable
// vocabulary [A-Za-z0-9._+-] (so no space, backslash, colon or control
// character, which mean different things to different tools), not "." or
// ".." or empty (which name another place), and NFC (one visible name, one
// byte sequence).
func segmentRules(seg string) []Rule {
	var out []Rule
	if seg == "" || seg == "." || seg == ".." {
		return []Rule{ErrBadSegment}
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '+' || c == '-') {
			out = append(out, ErrBadSegment)
			break
		}
	}
	if !norm.NFC.IsNormalString(seg) {
		out = append(out, ErrNotNFC)
	}
	return out
}

// CheckPath reports the first rule a manifest path breaks: it must be
// relative, '/'-separated, and every segment must pass the segment rules.
// Emit and VerifyView check every manifest path with it before using one,
// so a crafted manifest cannot name a place outside the destination.
func CheckPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") {
		return &RefusalError{Path: p, Rule: ErrBadSegment, Detail: "not a relative path"}
	}
	for seg := range strings.SplitSeq(p, "/") {
		if rs := segmentRules(seg); len(rs) > 0 {
			return &RefusalError{Path: p, Rule: rs[0], Detail: "segment " + quote(seg)}
		}
	}
	return nil
}

func quote(s string) string { return "\"" + strings.ReplaceAll(s, "\"", "\\\"") + "\"" }

// leakMarkers are the path parts TRVM-FORMATS §4.1 refuses anywhere in a
// package path (case-insensitively): governance records, round ledgers,
// briefs and reviews are the harness's, never the implementer's;
// node_modules is someone else's code; ".." is an escape however it is
// spelled.
var leakMarkers = []string{"governance/", "ledger", "brief", "review", "node_modules", ".."}

// leakPath returns ErrLeakPath and the marker when the path (a directory's
// with a trailing '/') contains a leak marker.
func leakPath(p string, isDir bool) (Rule, string) {
	l := foldASCII(p)
	if isDir {
		l += "/"
	}
	for _, m := range leakMarkers {
		if strings.Contains(l, m) {
			return ErrLeakPath, "contains " + quote(m)
		}
	}
	return "", ""
}

var (
	challengeID   = regexp.MustCompile(`^H[0-9]+$`)
	challengeFile = regexp.MustCompile(`^H[0-9]+-`)
	// For JSON the strict reader refuses, a conservative byte scan.
	rawChallengeFile = regexp.MustCompile(`"file"\s*:\s*"H[0-9]+-`)
	rawChallengeID   = regexp.MustCompile(`"id"\s*:\s*"H[0-9]+"`)
)

// looksLikeChallenge reports whether JSON bytes hold what a holdout
// challenge looks like (TRVM-FORMATS §4.1): an object with an "id" matching
// ^H[0-9]+$ together with "fixture" and "predicates", or a "file" value
// matching ^H[0-9]+-. Bytes the strict reader refuses are scanned as text,
// so an unparseable file cannot hide a challenge.
func looksLikeChallenge(b []byte) bool {
	v, err := evidence.Read(b)
	if err != nil {
		return rawChallengeFile.Match(b) ||
			rawChallengeID.Match(b) && bytes.Contains(b, []byte(`"fixture"`)) && bytes.Contains(b, []byte(`"predicates"`))
	}
	return challengeIn(v)
}

func challengeIn(v any) bool {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			if challengeIn(e) {
				return true
			}
		}
	case *evidence.Object:
		if id, ok := v.Get("id"); ok {
			if s, ok := id.(string); ok && challengeID.MatchString(s) && v.Has("fixture") && v.Has("predicates") {
				return true
			}
		}
		if f, ok := v.Get("file"); ok {
			if s, ok := f.(string); ok && challengeFile.MatchString(s) {
				return true
			}
		}
		for _, m := range v.Members {
			if challengeIn(m.Value) {
				return true
			}
		}
	}
	return false
}
