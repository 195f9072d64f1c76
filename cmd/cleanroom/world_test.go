package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorldInitCLI: world init writes a world (text and --json), refuses an
// occupied target and an unsupported root label with exit 2 naming the
// rule, and what it wrote is issued with the holdout committed and pinned
// with run pin's defaults.
func TestWorldInitCLI(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "w")
	code, out, errs := runCLI(t, "world", "init", dir)
	if code != 0 || !strings.Contains(out, "governance/holdout/E1-append-one-byte.json") {
		t.Fatalf("world init: %d %s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "world", "init", dir, "--json")
	var refusal struct {
		Error    string `json:"error"`
		ExitCode int    `json:"exit_code"`
	}
	if code != 2 || json.Unmarshal([]byte(out), &refusal) != nil || refusal.ExitCode != 2 ||
		!strings.Contains(refusal.Error, "not an empty directory") || !strings.Contains(errs, "README.md") {
		t.Errorf("world init over a world: %d %q %q, want 2 naming the rule and what is there", code, out, errs)
	}
	other := filepath.Join(t.TempDir(), "o")
	if code, _, errs := runCLI(t, "world", "init", other, "--root-label", "governance/spec"); code != 2 || !strings.Contains(errs, "unsupported root label") {
		t.Errorf("--root-label governance/spec: %d %q, want 2 naming the rule", code, errs)
	}
	if _, err := os.Lstat(other); !os.IsNotExist(err) {
		t.Errorf("a refused init wrote %s: %v", other, err)
	}

	fresh := filepath.Join(t.TempDir(), "fresh")
	code, out, errs = runCLI(t, "world", "init", fresh, "--json")
	var res struct {
		Dir, Package string
		Files        []string
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Dir != fresh || res.Package != "docs/spec/proof-wire" || len(res.Files) != 20 {
		t.Fatalf("world init --json: %d %s%s", code, out, errs)
	}
	pkg, hold := filepath.Join(fresh, res.Package), filepath.Join(fresh, "governance/holdout")
	for _, step := range [][]string{
		{"holdout", "fixture", filepath.Join(pkg, "experiment")},
		{"holdout", "check", "--package", pkg, hold},
		{"release", "issue", pkg, "--spec-revision", "1", "--experiment-revision", "1", "--corpus-revision", "1", "--holdout", hold},
		{"release", "verify", pkg, "--holdout", hold},
		// With its default: the reference adapter world.json declares.
		{"run", "pin", "--world", fresh},
	} {
		if code, out, errs := runCLI(t, step...); code != 0 {
			t.Fatalf("%v: %d %s%s", step, code, out, errs)
		}
	}
	// --root-label: the package elsewhere, found by every command through
	// the world root's cleanroom-package.
	labelled := filepath.Join(t.TempDir(), "labelled")
	if code, out, errs := runCLI(t, "world", "init", labelled, "--root-label", "spec/checksum"); code != 0 {
		t.Fatalf("world init --root-label spec/checksum: %d %s%s", code, out, errs)
	}
	pkg, hold = filepath.Join(labelled, "spec", "checksum"), filepath.Join(labelled, "governance/holdout")
	// release issue sees the world's holdout beside spec/checksum.
	if code, _, errs := runCLI(t, "release", "issue", pkg, "--spec-revision", "1", "--experiment-revision", "1", "--corpus-revision", "1"); code == 0 || !strings.Contains(errs, "holdout exists") {
		t.Errorf("release issue without --holdout in a labelled world: %d %q, want the uncommitted-holdout refusal", code, errs)
	}
	for _, step := range [][]string{
		{"holdout", "fixture", filepath.Join(pkg, "experiment")},
		{"holdout", "check", "--package", pkg, hold},
		{"release", "issue", pkg, "--spec-revision", "1", "--experiment-revision", "1", "--corpus-revision", "1", "--holdout", hold},
		{"run", "pin", "--world", labelled},
		{"run", "status", "--world", labelled},
	} {
		if code, out, errs := runCLI(t, step...); code != 0 {
			t.Fatalf("%v: %d %s%s", step, code, out, errs)
		}
	}
}
