package pkgwalk

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// Absent is the digest the path-list rule records for a listed path that
// does not exist (TRVM-FORMATS §5.3, digestOfPaths).
const Absent = "ABSENT"

// FileDigest is one entry of a path list: a relative, '/'-separated path and
// the lowercase hex SHA-256 of the file's bytes (or [Absent]).
type FileDigest struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// PathListDigest is the one path-list digest of TRVM-FORMATS §3.1 that every
// release surface, the instrument digest and the package digests use: sort
// the entries by path (UTF-16 code units), concatenate path + LF + sha256 +
// LF for each, and return the lowercase hex SHA-256 of that text. No header,
// no count: a rename moves the digest.
func PathListDigest(entries []FileDigest) string {
	sorted := slices.Clone(entries)
	SortByPath(sorted)
	var b strings.Builder
	for _, e := range sorted {
		b.WriteString(e.Path)
		b.WriteByte('\n')
		b.WriteString(e.SHA256)
		b.WriteByte('\n')
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// SortByPath sorts entries by path in UTF-16 code-unit order, the order of
// JavaScript's default sort that the reference uses everywhere.
func SortByPath(entries []FileDigest) {
	slices.SortFunc(entries, func(a, b FileDigest) int { return evidence.CompareUTF16(a.Path, b.Path) })
}

// SHA256Hex returns the lowercase hex SHA-256 of b.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
