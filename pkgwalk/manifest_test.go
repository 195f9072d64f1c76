package pkgwalk_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"golang.org/x/sys/unix"
)

// A manifest record written by MarshalRecord reads back to the same
// manifest, and its bytes have the reference's layout.
func TestManifestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	m := mustManifest(t, copySynthetic(t))
	b, err := m.MarshalRecord("synthetic")
	if err != nil {
		t.Fatal(err)
	}
	wantStart := "{\n \"blind_package_id\": \"" + syntheticID + "\",\n \"type\": \"TRVM-BLIND-PACKAGE-v1\",\n \"root\": \"docs/spec/proof-wire\",\n \"file_count\": 7,\n \"files\": [\n  {\n   \"path\": \"SPEC.md\",\n"
	if !strings.HasPrefix(string(b), wantStart) || !strings.HasSuffix(string(b), "\n \"note\": \"synthetic\"\n}\n") {
		t.Errorf("record layout:\n%s", b)
	}
	back, err := pkgwalk.ParseManifestRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := back.ID(); id != syntheticID || back.Note != "synthetic" || back.FileCount != syntheticFiles {
		t.Errorf("read back %s %q %d", id, back.Note, back.FileCount)
	}
}

// Record files that must be refused, each with its rule.
func TestManifestRecordRefusals(t *testing.T) {
	t.Parallel()
	m := mustManifest(t, copySynthetic(t))
	good, err := m.MarshalRecord("n")
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(o *evidence.Object)) []byte {
		o, err := evidence.ReadObject(good)
		if err != nil {
			t.Fatal(err)
		}
		f(o)
		b, err := evidence.Stringify(o, " ")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	files := func(o *evidence.Object) []any { v, _ := o.Get("files"); return v.([]any) }
	cases := []struct {
		name string
		doc  []byte
		rule error
	}{
		{"recorded id of another manifest", edit(func(o *evidence.Object) {
			o.Set("blind_package_id", "bpkg-"+strings.Repeat("0", 64))
		}), pkgwalk.ErrManifestID},
		{"a digest changed, id kept", edit(func(o *evidence.Object) {
			files(o)[0].(*evidence.Object).Set("sha256", strings.Repeat("a", 64))
		}), pkgwalk.ErrManifestID},
		{"file_count wrong", edit(func(o *evidence.Object) { o.Set("file_count", 6.0) }), pkgwalk.ErrBadManifest},
		{"file_count fractional", edit(func(o *evidence.Object) { o.Set("file_count", 7.5) }), pkgwalk.ErrBadManifest},
		{"unknown member", edit(func(o *evidence.Object) { o.Set("exempt", []any{}) }), pkgwalk.ErrBadManifest},
		{"wrong type", edit(func(o *evidence.Object) { o.Set("type", "TRVM-BLIND-PACKAGE-v2") }), pkgwalk.ErrBadManifest},
		{"unsorted files", edit(func(o *evidence.Object) {
			fs := files(o)
			fs[0], fs[1] = fs[1], fs[0]
		}), pkgwalk.ErrBadManifest},
		{"dot-dot path", edit(func(o *evidence.Object) {
			files(o)[0].(*evidence.Object).Set("path", "../SPEC.md")
		}), pkgwalk.ErrBadSegment},
		{"absolute path", edit(func(o *evidence.Object) {
			files(o)[0].(*evidence.Object).Set("path", "/etc/passwd")
		}), pkgwalk.ErrBadSegment},
		{"empty segment", edit(func(o *evidence.Object) {
			files(o)[0].(*evidence.Object).Set("path", "A//SPEC.md")
		}), pkgwalk.ErrBadSegment},
		{"uppercase hex", edit(func(o *evidence.Object) {
			f := files(o)[0].(*evidence.Object)
			s, _ := f.Get("sha256")
			f.Set("sha256", strings.ToUpper(s.(string)))
		}), pkgwalk.ErrBadManifest},
		{"extra member in a file", edit(func(o *evidence.Object) {
			files(o)[0].(*evidence.Object).Set("mode", "0755")
		}), pkgwalk.ErrBadManifest},
		{"duplicate member", []byte(strings.Replace(string(good), "\"note\": \"n\"", "\"note\": \"n\",\n \"note\": \"m\"", 1)), evidence.ClassDuplicateName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := pkgwalk.ParseManifestRecord(c.doc)
			if !errors.Is(err, c.rule) {
				t.Fatalf("ParseManifestRecord = %v, want %v", err, c.rule)
			}
		})
	}
}

