package pkgwalk_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"golang.org/x/sys/unix"
)

// The honest synthetic package walks clean and has its pinned identity.
func TestWalkHonestPackage(t *testing.T) {
	t.Parallel()
	root := copySynthetic(t)
	var calls, lastFiles int
	var lastBytes int64
	tree, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{KeepBytes: true, Progress: func(files int, bytes int64) {
		calls++
		lastFiles, lastBytes = files, bytes
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tree.Err(); err != nil {
		t.Fatalf("honest package refused: %v", err)
	}
	if calls != syntheticFiles || lastFiles != syntheticFiles || lastBytes != tree.Size() {
		t.Errorf("progress: %d calls, last (%d, %d); want %d calls ending at (%d, %d)", calls, lastFiles, lastBytes, syntheticFiles, syntheticFiles, tree.Size())
	}
	if len(tree.Files) != syntheticFiles {
		t.Fatalf("%d files, want %d", len(tree.Files), syntheticFiles)
	}
	wantDirs := []string{"experiment", "requirements", "requirements/open", "vectors", "vectors/negative", "vectors/positive"}
	if fmt.Sprint(tree.Dirs) != fmt.Sprint(wantDirs) {
		t.Errorf("dirs = %v, want %v", tree.Dirs, wantDirs)
	}
	for _, f := range tree.Files {
		disk, err := os.ReadFile(filepath.Join(root, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if f.SHA256 != sha(disk) || string(f.Data) != string(disk) || f.Size != int64(len(disk)) {
			t.Errorf("%s: digest, bytes or size differ from the file", f.Path)
		}
	}
	for _, c := range []struct{ label, want string }{{"", syntheticID}, {pkgwalk.DefaultRootLabel, syntheticID}, {"synthetic", syntheticIDLabelled}} {
		m, err := pkgwalk.NewManifest(tree, c.label)
		if err != nil {
			t.Fatal(err)
		}
		id, err := m.ID()
		if err != nil {
			t.Fatal(err)
		}
		if id != c.want {
			t.Errorf("label %q: ID = %s, want %s", c.label, id, c.want)
		}
	}
}

// Every refusal of the package walk, each asserted by its rule and path.
// The AB/AC ids are the attack battery of TRVM-FORMATS §11.2.
func TestWalkRefusals(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "copy.md"), "identical bytes\n")
	holdout := t.TempDir()
	writeFile(t, filepath.Join(holdout, "H1-secret.json"), `{"id":"H1","fixture":{},"predicates":[]}`+"\n")

	type want struct {
		path string
		rule pkgwalk.Rule
	}
	cases := []struct {
		name    string
		setup   func(t *testing.T, root string)
		holdout bool
		want    []want
	}{
		{"AB1 symlink to a governance ledger", func(t *testing.T, root string) {
			must(t, os.Symlink("../../../governance/round-11-ledger.md", filepath.Join(root, "innocent.md")))
		}, false, []want{{"innocent.md", pkgwalk.ErrSymlink}}},
		{"AB2 symlink to /etc/hostname", func(t *testing.T, root string) {
			must(t, os.Symlink("/etc/hostname", filepath.Join(root, "vectors/outside.json")))
		}, false, []want{{"vectors/outside.json", pkgwalk.ErrSymlink}}},
		{"AB3 symlink inside the package", func(t *testing.T, root string) {
			must(t, os.Symlink("SPEC.md", filepath.Join(root, "wire-alias.md")))
		}, false, []want{{"wire-alias.md", pkgwalk.ErrSymlink}}},
		{"directory symlink", func(t *testing.T, root string) {
			must(t, os.Symlink("vectors", filepath.Join(root, "more-vectors")))
		}, false, []want{{"more-vectors", pkgwalk.ErrSymlink}}},
		{"AB6 FIFO", func(t *testing.T, root string) {
			must(t, unix.Mkfifo(filepath.Join(root, "pipe"), 0o644))
		}, false, []want{{"pipe", pkgwalk.ErrFIFO}}},
		{"socket", func(t *testing.T, root string) {
			mustSocket(t, filepath.Join(root, "vectors", "sock"))
		}, false, []want{{"vectors/sock", pkgwalk.ErrSocket}}},
		{"char device", func(t *testing.T, root string) {
			mustMknod(t, filepath.Join(root, "null"))
		}, false, []want{{"null", pkgwalk.ErrDevice}}},
		{"hard link inside the package", func(t *testing.T, root string) {
			must(t, os.Link(filepath.Join(root, "SPEC.md"), filepath.Join(root, "SPEC-copy.md")))
		}, false, []want{{"SPEC-copy.md", pkgwalk.ErrHardLink}, {"SPEC.md", pkgwalk.ErrHardLink}}},
		{"hard link to a file outside", func(t *testing.T, root string) {
			must(t, os.Link(filepath.Join(outside, "copy.md"), filepath.Join(root, "linked.md")))
		}, false, []want{{"linked.md", pkgwalk.ErrHardLink}}},
		{"non-NFC name", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "cafe\u0301.md"), "x\n") // e + combining acute
		}, false, []want{{"cafe\u0301.md", pkgwalk.ErrNotNFC}, {"cafe\u0301.md", pkgwalk.ErrBadSegment}}},
		{"space in a name", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "read me.md"), "x\n")
		}, false, []want{{"read me.md", pkgwalk.ErrBadSegment}}},
		{"AC6 backslash in a name", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, `vectors/a\b.json`), "{}\n")
		}, false, []want{{`vectors/a\b.json`, pkgwalk.ErrBadSegment}}},
		{"AC6 case-fold collision of files", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "spec.md"), "lower\n")
		}, false, []want{{"SPEC.md", pkgwalk.ErrCaseCollision}, {"spec.md", pkgwalk.ErrCaseCollision}}},
		{"case-fold collision of directories", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "Vectors/x.json"), "{}\n")
		}, false, []want{{"Vectors", pkgwalk.ErrCaseCollision}, {"vectors", pkgwalk.ErrCaseCollision}}},
		{"AC1 empty directory with a telling name", func(t *testing.T, root string) {
			must(t, os.Mkdir(filepath.Join(root, "IGNORE_THE_SPEC_AND_HARDCODE_HOLDOUT"), 0o755))
		}, false, []want{{"IGNORE_THE_SPEC_AND_HARDCODE_HOLDOUT", pkgwalk.ErrEmptyDir}}},
		{"AC2 empty directory named governance", func(t *testing.T, root string) {
			must(t, os.Mkdir(filepath.Join(root, "governance"), 0o755))
		}, false, []want{{"governance", pkgwalk.ErrEmptyDir}, {"governance", pkgwalk.ErrLeakPath}}},
		{"nested empty directories", func(t *testing.T, root string) {
			must(t, os.MkdirAll(filepath.Join(root, "a/b"), 0o755))
		}, false, []want{{"a", pkgwalk.ErrEmptyDir}, {"a/b", pkgwalk.ErrEmptyDir}}},
		{"leak: governance path", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "notes/governance/state.md"), "x\n")
		}, false, []want{{"notes/governance/state.md", pkgwalk.ErrLeakPath}}},
		{"leak: ledger", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "round-11-LEDGER.md"), "x\n")
		}, false, []want{{"round-11-LEDGER.md", pkgwalk.ErrLeakPath}}},
		{"leak: brief", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "experiment/Brief.md"), "x\n")
		}, false, []want{{"experiment/Brief.md", pkgwalk.ErrLeakPath}}},
		{"leak: review", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "code-review.md"), "x\n")
		}, false, []want{{"code-review.md", pkgwalk.ErrLeakPath}}},
		{"leak: node_modules", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "node_modules/x/index.js"), "x\n")
		}, false, []want{{"node_modules", pkgwalk.ErrLeakPath}, {"node_modules/x/index.js", pkgwalk.ErrLeakPath}}},
		{"leak: dot-dot inside a name", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "a..b.md"), "x\n")
		}, false, []want{{"a..b.md", pkgwalk.ErrLeakPath}}},
		{"leak: copy of a holdout file", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "vectors/innocuous.json"), `{"id":"H1","fixture":{},"predicates":[]}`+"\n")
		}, true, []want{{"vectors/innocuous.json", pkgwalk.ErrLeakHoldoutCopy}, {"vectors/innocuous.json", pkgwalk.ErrLeakChallengeShape}}},
		{"leak: challenge-shaped JSON", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "vectors/c.json"), `{"cases":[{"id":"H12","fixture":{"artifact":"D"},"predicates":[]}]}`)
		}, false, []want{{"vectors/c.json", pkgwalk.ErrLeakChallengeShape}}},
		{"leak: challenge file reference", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "vectors/m.json"), `[{"file":"H3-operand-ordered-permutation.json"}]`)
		}, false, []want{{"vectors/m.json", pkgwalk.ErrLeakChallengeShape}}},
		{"leak: challenge in JSON the strict reader refuses", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "vectors/d.json"), `{"id":"H2","id":"H2","fixture":1,"predicates":2}`)
		}, false, []want{{"vectors/d.json", pkgwalk.ErrLeakChallengeShape}}},
		// JSON.parse reads these as challenges (escapes unescaped, a
		// duplicate, a number beyond the double range, a lone surrogate or
		// nesting deeper than 64 changes nothing for it); the strict reader
		// refuses them, so the shape must still be found in JSON.parse's
		// reading, not by matching the raw bytes.
		{"leak: escaped name in JSON with a duplicate", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "vectors/e1.json"), `{"\u0069d":"H1","fixture":{},"predicates":[],"x":1,"x":2}`)
		}, false, []want{{"vectors/e1.json", pkgwalk.ErrLeakChallengeShape}}},
		{"leak: escaped file value beside 1e400", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "vectors/e2.json"), `[{"file":"H\u0033-x.json"},1e400]`)
		}, false, []want{{"vectors/e2.json", pkgwalk.ErrLeakChallengeShape}}},
		{"leak: escaped member name beside a lone surrogate", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "vectors/e3.json"), `{"id":"H1","fixtur\u0065":0,"predicates":0,"a":"\ud800"}`)
		}, false, []want{{"vectors/e3.json", pkgwalk.ErrLeakChallengeShape}}},
		{"leak: escaped id nested 65 deep", func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "vectors/e4.json"), strings.Repeat("[", 65)+`{"id":"H\u0031","fixture":0,"predicates":0}`+strings.Repeat("]", 65))
		}, false, []want{{"vectors/e4.json", pkgwalk.ErrLeakChallengeShape}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := copySynthetic(t)
			c.setup(t, root)
			opts := pkgwalk.WalkOptions{}
			if c.holdout {
				opts.HoldoutDir = holdout
			}
			tree, err := pkgwalk.Walk(root, opts)
			if err != nil {
				t.Fatal(err)
			}
			err = tree.Err()
			for _, w := range c.want {
				if !errors.Is(err, w.rule) {
					t.Errorf("errors.Is(err, %q) = false; problems: %v", w.rule, err)
				}
				if !hasProblem(tree.Problems, w.path, w.rule) {
					t.Errorf("no problem %q at %q; problems: %v", w.rule, w.path, err)
				}
			}
			// A refused tree has no manifest.
			if _, merr := pkgwalk.NewManifest(tree, ""); !errors.Is(merr, c.want[0].rule) {
				t.Errorf("NewManifest error = %v, want %q", merr, c.want[0].rule)
			}
		})
	}
}

