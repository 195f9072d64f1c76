package pkgwalk_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// Every digest of a walk equals crypto/sha256 of the file's bytes, for
// sizes around the block, padding and read-buffer boundaries, files hashed
// two at a time or alone, with any number of workers.
func TestWalkDigestsAgainstCryptoSHA256(t *testing.T) {
	// Not parallel: it sets the package's test hooks.
	root := filepath.Join(t.TempDir(), "pkg")
	rng := rand.New(rand.NewPCG(5, 6))
	sizes := []int{0, 1, 55, 56, 63, 64, 65, 127, 128, 129, 4096, 131071, 131072, 131073, 262207, 262208, 300001}
	for range 40 {
		sizes = append(sizes, rng.IntN(400_000))
	}
	want := map[string]string{}
	for i, n := range sizes {
		b := make([]byte, n)
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		name := fmt.Sprintf("d%d/f%03d.bin", i%3, i)
		if i%10 == 0 {
			// JSON is read whole for the challenge-shape rule, by the
			// other reader.
			name = fmt.Sprintf("d%d/f%03d.json", i%3, i)
			b = []byte(fmt.Sprintf("{\"n\": %d}\n", i))
		}
		writeFile(t, filepath.Join(root, name), string(b))
		s := sha256.Sum256(b)
		want[name] = hex.EncodeToString(s[:])
	}
	for _, c := range []struct {
		name  string
		opts  pkgwalk.WalkOptions
		pairs bool // the two-files-at-a-time reader (where the CPU has SHA-NI)
	}{
		{"one worker", pkgwalk.WalkOptions{Workers: 1}, true},
		{"two workers", pkgwalk.WalkOptions{Workers: 2}, true},
		{"five workers", pkgwalk.WalkOptions{Workers: 5}, true},
		{"bytes kept", pkgwalk.WalkOptions{KeepBytes: true}, true},
		{"one-file reader", pkgwalk.WalkOptions{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pkgwalk.UsePairReader(t, c.pairs)
			tree, err := pkgwalk.Walk(root, c.opts)
			if err != nil || tree.Err() != nil {
				t.Fatalf("walk: %v %v", err, tree.Err())
			}
			if len(tree.Files) != len(want) {
				t.Fatalf("%d files, want %d", len(tree.Files), len(want))
			}
			for _, f := range tree.Files {
				if f.SHA256 != want[f.Path] {
					t.Errorf("%s (%d bytes): %s, crypto/sha256 %s", f.Path, f.Size, f.SHA256, want[f.Path])
				}
			}
		})
	}
}

// A file that grows or shrinks after fstat and before it is read is
// refused (errChanged), whichever reader reads it.
func TestWalkSizeChangedWhileRead(t *testing.T) {
	// Not parallel: it sets the package's test hooks.
	cases := []struct {
		name   string
		keep   bool
		pairs  bool
		change func(t *testing.T, path string)
	}{
		{"grows", false, true, func(t *testing.T, p string) { appendTo(t, p, "grown\n") }},
		{"shrinks", false, true, func(t *testing.T, p string) { must(t, os.Truncate(p, 10)) }},
		{"emptied", false, true, func(t *testing.T, p string) { must(t, os.Truncate(p, 0)) }},
		{"grows, one-file reader", false, false, func(t *testing.T, p string) { appendTo(t, p, "grown\n") }},
		{"shrinks, one-file reader", false, false, func(t *testing.T, p string) { must(t, os.Truncate(p, 10)) }},
		{"grows, bytes kept", true, true, func(t *testing.T, p string) { appendTo(t, p, "grown\n") }},
		{"shrinks, bytes kept", true, true, func(t *testing.T, p string) { must(t, os.Truncate(p, 10)) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pkgwalk.UsePairReader(t, c.pairs)
			root := copySynthetic(t)
			pkgwalk.SetTestHook(t, func(stage string) {
				if stage == "read SPEC.md" {
					c.change(t, filepath.Join(root, "SPEC.md"))
				}
			})
			tree, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{KeepBytes: c.keep})
			if err != nil {
				t.Fatal(err)
			}
			if !hasProblem(tree.Problems, "SPEC.md", pkgwalk.ErrChanged) {
				t.Errorf("no %q at SPEC.md in %v", pkgwalk.ErrChanged, tree.Problems)
			}
			for _, f := range tree.Files {
				if f.Path == "SPEC.md" {
					t.Errorf("SPEC.md was measured (%s) although it changed", f.SHA256)
				}
			}
		})
	}
}
