package holdout

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// The instrument loads in order and stops at the first step that fails: a
// self-test that disagrees with the fixture stops it before any challenge
// is read; without a release the directory is loaded as it stands and the
// scorer still refuses a challenge that breaks the recipe schema.
func TestLoadInstrument(t *testing.T) {
	t.Parallel()
	copyPkg := func(t *testing.T) (pkg, holdoutDir string) {
		world := filepath.Join(testshared.RepoRoot(t), "testdata", "world")
		root := t.TempDir()
		pkg = filepath.Join(root, "pkg")
		holdoutDir = filepath.Join(root, "holdout")
		if err := os.CopyFS(pkg, os.DirFS(filepath.Join(world, "docs", "spec", "proof-wire"))); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(holdoutDir, os.DirFS(filepath.Join(world, "governance", "holdout"))); err != nil {
			t.Fatal(err)
		}
		return pkg, holdoutDir
	}
	cases := []struct {
		name string
		edit func(t *testing.T, pkg, holdoutDir string)
		rule error
	}{
		{"self-test disagrees", func(t *testing.T, pkg, _ string) {
			editFile(t, filepath.Join(pkg, "experiment", "fixtures", FixtureExpected), `"fail": 8`, `"fail": 7`)
		}, ErrSelfTest},
		{"challenge breaks the recipe schema", func(t *testing.T, _, holdoutDir string) {
			editFile(t, filepath.Join(holdoutDir, "H6-unknown-claim-member.json"), `"op":"RESEAL"`, `"op":"RESEAL_ALL"`)
		}, errChallengeSchema},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pkg, holdoutDir := copyPkg(t)
			c.edit(t, pkg, holdoutDir)
			in, err := LoadInstrument(pkg, holdoutDir, nil)
			if !errors.Is(err, c.rule) {
				t.Fatalf("%v, want %v", err, c.rule)
			}
			if in.Scorer != nil {
				t.Error("a scorer was built from a refused instrument")
			}
			if c.rule == ErrSelfTest && (in.SelfTest == nil || in.Holdout != nil || !strings.Contains(strings.Join(in.SelfTest.Problems, " "), "S2")) {
				t.Errorf("self-test %+v, holdout %v: want the S2 problem and no challenge read", in.SelfTest, in.Holdout)
			}
		})
	}
	pkg, holdoutDir := copyPkg(t)
	in, err := LoadInstrument(pkg, holdoutDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Holdout.Challenges) != 7 || in.Scorer == nil || !in.SelfTest.OK() {
		t.Errorf("%d challenges, scorer %v, self-test ok %v", len(in.Holdout.Challenges), in.Scorer, in.SelfTest.OK())
	}
}