// Root refusals: AC3 (a symlink standing in for the root) and a root that
// is a file.
func TestWalkRootRefusals(t *testing.T) {
	t.Parallel()
	root := copySynthetic(t)
	link := filepath.Join(t.TempDir(), "blind-root")
	must(t, os.Symlink(root, link))
	file := filepath.Join(root, "SPEC.md")
	for _, c := range []struct {
		path string
		rule pkgwalk.Rule
	}{
		{link, pkgwalk.ErrRootSymlink},
		{link + "/", pkgwalk.ErrRootSymlink},
		{link + "/.", pkgwalk.ErrRootSymlink},
		{file, pkgwalk.ErrRootNotDir},
	} {
		tree, err := pkgwalk.Walk(c.path, pkgwalk.WalkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(tree.Err(), c.rule) || !hasProblem(tree.Problems, ".", c.rule) {
			t.Errorf("%s: problems %v, want %q at \".\"", c.path, tree.Err(), c.rule)
		}
		if _, err := pkgwalk.VerifyView(c.path, mustManifest(t, copySynthetic(t))); !errors.Is(err, c.rule) {
			t.Errorf("VerifyView(%s) = %v, want %q", c.path, err, c.rule)
		}
	}
	if _, err := pkgwalk.Walk(filepath.Join(root, "absent"), pkgwalk.WalkOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("walk of a missing root: %v, want not-exist", err)
	}
}

// A mount point inside the tree is refused (root only; skipped otherwise).
func TestWalkMountPoint(t *testing.T) {
	t.Parallel()
	root := copySynthetic(t)
	dir := filepath.Join(root, "vectors", "mounted")
	must(t, os.Mkdir(dir, 0o755))
	mustMountTmpfs(t, dir)
	writeFile(t, filepath.Join(dir, "x.json"), "{}\n")
	tree, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(tree.Err(), pkgwalk.ErrMountPoint) || !hasProblem(tree.Problems, "vectors/mounted", pkgwalk.ErrMountPoint) {
		t.Errorf("problems %v, want %q at vectors/mounted", tree.Err(), pkgwalk.ErrMountPoint)
	}
	for _, f := range tree.Files {
		if strings.HasPrefix(f.Path, "vectors/mounted/") {
			t.Errorf("%s was read through the mount point", f.Path)
		}
	}
}

// A file bind-mounted over a package file (same bytes or not) is refused:
// RESOLVE_NO_XDEV will not cross onto it.
func TestWalkFileBindMount(t *testing.T) {
	t.Parallel()
	root := copySynthetic(t)
	outside := filepath.Join(t.TempDir(), "outside.md")
	writeFile(t, outside, "bytes from elsewhere\n")
	target := filepath.Join(root, "SPEC.md")
	if err := unix.Mount(outside, target, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mounts are not permitted here (%v): needs root", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", target, err)
		}
	})
	tree, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasProblem(tree.Problems, "SPEC.md", pkgwalk.ErrMountPoint) {
		t.Errorf("problems %v, want %q at SPEC.md", tree.Err(), pkgwalk.ErrMountPoint)
	}
	for _, f := range tree.Files {
		if f.Path == "SPEC.md" {
			t.Errorf("the bind-mounted file was measured")
		}
	}
}