// The manifest is written beside a package, never inside it, however the
// output path is spelled.
func TestWriteManifestFileNeverInside(t *testing.T) {
	t.Parallel()
	pkg := copySynthetic(t)
	m := mustManifest(t, pkg)
	base := filepath.Dir(pkg)
	link := filepath.Join(t.TempDir(), "alias")
	must(t, os.Symlink(pkg, link))
	for _, out := range []string{
		filepath.Join(pkg, "BLIND-PACKAGE.json"),
		filepath.Join(pkg, "vectors", "BLIND-PACKAGE.json"),
		filepath.Join(pkg, "vectors", "..", "BLIND-PACKAGE.json"),
		filepath.Join(link, "vectors", "BLIND-PACKAGE.json"),
		filepath.Join(base, "other", "..", filepath.Base(pkg), "x.json"),
	} {
		err := pkgwalk.WriteManifestFile(out, m, "", pkg)
		if !errors.Is(err, pkgwalk.ErrOutputInside) {
			t.Errorf("%s: %v, want %q", out, err, pkgwalk.ErrOutputInside)
		}
	}
	if got := mustManifest(t, pkg); got.FileCount != syntheticFiles {
		t.Errorf("package changed: %d files", got.FileCount)
	}
	beside := filepath.Join(base, "blind-package.json")
	if err := pkgwalk.WriteManifestFile(beside, m, "beside", pkg); err != nil {
		t.Fatalf("beside: %v", err)
	}
	back, err := pkgwalk.ReadManifestFile(beside)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := back.ID(); id != syntheticID {
		t.Errorf("written manifest is %s", id)
	}
	// Records are never overwritten.
	if err := pkgwalk.WriteManifestFile(beside, m, "again", pkg); !errors.Is(err, os.ErrExist) {
		t.Errorf("second write: %v, want exists", err)
	}
	// A manifest path with a sibling name sharing the prefix is beside,
	// not inside (the /foo/bar vs /foo/bara case).
	if err := pkgwalk.WriteManifestFile(pkg+"a.json", m, "", pkg); err != nil {
		t.Errorf("prefix sibling: %v", err)
	}
}

// A bind mount of the package elsewhere is still the package: an output
// path under the bind is refused (device and inode, not strings).
func TestWriteManifestFileBindOfPackage(t *testing.T) {
	t.Parallel()
	pkg := copySynthetic(t)
	bind := filepath.Join(t.TempDir(), "bind")
	must(t, os.Mkdir(bind, 0o755))
	if err := unix.Mount(pkg, bind, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mounts are not permitted here (%v): needs root", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(bind, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", bind, err)
		}
	})
	m := mustManifest(t, pkg)
	for _, out := range []string{filepath.Join(bind, "m.json"), filepath.Join(bind, "vectors", "m.json")} {
		if err := pkgwalk.WriteManifestFile(out, m, "", pkg); !errors.Is(err, pkgwalk.ErrOutputInside) {
			t.Errorf("%s: %v, want %q", out, err, pkgwalk.ErrOutputInside)
		}
	}
}

