package holdout

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

const trvmCommitment = "86d437fcbd9efee21c5cf27e25564d478592731ae8d2a9e2b9f472a592630071"

// The real TRVM holdout: ten challenges, 25 predicates, every one valid
// against the package's recipe schema, and the committed digest.
func TestConformanceRealHoldout(t *testing.T) {
	t.Parallel()
	w := testshared.World(t, "world")
	pkg := filepath.Join(w, "docs", "spec", "proof-wire")
	dir := filepath.Join(w, "governance", "holdout")
	s, err := LoadPackageSchemas(pkg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := LoadCommitted(pkg, dir, &Committed{Commitment: trvmCommitment, Entries: 10}, s)
	if err != nil {
		t.Fatal(err)
	}
	preds := 0
	for _, c := range h.Challenges {
		preds += len(c.Predicates())
	}
	if len(h.Challenges) != 10 || preds != 25 {
		t.Errorf("%d challenges, %d predicates; want 10 and 25", len(h.Challenges), preds)
	}
	// The digest of the bytes read is the reference's commitment.
	if c, err := DigestOf(pkg, dir, h.read); err != nil || c != trvmCommitment {
		t.Errorf("DigestOf the files read: %s (%v), want %s", c, err, trvmCommitment)
	}
}

// A copy of the real holdout with one byte changed is refused at reveal;
// the unchanged copy (same relative layout) still authenticates.
func TestConformanceHoldoutOneByteChanged(t *testing.T) {
	t.Parallel()
	w := testshared.World(t, "world")
	s, err := LoadPackageSchemas(filepath.Join(w, "docs", "spec", "proof-wire"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	pkg := filepath.Join(root, "docs", "spec", "proof-wire")
	dir := filepath.Join(root, "governance", "holdout")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(w, "governance", "holdout"))); err != nil {
		t.Fatal(err)
	}
	rel := &Committed{Commitment: trvmCommitment, Entries: 10}
	if _, err := LoadCommitted(pkg, dir, rel, s); err != nil {
		t.Fatalf("unchanged copy: %v", err)
	}
	p := filepath.Join(dir, "H4-two-leaf-composition-stands-alone.json")
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-2] ^= 0x01 // one byte, still valid JSON or not: the digest decides first
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadCommitted(pkg, dir, rel, s)
	if !errors.Is(err, errCommitment) {
		t.Fatalf("changed copy: %v, want errCommitment", err)
	}
}
