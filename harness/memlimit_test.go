package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// TestServeMemoryLimitCoversTheView: the serve process's budget is never
// below the memory its verified view already takes. With GOGC=off a limit
// under the live heap makes the collector run on every few allocations for
// the whole session. The view costs more than its bytes: each file's
// allocation is rounded up to a size class (a 4096-byte file is held in
// 4864 bytes) and carries its path, digest and index entry, so 10,000
// files of 4 KiB (39 MiB) take about 49 MiB, more than package + 8 MiB.
func TestServeMemoryLimitCoversTheView(t *testing.T) {
	dir := testshared.ManyFilesDir(t)
	const files, size = 10000, 4096
	b := make([]byte, size)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	for i := 0; i < files; i++ {
		p := filepath.Join(dir, fmt.Sprintf("d%03d", i%100), fmt.Sprintf("f%05d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b[0] = byte('A' + i%26)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Not writePackage: its in-memory map of 40 MiB of files would become
	// freed heap that runtimeInUse still counts, hiding the view's own cost
	// (the test then passes with the old, too-low limit).
	tree, err := pkgwalk.Walk(dir, pkgwalk.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := pkgwalk.NewManifest(tree, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := m.ID()
	if err != nil {
		t.Fatal(err)
	}
	tree, m = nil, nil
	runtime.GC()
	before := runtimeInUse()
	v, err := pkgwalk.OpenView(dir, "", id)
	if err != nil {
		t.Fatal(err)
	}
	limit := serveMemoryLimit(v, runtimeInUse())
	runtime.GC()
	// What the view holds once its garbage is gone, on top of a serve
	// process's own runtime (about 4 MiB), and 1 MiB for the calls.
	held := runtimeInUse() - before
	if need := held + 4<<20 + 1<<20; limit < need {
		t.Errorf("serve memory limit %d MiB for a view that holds %d MiB: below the %d MiB it needs to serve without collecting all the time",
			limit>>20, held>>20, need>>20)
	}
	runtime.KeepAlive(v)
}
