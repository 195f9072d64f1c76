package holdout

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

func worldHoldout(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "holdout")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(testshared.RepoRoot(t), "testdata", "world", "governance", "holdout"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadDirWorld(t *testing.T) {
	t.Parallel()
	h, err := LoadDir(worldHoldout(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Challenges) != 7 || h.Challenges[0].ID != "H1" || h.Challenges[6].ID != "H7" {
		t.Errorf("%d challenges", len(h.Challenges))
	}
}

func TestLoadDirRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		edit  func(t *testing.T, dir string)
		rule  error
		class evidence.Class
	}{
		{"extra file", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "H99-extra.json"), []byte(`{}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, errIndexMismatch, ""},
		{"subdirectory", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, errIndexMismatch, ""},
		{"symlinked challenge", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "H3-shared-child-structure.json")
			if err := os.Rename(p, filepath.Join(t.TempDir(), "moved.json")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/etc/hostname", p); err != nil {
				t.Fatal(err)
			}
		}, errIndexMismatch, ""},
		{"challenge replaced by a FIFO", func(t *testing.T, dir string) {
			// Opening a FIFO blocks until a writer appears: the load must
			// refuse it instead of hanging.
			p := filepath.Join(dir, "H3-shared-child-structure.json")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, errIndexMismatch, ""},
		{"missing challenge", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "H2-reference-set-permutation.json")) }, errIndexMismatch, ""},
		{"id disagrees with index", func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, "H1-annotation-only-change.json"), `"id":"H1"`, `"id":"H11"`)
		}, errIndexMismatch, ""},
		{"predicate count disagrees with index", func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, "INDEX.json"), `"predicates":3`, `"predicates":4`)
		}, errIndexMismatch, ""},
		{"duplicate member in a challenge", func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, "H1-annotation-only-change.json"), `"id":"H1"`, `"id":"H1","id":"H1"`)
		}, errChallengeRead, evidence.ClassDuplicateName},
		{"index of another type", func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, "INDEX.json"), `TRVM-PROOF-WIRE-HOLDOUT-v2`, `SOMETHING-ELSE`)
		}, errIndex, ""},
		{"index entry with a path", func(t *testing.T, dir string) {
			editFile(t, filepath.Join(dir, "INDEX.json"), `"file":"H1-annotation-only-change.json"`, `"file":"../H1-annotation-only-change.json"`)
		}, errIndexMismatch, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := worldHoldout(t)
			c.edit(t, dir)
			_, err := LoadDir(dir)
			if !errors.Is(err, c.rule) {
				t.Fatalf("%v, want %v", err, c.rule)
			}
			if c.class != "" && !errors.Is(err, c.class) {
				t.Errorf("%v, want class %s", err, c.class)
			}
		})
	}
}

func editFile(t *testing.T, p, old, new string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", p, old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// An unknown recipe operator in a committed challenge refuses the whole set.
func TestValidateUnknownOperator(t *testing.T) {
	t.Parallel()
	dir := worldHoldout(t)
	editFile(t, filepath.Join(dir, "H6-unknown-claim-member.json"), `"op":"RESEAL"`, `"op":"RESEAL_ALL"`)
	h, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSchemas(worldExperiment(t))
	if err != nil {
		t.Fatal(err)
	}
	probs := ValidateChallenges(s, h.Challenges)
	if len(probs) != 1 || probs[0].Rule != errChallengeSchema || !strings.Contains(probs[0].Text, "H6") {
		t.Errorf("problems %v", probs)
	}
}

func TestParseChallengesRefusals(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`{}`, `[1]`, `[{"id":"S1","id":"S2"}]`, ``} {
		if _, err := ParseChallenges([]byte(in), "x"); !errors.Is(err, errChallengeRead) {
			t.Errorf("%q: %v, want errChallengeRead", in, err)
		}
	}
}
