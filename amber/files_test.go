package amber

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// readCapped reads a regular file up to its cap exactly, and refuses a
// longer one (errTooLarge, which is also evidence's ErrFileTooLarge: one
// bounded reader), a final symbolic link and a FIFO (errNotRegular, the
// FIFO without waiting for a writer).
func TestReadCapped(t *testing.T) {
	dir := t.TempDir()
	const limit = 16
	exact := filepath.Join(dir, "exact")
	long := filepath.Join(dir, "long")
	link := filepath.Join(dir, "link")
	fifo := filepath.Join(dir, "fifo")
	if err := os.WriteFile(exact, bytes.Repeat([]byte("a"), limit), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(long, bytes.Repeat([]byte("a"), limit+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exact, link); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(fifo); err != nil {
		t.Fatal(err)
	}
	if b, err := readCapped(exact, limit); err != nil || len(b) != limit {
		t.Errorf("a file of exactly the cap: %d bytes, %v", len(b), err)
	}
	for _, tc := range []struct {
		path string
		want []error
	}{
		{long, []error{errTooLarge, evidence.ErrFileTooLarge}},
		{link, []error{errNotRegular}},
		{fifo, []error{errNotRegular}},
	} {
		_, err := readCapped(tc.path, limit)
		for _, w := range tc.want {
			if !errors.Is(err, w) {
				t.Errorf("%s: %v, want %q", filepath.Base(tc.path), err, w)
			}
		}
	}
}