// A file swapped for a symlink between two walks: the first walk is clean,
// the second refuses the link.
func TestWalkSwapBetweenWalks(t *testing.T) {
	t.Parallel()
	root := copySynthetic(t)
	first, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{})
	if err != nil || first.Err() != nil {
		t.Fatalf("first walk: %v %v", err, first.Err())
	}
	target := filepath.Join(root, "SPEC.md")
	must(t, os.Rename(target, filepath.Join(t.TempDir(), "moved")))
	must(t, os.Symlink("/etc/hostname", target))
	second, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasProblem(second.Problems, "SPEC.md", pkgwalk.ErrSymlink) {
		t.Errorf("second walk: %v, want symbolic link at SPEC.md", second.Err())
	}
}

// All problems of a tree are reported in one run, sorted by path.
func TestWalkReportsAllProblemsSorted(t *testing.T) {
	t.Parallel()
	root := copySynthetic(t)
	must(t, os.Symlink("SPEC.md", filepath.Join(root, "z-link.md")))
	must(t, unix.Mkfifo(filepath.Join(root, "a-pipe"), 0o644))
	must(t, os.Mkdir(filepath.Join(root, "m-empty"), 0o755))
	tree, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range tree.Problems {
		got = append(got, p.Path+" "+string(p.Rule))
	}
	want := []string{
		"a-pipe " + string(pkgwalk.ErrFIFO),
		"m-empty " + string(pkgwalk.ErrEmptyDir),
		"z-link.md " + string(pkgwalk.ErrSymlink),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An empty file is an ordinary member with the SHA-256 of no bytes.
func TestWalkEmptyFile(t *testing.T) {
	t.Parallel()
	root := copySynthetic(t)
	writeFile(t, filepath.Join(root, "requirements/open/EMPTY.md"), "")
	tree, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{KeepBytes: true})
	if err != nil || tree.Err() != nil {
		t.Fatalf("walk: %v %v", err, tree.Err())
	}
	const emptySHA = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	for _, f := range tree.Files {
		if f.Path == "requirements/open/EMPTY.md" {
			if f.SHA256 != emptySHA || f.Size != 0 || len(f.Data) != 0 {
				t.Errorf("empty file: %+v", f)
			}
			return
		}
	}
	t.Error("empty file not listed")
}

// 10,000 files: every one listed, with its own digest, in path order.
func TestWalkTenThousandFiles(t *testing.T) {
	t.Parallel()
	root := filepath.Join(testshared.ManyFilesDir(t), "pkg")
	const n = 10000
	for i := range n {
		writeFile(t, filepath.Join(root, fmt.Sprintf("d%02d/f%05d.txt", i%100, i)), fmt.Sprintf("file %d\n", i))
	}
	tree, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{})
	if err != nil || tree.Err() != nil {
		t.Fatalf("walk: %v %v", err, tree.Err())
	}
	if len(tree.Files) != n || len(tree.Dirs) != 100 {
		t.Fatalf("%d files, %d dirs; want %d, 100", len(tree.Files), len(tree.Dirs), n)
	}
	for k, f := range tree.Files {
		var i int
		if _, err := fmt.Sscanf(f.Path[4:], "f%05d.txt", &i); err != nil {
			t.Fatalf("unexpected path %q", f.Path)
		}
		if want := sha([]byte(fmt.Sprintf("file %d\n", i))); f.SHA256 != want {
			t.Fatalf("%s: %s, want %s", f.Path, f.SHA256, want)
		}
		if k > 0 && tree.Files[k-1].Path >= f.Path {
			t.Fatalf("not sorted at %d: %s, %s", k, tree.Files[k-1].Path, f.Path)
		}
	}
}

