package pkgwalk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
)

// View is a verified package: the bytes of every manifested file, read once
// from the descriptors that were checked and hashed. A server of the
// package serves these and never reads the disk again, so a file changed
// after verification changes nothing that is served.
type View struct {
	ID       string    // the bpkg of Manifest
	Manifest *Manifest // what was verified
	Files    []File    // sorted by path, Data set
	index    map[string]int
}

// File returns the verified file at path: an exact key lookup, no
// normalisation of any kind.
func (v *View) File(path string) (File, bool) {
	i, ok := v.index[path]
	if !ok {
		return File{}, false
	}
	return v.Files[i], true
}

// SealDigest is the reference's seal_digest (TRVM-FORMATS §11.1): the hex
// SHA-256 of "path<TAB>sha256" per manifested file, joined by LF.
func (v *View) SealDigest() string { return sealDigest(v.Files) }

// SealDigest is the seal_digest of the tree's files: a View's, for a
// caller whose manifest is this very walk (there is nothing to compare it
// with, so no second walk is needed).
func (t *Tree) SealDigest() string { return sealDigest(t.Files) }

// sealDigest is seal_digest over files sorted by path (as Walk sorts them).
func sealDigest(files []File) string {
	h := sha256.New()
	for i, f := range files {
		if i > 0 {
			h.Write([]byte{'\n'})
		}
		h.Write([]byte(f.Path + "\t" + f.SHA256))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// VerifyView checks that the tree at path is exactly the manifest and
// returns its bytes: the same set of regular files with the same digests,
// exactly the directories the manifest implies, one link per file, an
// ordinary directory (not a symlink) at the root, nothing else, and no
// problem of the package walk (TRVM-FORMATS §4.1, leaks included). The
// error is a Problems list naming every difference.
func VerifyView(path string, m *Manifest) (*View, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	id, err := m.ID()
	if err != nil {
		return nil, err
	}
	tree, err := Walk(path, WalkOptions{KeepBytes: true})
	if err != nil {
		return nil, err
	}
	probs := append(Problems(nil), tree.Problems...)
	seen := make(map[string]bool, len(tree.Files))
	for _, f := range tree.Files {
		seen[f.Path] = true
		want, ok := m.Lookup(f.Path)
		switch {
		case !ok:
			// A file nobody measured (AB4's BLIND-PACKAGE.json).
			probs = append(probs, &RefusalError{Path: f.Path, Rule: errNotInManifest})
		case want.SHA256 != f.SHA256:
			probs = append(probs, &RefusalError{Path: f.Path, Rule: errDigestMismatch, Detail: fmt.Sprintf("manifest %s, file %s", want.SHA256, f.SHA256)})
		}
	}
	for _, f := range m.Files {
		if !seen[f.Path] {
			probs = append(probs, &RefusalError{Path: f.Path, Rule: errMissingFile})
		}
	}
	if len(probs) > 0 {
		return nil, sortProblems(probs)
	}
	return newView(id, m, tree.Files), nil
}

// OpenView walks the tree at path with every rule of Walk (the content
// rules included), reads and hashes every file once, keeps the bytes, and
// returns them as a View if the manifest of that very walk, under
// rootLabel, is the pinned bpkg expect (ErrNotPinned otherwise, naming
// both). It is VerifyView for a caller that holds no manifest of its own:
// the pin is the only authority, and a tree whose manifest has the pinned
// identity has exactly the pinned paths and digests. The root is opened as
// Walk opens it (a symlink or non-directory refused) and measured by
// OpenViewAt.
func OpenView(path, rootLabel, expect string) (*View, error) {
	if err := CheckID(expect); err != nil {
		return nil, err
	}
	rootf, prob, err := openRoot(path)
	if err != nil {
		return nil, err
	}
	if prob != nil {
		return nil, Problems{prob}
	}
	defer rootf.Close()
	return OpenViewAt(rootf, rootLabel, expect)
}

// OpenViewAt is OpenView of the directory already open at dir (which stays
// the caller's; its name labels errors): the walk starts from that
// descriptor and resolves no path. The clean room opens its sealed view
// once, asserts the seal on that descriptor (seal.OpenSealed) and measures
// the view from it, so that what is measured is the mount that was
// asserted, not whatever the path names by then.
func OpenViewAt(dir *os.File, rootLabel, expect string) (*View, error) {
	if err := CheckID(expect); err != nil {
		return nil, err
	}
	tree, m, id, err := measurePinned(context.Background(), dir, WalkOptions{KeepBytes: true}, nil, rootLabel, expect, "the view gives")
	if err != nil {
		return nil, err
	}
	return newView(id, m, tree.Files), nil
}

// measurePinned walks the directory open at dir (its name labels errors)
// with every rule of Walk, the content rules included (the holdout-copy
// rule with holdout's digests), reads and hashes every file, and returns
// the tree, its manifest under rootLabel and that manifest's bpkg only if
// the bpkg is expect. The refusals are the walk's Problems and
// ErrNotPinned naming both ids ("<gives> ID, pinned EXPECT"). Emit
// measures its delivered copy with it and OpenViewAt the sealed view: the
// pin is only ever given to what was just read.
func measurePinned(ctx context.Context, dir *os.File, opts WalkOptions, holdout *holdoutSet, rootLabel, expect, gives string) (*Tree, *Manifest, string, error) {
	tree, err := walkFrom(ctx, dir, "", dir.Name(), opts, holdout)
	if err != nil {
		return nil, nil, "", err
	}
	m, err := NewManifest(tree, rootLabel) // refuses a tree with problems
	if err != nil {
		return nil, nil, "", err
	}
	id, err := m.ID()
	if err != nil {
		return nil, nil, "", err
	}
	if id != expect {
		return nil, nil, "", &RefusalError{Path: ".", Rule: ErrNotPinned, Detail: fmt.Sprintf("%s %s, pinned %s", gives, id, expect)}
	}
	return tree, m, id, nil
}

// newView indexes verified files by path.
func newView(id string, m *Manifest, files []File) *View {
	v := &View{ID: id, Manifest: m, Files: files, index: make(map[string]int, len(files))}
	for i, f := range files {
		v.index[f.Path] = i
	}
	return v
}
