package pkgwalk_test

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"golang.org/x/sys/unix"
)

// A racing attacker swaps a regular file with a symlink to a file outside
// and with a FIFO (renameat2 RENAME_EXCHANGE, atomically) while the
// package is walked. Every walk must either refuse the link or the FIFO by
// name or see the original bytes: the outside bytes are never measured,
// and the walk never blocks on the FIFO.
func TestWalkRaceRenameExchange(t *testing.T) {
	t.Parallel()
	root := copySynthetic(t)
	secret := filepath.Join(t.TempDir(), "secret.md")
	writeFile(t, secret, "OUTSIDE BYTES\n")
	must(t, os.Symlink(secret, filepath.Join(root, "alias.md")))
	must(t, unix.Mkfifo(filepath.Join(root, "pipe.md"), 0o644))
	allowed := map[string]bool{}
	for _, f := range mustWalkFiles(t, copySynthetic(t)) {
		allowed[f.SHA256] = true
	}
	secretSHA := sha([]byte("OUTSIDE BYTES\n"))

	var stop atomic.Bool
	var wg sync.WaitGroup
	var swaps atomic.Int64
	for _, other := range []string{"alias.md", "pipe.md"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(root, "SPEC.md"), unix.AT_FDCWD, filepath.Join(root, other), unix.RENAME_EXCHANGE); err == nil {
					swaps.Add(1)
				}
			}
		}()
	}
	walks := 300
	if testing.Short() {
		walks = 30
	}
	// A walk of a tree being modified is not a snapshot (that is what the
	// read-only tmpfs is for); what must hold for every walk is that only
	// the package's own bytes are measured.
	refusedLink := 0
	for i := 0; i < walks; i++ {
		// Every other walk keeps the bytes: both readers (the one that
		// keeps, and the pair reader that hashes two files at a time) are
		// raced.
		keep := i%2 == 0
		tree, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{KeepBytes: keep})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range tree.Files {
			if f.SHA256 == secretSHA || !allowed[f.SHA256] {
				t.Fatalf("walk %d: %s measured bytes that are not the package's (%s)", i, f.Path, f.SHA256)
			}
			if keep && sha(f.Data) != f.SHA256 {
				t.Fatalf("walk %d: %s kept bytes that differ from the digest", i, f.Path)
			}
		}
		if tree.Problems.Has(pkgwalk.ErrSymlink) {
			refusedLink++
		}
	}
	stop.Store(true)
	wg.Wait()
	if swaps.Load() == 0 {
		t.Skip("RENAME_EXCHANGE not supported here: no race was run")
	}
	if refusedLink == 0 {
		t.Errorf("no walk of %d refused the symlink", walks)
	}
}

func mustWalkFiles(t *testing.T, root string) []pkgwalk.File {
	t.Helper()
	tree, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{})
	if err != nil || tree.Err() != nil {
		t.Fatalf("walk: %v %v", err, tree.Err())
	}
	return tree.Files
}