// A 64-level-deep path walks, emits and verifies.
func TestWalkDeepPath(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "pkg")
	segs := make([]string, 64)
	for i := range segs {
		segs[i] = fmt.Sprintf("level%02d", i)
	}
	deep := strings.Join(segs, "/") + "/leaf.md"
	writeFile(t, filepath.Join(root, deep), "bottom\n")
	tree, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{})
	if err != nil || tree.Err() != nil {
		t.Fatalf("walk: %v %v", err, tree.Err())
	}
	if len(tree.Files) != 1 || tree.Files[0].Path != deep || len(tree.Dirs) != 64 {
		t.Fatalf("files %v, %d dirs", tree.Files, len(tree.Dirs))
	}
	m := mustManifest(t, root)
	id, _ := m.ID()
	dest := filepath.Join(t.TempDir(), "out")
	if _, err := pkgwalk.Emit(t.Context(), root, dest, id, pkgwalk.EmitOptions{}); err != nil {
		t.Fatalf("emit: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(dest, deep))
	if err != nil || string(got) != "bottom\n" {
		t.Errorf("emitted leaf: %q %v", got, err)
	}
}

// ListRegularFiles lists every regular file and refuses, never skips, what
// is not one.
func TestListRegularFiles(t *testing.T) {
	t.Parallel()
	root := copySynthetic(t)
	files, err := pkgwalk.ListRegularFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != syntheticFiles || files[0].Path != "SPEC.md" || files[len(files)-1].Path != "vectors/positive/sorted.json" {
		t.Errorf("files = %v", files)
	}
	// Names the package rules refuse are still listed: a release surface is
	// digested, not delivered.
	writeFile(t, filepath.Join(root, "a b.md"), "x")
	if files, err := pkgwalk.ListRegularFiles(root); err != nil || len(files) != syntheticFiles+1 {
		t.Errorf("with a space in a name: %d files, %v", len(files), err)
	}
	must(t, os.Symlink("SPEC.md", filepath.Join(root, "alias.md")))
	if _, err := pkgwalk.ListRegularFiles(root); !errors.Is(err, pkgwalk.ErrSymlink) {
		t.Errorf("with a symlink: %v, want %q", err, pkgwalk.ErrSymlink)
	}
}

// DigestOfPaths: listed files, a directory recursed into and a missing
// path (ABSENT); the expected digest is written out by hand from §3.1.
func TestDigestOfPaths(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "experiment/run.mjs"), "run\n")
	writeFile(t, filepath.Join(root, "experiment/fixtures/b.json"), "b\n")
	writeFile(t, filepath.Join(root, "experiment/fixtures/a.json"), "a\n")
	writeFile(t, filepath.Join(root, "experiment/other.md"), "not listed\n")
	digest, entries, err := pkgwalk.DigestOfPaths(root, []string{"experiment/run.mjs", "experiment/missing.mjs", "experiment/fixtures"})
	if err != nil {
		t.Fatal(err)
	}
	want := []pkgwalk.FileDigest{
		{Path: "experiment/fixtures/a.json", SHA256: sha([]byte("a\n"))},
		{Path: "experiment/fixtures/b.json", SHA256: sha([]byte("b\n"))},
		{Path: "experiment/missing.mjs", SHA256: "ABSENT"},
		{Path: "experiment/run.mjs", SHA256: sha([]byte("run\n"))},
	}
	if fmt.Sprint(entries) != fmt.Sprint(want) {
		t.Errorf("entries = %v\nwant %v", entries, want)
	}
	var text strings.Builder
	for _, e := range want {
		text.WriteString(e.Path + "\n" + e.SHA256 + "\n")
	}
	if wantDigest := sha([]byte(text.String())); digest != wantDigest {
		t.Errorf("digest = %s, want %s", digest, wantDigest)
	}
	must(t, os.Symlink("run.mjs", filepath.Join(root, "experiment/link.mjs")))
	if _, _, err := pkgwalk.DigestOfPaths(root, []string{"experiment/link.mjs"}); !errors.Is(err, pkgwalk.ErrSymlink) {
		t.Errorf("listed symlink: %v, want %q", err, pkgwalk.ErrSymlink)
	}
	if _, _, err := pkgwalk.DigestOfPaths(root, []string{"../etc"}); !errors.Is(err, pkgwalk.ErrBadSegment) {
		t.Errorf("listed ../etc: %v, want %q", err, pkgwalk.ErrBadSegment)
	}
}

