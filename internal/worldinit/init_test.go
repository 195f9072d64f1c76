package worldinit

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// wantFiles is the world init writes, written out by hand: a file added to
// or lost from the templates must be noticed here.
var wantFiles = []string{
	"README.md",
	"docs/spec/proof-wire/SPEC.md",
	"docs/spec/proof-wire/experiment/CLEAN-ROOM-PROMPT-v1.md",
	"docs/spec/proof-wire/experiment/CONTRACT.md",
	"docs/spec/proof-wire/experiment/README.md",
	"docs/spec/proof-wire/experiment/fixtures/synthetic-challenges.json",
	"docs/spec/proof-wire/experiment/fixtures/synthetic-expected.json",
	"docs/spec/proof-wire/experiment/fixtures/synthetic-negatives.json",
	"docs/spec/proof-wire/experiment/fixtures/synthetic-observations.json",
	"docs/spec/proof-wire/experiment/holdout-observation-v1.schema.json",
	"docs/spec/proof-wire/experiment/holdout-recipe-v1.schema.json",
	"docs/spec/proof-wire/experiment/world.json",
	"docs/spec/proof-wire/schema/nested-composition-v2.json",
	"docs/spec/proof-wire/vectors/public/README.md",
	"docs/spec/proof-wire/vectors/public/messages/hello.txt",
	"governance/holdout/E1-append-one-byte.json",
	"governance/holdout/INDEX.json",
	"governance/reference-adapter.json",
	"governance/reference_adapter.py",
	"governance/reference_protocol.py",
}

// TestInit: into an absent directory (parents included) and into an empty
// one, init writes exactly wantFiles and nothing beside the target.
func TestInit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		setup func(dir string) error
	}{
		{"absent", func(string) error { return nil }},
		{"absent with absent parents", nil},
		{"empty", func(dir string) error { return os.Mkdir(dir, 0o700) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "world")
			if c.setup == nil {
				dir = filepath.Join(parent, "a", "b", "world")
			} else if err := c.setup(dir); err != nil {
				t.Fatal(err)
			}
			res, err := Init(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Dir != dir || res.Package != "docs/spec/proof-wire" || !slices.Equal(res.Files, wantFiles) {
				t.Errorf("result %s %s %q", res.Dir, res.Package, res.Files)
			}
			if got := filesUnder(t, dir); !slices.Equal(got, wantFiles) {
				t.Errorf("on disk:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantFiles, "\n"))
			}
			// No staging directory is left beside the world.
			ents, _ := os.ReadDir(filepath.Dir(dir))
			if len(ents) != 1 || ents[0].Name() != "world" {
				t.Errorf("beside the world: %v", ents)
			}
		})
	}
}

// TestInitRefuses: a target that is not an absent or empty directory, or a
// root label the run commands cannot read, is refused by its rule, and
// nothing is written anywhere.
func TestInitRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		setup func(dir string) error
		label string
		want  error
	}{
		{"not empty", func(dir string) error {
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644)
		}, "", errNotEmpty},
		{"a file", func(dir string) error { return os.WriteFile(dir, []byte("mine"), 0o644) }, "", errNotEmpty},
		{"a symlink to an empty directory", func(dir string) error {
			if err := os.Mkdir(dir+".real", 0o755); err != nil {
				return err
			}
			return os.Symlink(dir+".real", dir)
		}, "", errNotEmpty},
		{"the state root as root label", func(string) error { return nil }, "governance", errRootLabel},
		{"a root label beneath the state root", func(string) error { return nil }, "governance/spec", errRootLabel},
		{"an escaping root label", func(string) error { return nil }, "../outside", errRootLabel},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "world")
			if err := c.setup(dir); err != nil {
				t.Fatal(err)
			}
			// Directories too: an empty staging directory left behind
			// is a change.
			before := filesUnder(t, parent, true)
			_, err := Init(dir, Options{RootLabel: c.label})
			if !errors.Is(err, c.want) {
				t.Fatalf("Init: %v, want %v", err, c.want)
			}
			if after := filesUnder(t, parent, true); !slices.Equal(after, before) {
				t.Errorf("a refused init changed the tree: before %q, after %q", before, after)
			}
		})
	}
}

// TestInitWorldWorks: the world as written passes what the run commands
// check before a pin — the scorer's self-test, the holdout against the
// recipe schema, a package walk with the holdout's leak rules, and a
// release issued with the holdout committed — and every file says what the
// operator changes (a comment, or a README that names it).
func TestInitWorldWorks(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "world")
	if _, err := Init(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	w, err := experiment.OpenWorld(dir)
	if err != nil {
		t.Fatal(err)
	}
	pkg := w.PackageDir()
	fix, err := holdout.SelfTest(filepath.Join(pkg, "experiment"))
	if err != nil || !fix.OK() {
		t.Fatalf("self-test: %v %v", err, fix)
	}
	if fix.Report.Pass != 8 || fix.Report.Fail != 8 || fix.Report.Unresolved != 3 || len(fix.Negatives) != 16 {
		t.Errorf("self-test scored %d/%d/%d with %d negatives, want 8/8/3 and 16", fix.Report.Pass, fix.Report.Fail, fix.Report.Unresolved, len(fix.Negatives))
	}
	h, err := holdout.LoadDir(w.HoldoutDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := holdout.LoadPackageSchemas(pkg)
	if err != nil {
		t.Fatal(err)
	}
	if ps := holdout.ValidateChallenges(s, h.Challenges); len(ps) != 0 || len(h.Challenges) != 1 || h.Challenges[0].ID != "E1" {
		t.Errorf("holdout: %d challenges, problems %v", len(h.Challenges), ps)
	}
	tree, err := pkgwalk.Walk(pkg, pkgwalk.WalkOptions{HoldoutDir: w.HoldoutDir()})
	if err != nil || tree.Err() != nil {
		t.Fatalf("package walk: %v %v", err, tree.Err())
	}
	iss, err := experiment.IssueRelease(pkg, experiment.IssueOptions{SpecRevision: 1, ExperimentRevision: 1, PublicCorpusRevision: 1, HoldoutDir: w.HoldoutDir()})
	if err != nil {
		t.Fatal(err)
	}
	if iss.Release.HoldoutEntries != 1 || iss.Release.HoldoutCommitment == experiment.HoldoutAbsent {
		t.Errorf("release commits %q with %d entries", iss.Release.HoldoutCommitment, iss.Release.HoldoutEntries)
	}

	var readmes strings.Builder
	for _, f := range wantFiles {
		if filepath.Base(f) == "README.md" {
			b, _ := os.ReadFile(filepath.Join(dir, f))
			readmes.Write(b)
		}
	}
	for _, f := range wantFiles {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), packagePlaceholder) {
			t.Errorf("%s still holds %s", f, packagePlaceholder)
		}
		if !strings.Contains(string(b), "OPERATOR") && !strings.Contains(readmes.String(), filepath.Base(f)) && !strings.Contains(readmes.String(), filepath.Base(filepath.Dir(f))+"/") {
			t.Errorf("%s says nowhere what the operator changes", f)
		}
	}
}

// filesUnder lists the relative paths of the files (and links) under dir,
// sorted; with dirs, directories too, ending in "/".
func filesUnder(t *testing.T, dir string, dirs ...bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if len(dirs) > 0 && dirs[0] {
				out = append(out, filepath.ToSlash(rel)+"/")
			}
			return nil
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
