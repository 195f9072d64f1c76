package holdout

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"golang.org/x/sys/unix"
)

// LoadCommitted checks the commitment over one reading of the directory
// and scores another: a challenge file swapped between the two (same id,
// name and counts, another predicate) would be scored as committed. A
// goroutine exchanges a committed challenge with a forged one, atomically
// and as fast as it can, while the set is loaded over and over: every load
// that succeeds must hold the committed bytes.
func TestLoadCommittedScoresTheCommittedBytes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("race test: skipped with -short")
	}
	world := filepath.Join(testshared.RepoRoot(t), "testdata", "world")
	root := t.TempDir()
	pkg := filepath.Join(root, "docs", "spec", "proof-wire")
	dir := filepath.Join(root, "governance", "holdout")
	if err := os.CopyFS(pkg, os.DirFS(filepath.Join(world, "docs", "spec", "proof-wire"))); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(world, "governance", "holdout"))); err != nil {
		t.Fatal(err)
	}
	s, err := LoadPackageSchemas(pkg)
	if err != nil {
		t.Fatal(err)
	}
	rel := committedAsIs(t, pkg, dir)

	const name = "H5-policy-weakening.json"
	honest, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	forged := bytes.Replace(honest, []byte(`"value":["tally-policy-weakened"]`), []byte(`"value":["tally-forged-codes"]`), 1)
	if bytes.Equal(forged, honest) {
		t.Fatal("the forgery changed nothing")
	}
	// The forged file lives in a sibling directory on the same file system,
	// so one renameat2(RENAME_EXCHANGE) swaps the two names atomically.
	spare := filepath.Join(root, "spare")
	if err := os.Mkdir(spare, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spare, name), forged, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, name), unix.AT_FDCWD, filepath.Join(spare, name), unix.RENAME_EXCHANGE); err != nil {
		t.Skipf("renameat2(RENAME_EXCHANGE) unavailable: %v", err)
	}
	_ = unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, name), unix.AT_FDCWD, filepath.Join(spare, name), unix.RENAME_EXCHANGE)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = unix.Renameat2(unix.AT_FDCWD, filepath.Join(dir, name), unix.AT_FDCWD, filepath.Join(spare, name), unix.RENAME_EXCHANGE)
		}
	}()
	want, err := evidence.CanonicalString(mustRead(t, honest))
	if err != nil {
		t.Fatal(err)
	}
	loaded, scoredForged := 0, 0
	for i := 0; i < 300 && scoredForged == 0; i++ {
		h, err := LoadCommitted(pkg, dir, rel, s)
		if err != nil {
			continue // refused: the swap was seen
		}
		loaded++
		for _, ch := range h.Challenges {
			if ch.ID != "H5" {
				continue
			}
			if got, _ := evidence.CanonicalString(ch.Value); got != want {
				scoredForged++
			}
		}
	}
	close(stop)
	wg.Wait()
	if scoredForged > 0 {
		t.Fatalf("a load that authenticated against %s handed the scorer a challenge that is not the committed one (%d of %d loads)", rel.Commitment, scoredForged, loaded)
	}
	t.Logf("%d loads authenticated, none with forged bytes", loaded)
}

func mustRead(t *testing.T, b []byte) any {
	t.Helper()
	v, err := evidence.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
