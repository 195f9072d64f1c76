package pkgwalk

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/ident"
)

const (
	// ManifestType is the type of a blind-package manifest.
	ManifestType = "TRVM-BLIND-PACKAGE-v1"
	// DefaultRootLabel is the reference's root label: the package's path in
	// the repository it was cut from. It is part of the identity.
	DefaultRootLabel = "docs/spec/proof-wire"
	// idDomain separates the bpkg preimage from every other hash.
	idDomain = "TRVM-BLIND-PACKAGE-v1|"
	// IDPrefix starts every blind_package_id.
	IDPrefix = ident.Bpkg
)

// Manifest is a TRVM-BLIND-PACKAGE-v1 manifest (TRVM-FORMATS §4.2): the
// files of a package, sorted by path, with their digests. Its identity is
// the bpkg (ID).
type Manifest struct {
	Type      string
	Root      string
	FileCount int
	Files     []FileDigest
	// Note is the free text of a record file (ReadManifestFile); it is not
	// part of the identity.
	Note string
}

// NewManifest returns the manifest of a walked tree. A tree with problems
// has no manifest: its Problems are the error.
func NewManifest(t *Tree, rootLabel string) (*Manifest, error) {
	if err := t.Err(); err != nil {
		return nil, err
	}
	if rootLabel == "" {
		rootLabel = DefaultRootLabel
	}
	files := t.Digests()
	SortByPath(files)
	return &Manifest{Type: ManifestType, Root: rootLabel, FileCount: len(files), Files: files}, nil
}

// value returns the manifest as the JSON value whose canonical form is
// hashed: {type, root, file_count, files:[{path, sha256}]}.
func (m *Manifest) value() *evidence.Object {
	files := make([]any, len(m.Files))
	for i, f := range m.Files {
		files[i] = evidence.NewObject(evidence.Member{Name: "path", Value: f.Path}, evidence.Member{Name: "sha256", Value: f.SHA256})
	}
	return evidence.NewObject(
		evidence.Member{Name: "type", Value: m.Type},
		evidence.Member{Name: "root", Value: m.Root},
		evidence.Member{Name: "file_count", Value: float64(m.FileCount)},
		evidence.Member{Name: "files", Value: files},
	)
}