func TestCheckPath(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		path string
		rule pkgwalk.Rule
	}{
		{"a/b.md", ""}, {"A-Z_0.9+x", ""},
		{"", pkgwalk.ErrBadSegment}, {"/a", pkgwalk.ErrBadSegment}, {"a/", pkgwalk.ErrBadSegment},
		{".", pkgwalk.ErrBadSegment}, {"a/../b", pkgwalk.ErrBadSegment}, {"a b", pkgwalk.ErrBadSegment},
		{`a\b`, pkgwalk.ErrBadSegment}, {"a:b", pkgwalk.ErrBadSegment}, {"a\x00b", pkgwalk.ErrBadSegment},
		{"caf\u00e9", pkgwalk.ErrBadSegment}, {"cafe\u0301", pkgwalk.ErrBadSegment},
	} {
		err := pkgwalk.CheckPath(c.path)
		if c.rule == "" && err != nil || c.rule != "" && !errors.Is(err, c.rule) {
			t.Errorf("CheckPath(%q) = %v, want %q", c.path, err, c.rule)
		}
	}
}

// Whatever bytes arrive, ParseManifestRecord never panics, and a record it
// accepts is consistent: valid, its identity recomputes, and its own
// MarshalRecord reads back to the same identity.
func FuzzParseManifestRecord(f *testing.F) {
	m := mustManifest(f, copySynthetic(f))
	good, err := m.MarshalRecord("seed")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"blind_package_id":"bpkg-","type":"TRVM-BLIND-PACKAGE-v1","root":"r","file_count":0,"files":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := pkgwalk.ParseManifestRecord(b)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted an invalid manifest: %v", err)
		}
		id, err := m.ID()
		if err != nil {
			t.Fatal(err)
		}
		again, err := m.MarshalRecord(m.Note)
		if err != nil {
			t.Fatal(err)
		}
		back, err := pkgwalk.ParseManifestRecord(again)
		if err != nil {
			t.Fatalf("own record refused: %v", err)
		}
		if id2, _ := back.ID(); id2 != id {
			t.Fatalf("identity moved: %s -> %s", id, id2)
		}
	})
}

// A FIFO planted where a manifest record is expected is refused at once
// (it would block a plain open until a writer came), and a record file that
// is not JSON is a manifest refusal.
func TestReadManifestFileRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "blind-package.json")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pkgwalk.ReadManifestFile(fifo); !errors.Is(err, evidence.ErrNotRegular) {
		t.Errorf("FIFO: %v, want evidence.ErrNotRegular", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"type":1,"type":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := pkgwalk.ReadManifestFile(bad)
	if !errors.Is(err, pkgwalk.ErrBadManifest) || !errors.Is(err, evidence.ClassDuplicateName) {
		t.Errorf("duplicate member: %v, want errBadManifest and duplicate-name", err)
	}
	if err != nil && !strings.Contains(err.Error(), bad) {
		t.Errorf("error %q does not name the file", err)
	}
}

// Two directories equal after ASCII case-folding ("A/" and "a/") are one
// directory on a case-insensitive filesystem, and TRVM-FORMATS §4.1 refuses
// two such paths, files or directories. No walk can produce such a
// manifest, so a record holding one was forged: it is refused even with a
// correct blind_package_id.
func TestManifestDirectoryCaseCollision(t *testing.T) {
	t.Parallel()
	h := strings.Repeat("a", 64)
	for _, paths := range [][]string{
		{"A/x.md", "a/y.md"},
		{"d/Sub/x.md", "d/sub/y.md"},
		{"A/x.md", "b/a/y.md", "b/A/z.md"},
	} {
		m := &pkgwalk.Manifest{Type: pkgwalk.ManifestType, Root: pkgwalk.DefaultRootLabel, FileCount: len(paths)}
		for _, p := range paths {
			m.Files = append(m.Files, pkgwalk.FileDigest{Path: p, SHA256: h})
		}
		pkgwalk.SortByPath(m.Files)
		if err := m.Validate(); !errors.Is(err, pkgwalk.ErrCaseCollision) {
			t.Errorf("%q: Validate = %v, want %q", paths, err, pkgwalk.ErrCaseCollision)
		}
		rec, err := m.MarshalRecord("")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pkgwalk.ParseManifestRecord(rec); !errors.Is(err, pkgwalk.ErrCaseCollision) {
			t.Errorf("%q: ParseManifestRecord = %v, want %q", paths, err, pkgwalk.ErrCaseCollision)
		}
	}
}