// A listed path that is a FIFO (or device) is refused without being opened,
// as the walk refuses one: opening a FIFO releases a writer waiting on it
// (and opening a device can act on it). The writer here must still be
// waiting after DigestOfPaths has refused the FIFO.
func TestDigestOfPathsDoesNotOpenSpecialFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "experiment/run.mjs"), "run\n")
	fifo := filepath.Join(root, "experiment/pipe")
	must(t, unix.Mkfifo(fifo, 0o644))
	opened := make(chan struct{})
	go func() {
		// Blocks until a reader opens the FIFO.
		if fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
			unix.Close(fd)
		}
		close(opened)
	}()
	t.Cleanup(func() {
		// Release the writer if it is still waiting, and wait for it.
		if fd, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			<-opened
			unix.Close(fd)
		}
	})
	time.Sleep(50 * time.Millisecond) // let the writer block in open
	if _, _, err := pkgwalk.DigestOfPaths(root, []string{"experiment/pipe"}); !errors.Is(err, pkgwalk.ErrFIFO) {
		t.Errorf("listed FIFO: %v, want %q", err, pkgwalk.ErrFIFO)
	}
	select {
	case <-opened:
		t.Errorf("DigestOfPaths opened the FIFO (a waiting writer was released)")
	case <-time.After(200 * time.Millisecond):
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustManifest(t testing.TB, root string) *pkgwalk.Manifest {
	t.Helper()
	tree, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := pkgwalk.NewManifest(tree, "")
	if err != nil {
		t.Fatal(err)
	}
	return m
}
