package amber

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// genRepo writes a repository of about objects git objects (one commit, one
// tree and one blob per step) with git fast-import.
func genRepo(b *testing.B, objects int) testRepo {
	b.Helper()
	needGit(b)
	dir := filepath.Join(b.TempDir(), "gen")
	gitT(b, "", "init", "--quiet", "-b", "main", dir)
	var in strings.Builder
	for i := 0; i < objects/3; i++ {
		fmt.Fprintf(&in, "commit refs/heads/main\ncommitter T <t@example.invalid> %d +0000\ndata 4\nc%03d\n", 1767225600+i, i%1000)
		content := fmt.Sprintf("package gen\n\nconst V = %d\n", i)
		fmt.Fprintf(&in, "M 644 inline f%d.go\ndata %d\n%s\n", i%50, len(content), content)
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = dir
	cmd.Env = gitEnv(true)
	cmd.Stdin = strings.NewReader(in.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("fast-import: %v %s", err, out)
	}
	gitT(b, dir, "repack", "-adq")
	return testRepo{Dir: dir, Cutoff: gitT(b, dir, "rev-parse", "main")}
}

// BenchmarkCaseBuild builds a case from a generated repository of ~15,000
// objects; compare with BenchmarkPlainBundleSHA256 (target ≤ 1.3×).
func BenchmarkCaseBuild(b *testing.B) {
	repo := genRepo(b, 15000)
	_, s := newSigner(b)
	o := buildOpts(b, repo, s)
	out := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o.Out = filepath.Join(out, fmt.Sprint("case", i))
		if _, err := Build(context.Background(), o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainBundleSHA256 is the baseline: git bundle create of the same
// ref, then sha256sum.
func BenchmarkPlainBundleSHA256(b *testing.B) {
	repo := genRepo(b, 15000)
	gitT(b, repo.Dir, "update-ref", "refs/x", repo.Cutoff)
	out := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := filepath.Join(out, fmt.Sprint("b", i))
		gitT(b, repo.Dir, "-c", "pack.threads=1", "bundle", "create", "--quiet", "--version=3", p, "refs/x")
		if err := exec.Command("sha256sum", p).Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCaseVerify verifies the generated case (signature, bundle with
// git fetch and fsck, oracle).
func BenchmarkCaseVerify(b *testing.B) {
	repo := genRepo(b, 15000)
	_, s := newSigner(b)
	o := buildOpts(b, repo, s)
	c, err := Build(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := VerifyCase(context.Background(), c.Dir, s.PublicKey(), VerifyOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

const benchIndexEntries = 100_000

// BenchmarkIndexAppend100k appends 100,000 entries under one checkpoint.
func BenchmarkIndexAppend100k(b *testing.B) {
	es := make([]*Entry, benchIndexEntries)
	for i := range es {
		es[i] = testEntry(i)
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		base := b.TempDir()
		ix, err := InitIndex(filepath.Join(base, "ix"), "bench.example/index", filepath.Join(base, "k"))
		if err != nil {
			b.Fatal(err)
		}
		skey, _ := os.ReadFile(filepath.Join(base, "k"))
		b.StartTimer()
		if err := ix.AppendBatch(string(skey), es); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIndexVerify100k loads and fully verifies an index of 100,000
// entries (target ≤ 2 s).
func BenchmarkIndexVerify100k(b *testing.B) {
	dir, _ := newTestIndex(b, benchIndexEntries)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := LoadIndex(dir, ""); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIndexAppendOne100k appends one entry to an index of 100,000
// (load and verify the whole index, append, sign).
func BenchmarkIndexAppendOne100k(b *testing.B) {
	dir, key := newTestIndex(b, benchIndexEntries)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := AppendCaseFile(dir, key, testEntry(benchIndexEntries+i)); err != nil {
			b.Fatal(err)
		}
	}
}
