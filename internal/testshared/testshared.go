package testshared

import (
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot returns the module root (the directory holding go.mod), found by
// walking up from the test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := findRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Dir returns the shared/ folder beside the repository (…/shared next to the
// checkout), or skips the test when it is absent. Never write into it: copy
// what a test must modify.
func Dir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(filepath.Dir(RepoRoot(t)), "shared")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Skipf("conformance data absent: %s not found (it sits beside the checkout in CI; a fresh clone has none)", dir)
	}
	return dir
}

// Path returns a path inside the shared folder, skipping the test when the
// folder or that path is absent.
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{Dir(t)}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("conformance data absent: %s: %v", p, err)
	}
	return p
}

// World returns the TRVM world at shared/trvm/<name> ("world" or "world-rev2").
func World(t testing.TB, name string) string {
	t.Helper()
	return Path(t, "trvm", name)
}
