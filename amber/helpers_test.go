package amber

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/sign"
)

func needGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed: cases are built and checked with the real git")
	}
}

// gitT runs git in dir with a fixed identity and dates, failing the test on
// error.
func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(true),
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_AUTHOR_DATE=2026-01-01T00:00:00Z",
		"GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testRepo is a small source repository: three commits up to the cutoff, a
// tag and a note on the cutoff, and one commit after it on main.
type testRepo struct {
	Dir    string
	Cutoff string
	After  string
}

// repoTemplates holds, per number of commits, one repository made by
// makeTestRepo's git commands; newTestRepo hands each test a copy. The
// identity and dates are fixed, so a copy has the objects, refs, tag and
// note a fresh build would have: one cp instead of a dozen git starts per
// test (git's start-up was most of this package's CPU).
var repoTemplates struct {
	sync.Mutex
	dir   string // removed by TestMain
	repos map[int]testRepo
}

func TestMain(m *testing.M) {
	code := m.Run()
	if repoTemplates.dir != "" {
		os.RemoveAll(repoTemplates.dir)
	}
	os.Exit(code)
}

// newTestRepo returns a repository of its own for the test (a copy of the
// template with that many commits).
func newTestRepo(t testing.TB, commits int) testRepo {
	t.Helper()
	needGit(t)
	tpl := templateRepo(t, commits)
	return testRepo{Dir: copyDir(t, tpl.Dir), Cutoff: tpl.Cutoff, After: tpl.After}
}

func templateRepo(t testing.TB, commits int) testRepo {
	t.Helper()
	repoTemplates.Lock()
	defer repoTemplates.Unlock()
	if r, ok := repoTemplates.repos[commits]; ok {
		return r
	}
	if repoTemplates.dir == "" {
		dir, err := os.MkdirTemp("", "amber-test-repos-")
		if err != nil {
			t.Fatal(err)
		}
		repoTemplates.dir, repoTemplates.repos = dir, map[int]testRepo{}
	}
	// Named src like every test's copy (copyDir keeps the name).
	r := makeTestRepo(t, filepath.Join(repoTemplates.dir, fmt.Sprint(commits), "src"), commits)
	repoTemplates.repos[commits] = r
	return r
}

// makeTestRepo makes the repository testRepo describes in dir.
func makeTestRepo(t testing.TB, dir string, commits int) testRepo {
	t.Helper()
	gitT(t, "", "init", "--quiet", "-b", "main", dir)
	for i := 0; i < commits; i++ {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("src/f%d.go", i)), fmt.Sprintf("package src\n\nconst V%d = %d\n", i, i))
		gitT(t, dir, "add", "-A")
		gitT(t, dir, "commit", "--quiet", "-m", fmt.Sprintf("commit %d", i))
	}
	cutoff := gitT(t, dir, "rev-parse", "HEAD")
	gitT(t, dir, "tag", "v1")
	gitT(t, dir, "notes", "add", "-m", "a note that must not travel")
	writeFile(t, filepath.Join(dir, "src/after.go"), "package src\n\n// the fix, after the cutoff\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "--quiet", "-m", "after cutoff")
	return testRepo{Dir: dir, Cutoff: cutoff, After: gitT(t, dir, "rev-parse", "HEAD")}
}

func newSigner(t testing.TB) (string, *sign.Signer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "producer")
	if err := sign.GenerateKey(path); err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadSigner(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, s
}

// newOracle writes a small oracle directory with an executable rubric.
func newOracle(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "oracle")
	writeFile(t, filepath.Join(dir, "rubric.md"), "criterion tests_pass: the hidden tests pass\n")
	writeFile(t, filepath.Join(dir, "tests/after_test.go"), "package src\n")
	if err := os.WriteFile(filepath.Join(dir, "evaluate"), []byte("#!/bin/sh\necho '{\"tests_pass\": 1}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// buildOpts returns working build options for repo.
func buildOpts(t testing.TB, repo testRepo, s *sign.Signer) BuildOptions {
	t.Helper()
	dir := t.TempDir()
	spec := filepath.Join(dir, "CORE.md")
	proto := filepath.Join(dir, "DIST.md")
	writeFile(t, spec, "# Core\n\nA specification written for the tests.\n")
	writeFile(t, proto, "# Distribution\n\nA protocol written for the tests.\n")
	return BuildOptions{
		Repo: repo.Dir, CutoffCommit: repo.Cutoff, CutoffUTC: "2026-01-15T00:00:00Z",
		OracleDir: newOracle(t), Profile: "test-profile", CaseID: "A-test-0001",
		SpecFile: spec, ProtocolFile: proto, Signer: s, Producer: "producer@example",
		Out: filepath.Join(t.TempDir(), "case"),
		Now: func() time.Time { return time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC) },
	}
}

func buildCase(t testing.TB) (BuildOptions, *Case, *sign.Signer) {
	t.Helper()
	repo := newTestRepo(t, 3)
	_, s := newSigner(t)
	o := buildOpts(t, repo, s)
	c, err := Build(context.Background(), o)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return o, c, s
}

// resign rewrites the case's manifest through edit and signs it again with
// s: a producer-side (or key-holding attacker's) change that the signature
// alone cannot catch.
func resign(t testing.TB, dir string, s *sign.Signer, edit func(*Manifest)) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := ReadManifest(ManifestFile, b)
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	nb, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := s.Sign(sign.NamespaceCaseManifest, nb)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, ManifestFile), string(nb))
	writeFile(t, filepath.Join(dir, ManifestSigFile), string(sig))
}

func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return dst
}