// ID returns the blind_package_id: "bpkg-" + hex SHA-256 of
// "TRVM-BLIND-PACKAGE-v1|" + the RFC 8785 bytes of the manifest.
func (m *Manifest) ID() (string, error) {
	c, err := evidence.Canonical(m.value())
	if err != nil {
		return "", fmt.Errorf("canonical manifest: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(idDomain))
	h.Write(c)
	return IDPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// MarshalRecord returns the bytes of the record file
// (governance/blind-package.json in the reference): JSON.stringify of
// {blind_package_id, type, root, file_count, files, note} with a one-space
// indent and a final line feed.
func (m *Manifest) MarshalRecord(note string) ([]byte, error) {
	id, err := m.ID()
	if err != nil {
		return nil, err
	}
	v := m.value()
	rec := evidence.NewObject(evidence.Member{Name: "blind_package_id", Value: id})
	rec.Members = append(rec.Members, v.Members...)
	rec.Set("note", note)
	return evidence.Stringify(rec, " ")
}

// Lookup returns the digest recorded for path (exact match, no
// normalisation).
func (m *Manifest) Lookup(path string) (FileDigest, bool) {
	i, ok := slices.BinarySearchFunc(m.Files, path, func(f FileDigest, p string) int { return evidence.CompareUTF16(f.Path, p) })
	if !ok {
		return FileDigest{}, false
	}
	return m.Files[i], true
}

// Dirs returns exactly the directories the manifest implies (every parent
// of a manifested file), sorted so that parents come before children.
func (m *Manifest) Dirs() []string {
	seen := make(map[string]bool)
	var out []string
	for _, f := range m.Files {
		for i := 0; i < len(f.Path); i++ {
			if f.Path[i] == '/' && !seen[f.Path[:i]] {
				seen[f.Path[:i]] = true
				out = append(out, f.Path[:i])
			}
		}
	}
	slices.SortFunc(out, evidence.CompareUTF16)
	return out
}

// Validate checks what a manifest from outside must satisfy before any of
// its paths is used: the type, a count equal to the number of files, paths
// that pass CheckPath, sorted and unique, no path that is also a directory
// of another, no two equal after ASCII case-folding, and lowercase hex
// digests.
func (m *Manifest) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", errBadManifest, fmt.Sprintf(format, a...))
	}
	if m.Type != ManifestType {
		return bad("type %q, want %q", m.Type, ManifestType)
	}
	if m.Root == "" {
		return bad("empty root")
	}
	if m.FileCount != len(m.Files) {
		return bad("file_count %d but %d files", m.FileCount, len(m.Files))
	}
	folded := make(map[string]string, len(m.Files))
	for i, f := range m.Files {
		if err := CheckPath(f.Path); err != nil {
			return fmt.Errorf("%w: files[%d]: %w", errBadManifest, i, err)
		}
		if !ident.IsDigest(f.SHA256) {
			return bad("files[%d] (%q): sha256 is not 64 lowercase hex digits", i, f.Path)
		}
		if i > 0 && evidence.CompareUTF16(m.Files[i-1].Path, f.Path) >= 0 {
			return bad("files[%d] (%q): not sorted after %q, or repeated", i, f.Path, m.Files[i-1].Path)
		}
		k := foldASCII(f.Path)
		if o, ok := folded[k]; ok {
			return fmt.Errorf("%w: %w", errBadManifest, &RefusalError{Path: f.Path, Rule: errCaseCollision, Detail: "with " + quote(o)})
		}
		folded[k] = f.Path
	}
	// A file whose path is also a parent directory of another cannot exist.
	// Two directories equal after case-folding ("A/" and "a/") are refused
	// as two such files are: no walk yields them, so only a forged record can.
	dirs := make(map[string]string)
	for _, d := range m.Dirs() {
		k := foldASCII(d)
		if _, ok := folded[k]; ok {
			return bad("%q is both a file and a directory", d)
		}
		if o, ok := dirs[k]; ok {
			return fmt.Errorf("%w: %w", errBadManifest, &RefusalError{Path: d, Rule: errCaseCollision, Detail: "with " + quote(o)})
		}
		dirs[k] = d
	}
	return nil
}

// ParseManifestRecord reads a record file's bytes
// ({blind_package_id, type, root, file_count, files, note}) through the
// strict evidence reader, validates the manifest and checks that the
// recorded blind_package_id is the manifest's identity.
func ParseManifestRecord(b []byte) (*Manifest, error) {
	o, err := evidence.ReadObject(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadManifest, err)
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", errBadManifest, fmt.Sprintf(format, a...))
	}
	for _, n := range o.Names() {
		switch n {
		case "blind_package_id", "type", "root", "file_count", "files", "note":
		default:
			return nil, bad("unknown member %q", n)
		}
	}
	str := func(name string, required bool) (string, error) {
		v, ok := o.Get(name)
		if !ok {
			if required {
				return "", bad("missing %q", name)
			}
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", bad("%q is %s, want a string", name, evidence.TypeName(v))
		}
		return s, nil
	}
	m := &Manifest{}
	recorded, err := str("blind_package_id", true)
	if err != nil {
		return nil, err
	}
	if m.Type, err = str("type", true); err != nil {
		return nil, err
	}
	if m.Root, err = str("root", true); err != nil {
		return nil, err
	}
	if m.Note, err = str("note", false); err != nil {
		return nil, err
	}
	fc, ok := o.Get("file_count")
	if !ok {
		return nil, bad("missing \"file_count\"")
	}
	n, ok := fc.(float64)
	if !ok || n < 0 || n != math.Trunc(n) || n > 1<<31 {
		return nil, bad("\"file_count\" is not a non-negative integer")
	}
	m.FileCount = int(n)
	fv, ok := o.Get("files")
	if !ok {
		return nil, bad("missing \"files\"")
	}
	arr, ok := fv.([]any)
	if !ok {
		return nil, bad("\"files\" is %s, want an array", evidence.TypeName(fv))
	}
	m.Files = make([]FileDigest, 0, len(arr))
	for i, e := range arr {
		fo, ok := e.(*evidence.Object)
		if !ok || fo.Len() != 2 {
			return nil, bad("files[%d] is not an object {path, sha256}", i)
		}
		p, ok1 := fo.Get("path")
		h, ok2 := fo.Get("sha256")
		ps, ok3 := p.(string)
		hs, ok4 := h.(string)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, bad("files[%d] is not an object {path, sha256} of strings", i)
		}
		m.Files = append(m.Files, FileDigest{Path: ps, SHA256: hs})
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	id, err := m.ID()
	if err != nil {
		return nil, err
	}
	if id != recorded {
		return nil, fmt.Errorf("%w: recorded %s, manifest is %s", errManifestID, recorded, id)
	}
	return m, nil
}

// ReadManifestFile reads and checks a record file (see ParseManifestRecord).
func ReadManifestFile(path string) (*Manifest, error) {
	// The strict reader's file rules: a FIFO planted at path is refused
	// without blocking, the descriptor read is the one fstat checked, and
	// the size is bounded.
	b, err := evidence.ReadFileBytes(path)
	if err != nil {
		return nil, err
	}
	m, err := ParseManifestRecord(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// CheckID reports whether s has the form of a blind_package_id.
func CheckID(s string) error {
	if !ident.Is(IDPrefix, s) {
		return fmt.Errorf("%q: %w", s, errBadID)
	}
	return nil
}
