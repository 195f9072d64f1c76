package pkgwalk

import (
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
		return []Rule{errBadSegment}
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '+' || c == '-') {
			out = append(out, errBadSegment)
			break
		}
	}
	if !norm.NFC.IsNormalString(seg) {
		out = append(out, errNotNFC)
	}
	return out
}

// CheckPath reports the first rule a manifest path breaks: it must be
// relative, '/'-separated, and every segment must pass the segment rules.
// Emit and VerifyView check every manifest path with it before using one,
// so a crafted manifest cannot name a place outside the destination.
func CheckPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") {
		return &RefusalError{Path: p, Rule: errBadSegment, Detail: "not a relative path"}
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

// leakPath returns errLeakPath and the marker when the path (a directory's
// with a trailing '/') contains a leak marker.
func leakPath(p string, isDir bool) (Rule, string) {
	l := foldASCII(p)
	if isDir {
		l += "/"
	}
	for _, m := range leakMarkers {
		if strings.Contains(l, m) {
			return errLeakPath, "contains " + quote(m)
		}
	}
	return "", ""
}

var (
	challengeID   = regexp.MustCompile(`^H[0-9]+$`)
	challengeFile = regexp.MustCompile(`^H[0-9]+-`)
)

// looksLikeChallenge reports whether JSON bytes hold what a holdout
// challenge looks like (TRVM-FORMATS §4.1): an object with an "id" matching
// ^H[0-9]+$ together with "fixture" and "predicates", or a "file" value
// matching ^H[0-9]+-. Bytes the strict reader refuses are scanned as
// tokens (looksLikeChallengeText), so an unparseable file cannot hide a
// challenge.
func looksLikeChallenge(b []byte) bool {
	v, err := evidence.Read(b)
	if err != nil {
		return looksLikeChallengeText(b)
	}
	return challengeIn(v)
}

// looksLikeChallengeText is the conservative form of the rule for bytes the
// strict reader refuses, which JSON.parse may still read (a duplicate name,
// 1e400, a lone surrogate, nesting deeper than 64): it reads every string
// literal with its escapes decoded, whatever the grammar around it, and
// reports a challenge when a "file" string is followed by ':' and a string
// matching ^H[0-9]+-, or when an "id" string is followed by ':' and a string
// matching ^H[0-9]+$ and the strings "fixture" and "predicates" occur
// anywhere. Every challenge JSON.parse would find is found. (Matching the
// raw bytes instead let "\u0069d" or "H\u0031" hide one.)
func looksLikeChallengeText(b []byte) bool {
	// Streaming, two tokens of memory: key is the last string, colon
	// whether a ':' followed it.
	var key string
	var haveKey, colon, id, fixture, predicates bool
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case ' ', '\t', '\n', '\r', '\f', '\v':
		case ':':
			colon = haveKey && !colon
			haveKey = colon
		case '"':
			str, next := evidence.DecodeStringLenient(b, i+1)
			i = next
			if haveKey && colon {
				if key == "file" && challengeFile.MatchString(str) {
					return true
				}
				if key == "id" && challengeID.MatchString(str) {
					id = true
				}
			}
			switch str {
			case "fixture":
				fixture = true
			case "predicates":
				predicates = true
			}
			key, haveKey, colon = "", false, false
			if str == "id" || str == "file" {
				key, haveKey = str, true
			}
		default:
			haveKey, colon = false, false
		}
	}
	return id && fixture && predicates
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
