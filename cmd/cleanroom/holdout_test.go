package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

func worldPath(t *testing.T, elem ...string) string {
	return filepath.Join(append([]string{testshared.RepoRoot(t), "testdata", "world"}, elem...)...)
}

func TestHoldoutFixtureCLI(t *testing.T) {
	t.Parallel()
	code, out, errs := runCLI(t, "holdout", "fixture", worldPath(t, "docs", "spec", "proof-wire", "experiment"))
	if code != 0 || !strings.Contains(out, "FIXTURE PASS") || !strings.Contains(out, "negatives refused 16 of 16") {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
}

func TestHoldoutScoreCLI(t *testing.T) {
	t.Parallel()
	pkg := worldPath(t, "docs", "spec", "proof-wire")
	fx := filepath.Join(pkg, "experiment", "fixtures")
	args := []string{"--json", "holdout", "score", "--package", pkg, "--challenges", filepath.Join(fx, "synthetic-challenges.json"),
		"--observations", filepath.Join(fx, "synthetic-observations.json")}
	code, out, _ := runCLI(t, args...)
	o, err := evidence.ReadObject([]byte(out))
	if err != nil {
		t.Fatalf("output: %v\n%s", err, out)
	}
	// S2 fails and S3 is unresolved by design: the verdict is FAIL (exit 1).
	total, _ := o.Get("total")
	pass, _ := o.Get("pass")
	unresolved, _ := o.Get("unresolved")
	if code != 1 || total != 19.0 || pass != 8.0 || unresolved != 3.0 {
		t.Errorf("exit %d total %v pass %v unresolved %v", code, total, pass, unresolved)
	}
	if strings.Join(o.Names(), ",") != "results,missing,total,pass,fail,unresolved,implementation,spec_release_id" {
		t.Errorf("members %v", o.Names())
	}

	// A refused document: the one failure document, {error, exit_code}
	// with the scorer's {refused: …}, exit 1, nothing scored.
	bad := filepath.Join(t.TempDir(), "bad.json")
	b, _ := os.ReadFile(filepath.Join(fx, "synthetic-observations.json"))
	b = []byte(strings.Replace(string(b), `"type"`, `"smuggled": 1, "type"`, 1))
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	args[len(args)-1] = bad
	code, out, _ = runCLI(t, args...)
	o, err = evidence.ReadObject([]byte(out))
	if err != nil {
		t.Fatalf("refusal output: %v\n%s", err, out)
	}
	r, _ := o.Get("refused")
	msg, _ := o.Get("error")
	ec, _ := o.Get("exit_code")
	if code != 1 || o.Len() != 3 || ec != float64(1) || msg != r || !strings.Contains(r.(string), "'smuggled' not allowed") {
		t.Errorf("exit %d output %s", code, out)
	}
	// --expect-implementation names another label: refused.
	args[len(args)-1] = filepath.Join(fx, "synthetic-observations.json")
	code, out, _ = runCLI(t, append(args, "--expect-implementation", "javascript")...)
	if code != 1 || !strings.Contains(out, `"refused"`) {
		t.Errorf("other implementation: exit %d %s", code, out)
	}
	// An observations file that is not there was never read: unusable
	// (exit 2), and the failure document does not call it a refusal.
	args[len(args)-1] = filepath.Join(t.TempDir(), "absent.json")
	code, out, _ = runCLI(t, args...)
	o, err = evidence.ReadObject([]byte(out))
	if err != nil {
		t.Fatalf("missing-file output: %v\n%s", err, out)
	}
	if _, has := o.Get("refused"); code != 2 || has {
		t.Errorf("missing observations: exit %d output %s, want exit 2 without a refused member", code, out)
	}
}

func TestHoldoutInteropCLI(t *testing.T) {
	t.Parallel()
	doc := worldPath(t, "docs", "spec", "proof-wire", "experiment", "fixtures", "synthetic-observations.json")
	code, out, _ := runCLI(t, "holdout", "interop", doc)
	if code != 1 || !strings.Contains(out, "NOT MEASURED") {
		t.Errorf("one document: exit %d %s", code, out)
	}
	code, out, _ = runCLI(t, "holdout", "interop", doc, doc)
	if code != 0 || !strings.Contains(out, "interop PASS") {
		t.Errorf("same document twice: exit %d %s", code, out)
	}
	other := filepath.Join(t.TempDir(), "other.json")
	b, _ := os.ReadFile(doc)
	b = []byte(strings.Replace(string(b), `"fixture-fine"`, `"fixture-changed"`, 1))
	if err := os.WriteFile(other, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = runCLI(t, "holdout", "interop", doc, other)
	if code != 1 || !strings.Contains(out, "UNCLASSIFIED_FINDING  S1.resolve.outcome") {
		t.Errorf("one change: exit %d %s", code, out)
	}
}

func TestHoldoutCheckAndCommitmentCLI(t *testing.T) {
	t.Parallel()
	code, out, errs := runCLI(t, "holdout", "check", "--package", worldPath(t, "docs", "spec", "proof-wire"), worldPath(t, "governance", "holdout"))
	if code != 0 || !strings.Contains(out, "7 challenges, 20 predicates") {
		t.Errorf("check: exit %d %s%s", code, out, errs)
	}
	w := testshared.World(t, "world")
	code, out, errs = runCLI(t, "holdout", "commitment", "--package", filepath.Join(w, "docs", "spec", "proof-wire"), filepath.Join(w, "governance", "holdout"))
	if code != 0 || out != "86d437fcbd9efee21c5cf27e25564d478592731ae8d2a9e2b9f472a592630071 10\n" {
		t.Errorf("commitment: exit %d %q %s", code, out, errs)
	}
	// check against the reference release: committed; a copy with one
	// byte changed (same layout, same release): refused.
	code, out, errs = runCLI(t, "holdout", "check", "--package", filepath.Join(w, "docs", "spec", "proof-wire"), filepath.Join(w, "governance", "holdout"))
	if code != 0 || !strings.Contains(out, "matches the release's holdout_commitment 86d437fc") {
		t.Errorf("check TRVM: exit %d %s%s", code, out, errs)
	}
	root := t.TempDir()
	pkg := filepath.Join(root, "docs", "spec", "proof-wire")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	rb, _ := os.ReadFile(filepath.Join(w, "docs", "spec", "proof-wire", "SPEC-RELEASE.json"))
	if err := os.WriteFile(filepath.Join(pkg, "SPEC-RELEASE.json"), rb, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(pkg, "experiment"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"holdout-recipe-v1.schema.json", "holdout-observation-v1.schema.json"} {
		b, _ := os.ReadFile(filepath.Join(w, "docs", "spec", "proof-wire", "experiment", f))
		if err := os.WriteFile(filepath.Join(pkg, "experiment", f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hd := filepath.Join(root, "governance", "holdout")
	if err := os.CopyFS(hd, os.DirFS(filepath.Join(w, "governance", "holdout"))); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCLI(t, "holdout", "check", "--package", pkg, hd)
	if code != 0 {
		t.Fatalf("unchanged copy: exit %d %s", code, errs)
	}
	p := filepath.Join(hd, "H8-policy-weakening.json")
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	b[10] ^= 0x20
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCLI(t, "holdout", "check", "--package", pkg, hd)
	if code != 1 || !strings.Contains(errs, "does not match the release's holdout_commitment") {
		t.Errorf("one byte changed: exit %d %s", code, errs)
	}
}

// A holdout command whose input file or directory is missing, or is not a
// regular file, exits 2 (unusable input, docs/exit-codes.md), naming it;
// a document that is read and breaks a rule stays a refusal (1).
func TestHoldoutUnreadableInputExitsTwo(t *testing.T) {
	t.Parallel()
	pkg := worldPath(t, "docs", "spec", "proof-wire")
	fx := filepath.Join(pkg, "experiment", "fixtures")
	challenges, observations := filepath.Join(fx, "synthetic-challenges.json"), filepath.Join(fx, "synthetic-observations.json")
	absent := filepath.Join(t.TempDir(), "absent")
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(broken, []byte(`{"a":1,"a":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"score: no such challenges", []string{"holdout", "score", "--package", pkg, "--challenges", absent, "--observations", observations}, 2, absent},
		{"score: no such observations", []string{"holdout", "score", "--package", pkg, "--challenges", challenges, "--observations", absent}, 2, absent},
		{"score: observations are a directory", []string{"holdout", "score", "--package", pkg, "--challenges", challenges, "--observations", dir}, 2, "not a regular file"},
		{"score: observations break the reader", []string{"holdout", "score", "--package", pkg, "--challenges", challenges, "--observations", broken}, 1, string(evidence.ClassDuplicateName)},
		{"interop: no such document", []string{"holdout", "interop", observations, absent}, 2, absent},
		{"interop: a document breaks the reader", []string{"holdout", "interop", observations, broken}, 1, string(evidence.ClassDuplicateName)},
		{"check: no such directory", []string{"holdout", "check", "--package", pkg, absent}, 2, absent},
	} {
		for _, json := range []bool{false, true} {
			args := c.args
			if json {
				args = append([]string{"--json"}, args...)
			}
			t.Run(fmt.Sprintf("%s json=%v", c.name, json), func(t *testing.T) {
				code, out, errs := runCLI(t, args...)
				if code != c.code || !strings.Contains(out+errs, c.want) {
					t.Errorf("exit %d (want %d), output:\n%s%s\nwant it to contain %q", code, c.code, out, errs, c.want)
				}
			})
		}
	}
}
