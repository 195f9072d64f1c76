package pkgwalk

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// The committed-challenge rule (errLeakCommittedChallenge) refuses a
// package file that carries a challenge of the holdout being committed,
// whatever its id looks like. The challenge-shape rule (looksLikeChallenge)
// only knows the reference protocol's H<n> naming; this one knows the
// challenges themselves.
//
// A committed challenge is every JSON object in a holdout file (or in a
// holdout file's top-level array) that has a string "id" and a "predicates"
// or "recipe" member. A package file — any file, whatever its name or
// extension — carries challenge C when either of its token streams
//
//   - contains C whole, or
//   - contains C's id (as a string or a bare word) and C's predicates
//     array, or C's id and C's recipe array (a non-empty array each: the
//     answer key is the predicates, the question is the recipe, and the
//     id ties them to the challenge that will be scored).
//
// A file's token streams are its bytes read as JSON-ish tokens — string
// literals decoded, numbers normalised (1.0 and 1 are one number),
// punctuation kept, whitespace dropped, bare words kept, anything else a
// break no match crosses — and, when the strict reader accepts the file,
// the same tokens of its canonical form (RFC 8785, evidence.Canonical),
// where every object's members are sorted. A value is matched in the
// committed file's member order and in canonical order. So a copy
// re-indented, re-spaced, re-wrapped in Markdown or a JavaScript literal,
// or (in a JSON file) with its members reordered and its note, name or
// fixture dropped is still the challenge; a copy with the members of a
// predicate reordered inside a non-JSON text file is not found (its tokens
// are another sequence), nor is one re-encoded (base64, escaped into a
// string): the rule is a refusal of copies, not a proof of absence.

// committedChallenge is one challenge of the holdout being committed, with
// the token encodings it is matched by.
type committedChallenge struct {
	id   string
	file string // holdout-relative
	// whole, predicates and recipe are token-encoded values, each in the
	// committed member order and in canonical order (nil when absent or
	// an empty array).
	whole, predicates, recipe [][]byte
	// idTokens are the id as a string token and as a word token.
	idTokens [][]byte
}

// holdoutSet is what a walk knows of the holdout: every file's digest (the
// holdout-copy rule) and every committed challenge.
type holdoutSet struct {
	digests    map[string]string // sha256 -> holdout-relative path
	challenges []*committedChallenge
}

// loadCommitted reads the challenges of the holdout files (their bytes, as
// listed by a plain walk of the holdout directory). A file the strict
// reader refuses holds no challenge here; the holdout loader refuses it.
func loadCommitted(files []File) ([]*committedChallenge, error) {
	var out []*committedChallenge
	for _, f := range files {
		v, err := evidence.Read(f.Data)
		if err != nil {
			continue
		}
		items := []any{v}
		if arr, ok := v.([]any); ok {
			items = arr
		}
		for _, it := range items {
			o, ok := it.(*evidence.Object)
			if !ok {
				continue
			}
			id, _ := func() (string, bool) { x, _ := o.Get("id"); s, ok := x.(string); return s, ok }()
			if id == "" || !(o.Has("predicates") || o.Has("recipe")) {
				continue
			}
			c := &committedChallenge{id: id, file: f.Path,
				idTokens: [][]byte{appendToken(nil, tokString, []byte(id)), appendToken(nil, tokWord, []byte(id))}}
			var err error
			if c.whole, err = valueNeedles(o); err != nil {
				return nil, fmt.Errorf("holdout %s: %w", f.Path, err)
			}
			for _, m := range []struct {
				name string
				dst  *[][]byte
			}{{"predicates", &c.predicates}, {"recipe", &c.recipe}} {
				x, _ := o.Get(m.name)
				if arr, ok := x.([]any); !ok || len(arr) == 0 {
					continue
				}
				if *m.dst, err = valueNeedles(x); err != nil {
					return nil, fmt.Errorf("holdout %s: %w", f.Path, err)
				}
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// valueNeedles returns the token encodings of v in its own member order and
// in canonical order.
func valueNeedles(v any) ([][]byte, error) {
	own, err := evidence.Stringify(v, "")
	if err != nil {
		return nil, err
	}
	can, err := evidence.Canonical(v)
	if err != nil {
		return nil, err
	}
	a, b := tokenize(own), tokenize(can)
	if bytes.Equal(a, b) {
		return [][]byte{a}, nil
	}
	return [][]byte{a, b}, nil
}

// committedIn returns the first committed challenge data carries, or nil.
func committedIn(data []byte, cs []*committedChallenge) *committedChallenge {
	streams := [][]byte{tokenize(data)}
	if v, err := evidence.Read(data); err == nil {
		if can, err := evidence.Canonical(v); err == nil {
			streams = append(streams, tokenize(can))
		}
	}
	has := func(needles [][]byte) bool {
		for _, s := range streams {
			for _, n := range needles {
				if len(n) > 0 && bytes.Contains(s, n) {
					return true
				}
			}
		}
		return false
	}
	for _, c := range cs {
		if has(c.whole) || (has(c.idTokens) && (has(c.predicates) || has(c.recipe))) {
			return c
		}
	}
	return nil
}

// Token kinds of the encoded stream.
const (
	tokString = 's'
	tokNumber = 'n'
	tokWord   = 'w'
	tokPunct  = 'p'
	tokBreak  = 'x'
)

// appendToken appends one token: 0x00, its kind, its content with 0x00,
// 0x01 and 0x02 escaped (0x02 0x03, 0x02 0x04, 0x02 0x02), then 0x01. 0x00
// occurs only at a token's start and 0x01 only at its end, so a match of
// an encoded value is aligned on whole tokens: "R2" never matches inside
// "R23", and a value never matches from the middle of a string.
func appendToken(dst []byte, kind byte, content []byte) []byte {
	dst = append(dst, 0, kind)
	for _, c := range content {
		switch c {
		case 0:
			dst = append(dst, 2, 3)
		case 1:
			dst = append(dst, 2, 4)
		case 2:
			dst = append(dst, 2, 2)
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, 1)
}

func isWordByte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_'
}

// tokenize encodes b as a token stream (see the rule above): whitespace
// dropped; string literals decoded leniently (evidence.DecodeStringLenient,
// so "\u0052\u0032" is "R2"); numbers normalised through float64; words
// ([A-Za-z_][A-Za-z0-9_]*); the six JSON punctuators; every other run of
// bytes one break token.
func tokenize(b []byte) []byte {
	out := make([]byte, 0, len(b)+len(b)/2)
	lastBreak := false
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '"':
			s, next := evidence.DecodeStringLenient(b, i+1)
			out = appendToken(out, tokString, []byte(s))
			i = next + 1
		case c == '{' || c == '}' || c == '[' || c == ']' || c == ':' || c == ',':
			out = appendToken(out, tokPunct, b[i:i+1])
			i++
		case c == '-' || '0' <= c && c <= '9':
			j := i + 1
			for j < len(b) && ('0' <= b[j] && b[j] <= '9' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-') {
				j++
			}
			lit := b[i:j]
			if f, err := strconv.ParseFloat(string(lit), 64); err == nil {
				lit = strconv.AppendFloat(nil, f, 'g', -1, 64)
			}
			out = appendToken(out, tokNumber, lit)
			i = j
		case isWordByte(c):
			j := i + 1
			for j < len(b) && isWordByte(b[j]) {
				j++
			}
			out = appendToken(out, tokWord, b[i:j])
			i = j
		default:
			i++
			if !lastBreak {
				out = appendToken(out, tokBreak, nil)
			}
			lastBreak = true
			continue
		}
		lastBreak = false
	}
	return out
}
