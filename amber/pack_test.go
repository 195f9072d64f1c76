package amber

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestPackDeterministic: the same content gives the same bytes whatever
// the files' times, owners and non-executable permission bits, and GNU tar
// reads the pack.
func TestPackDeterministic(t *testing.T) {
	t.Parallel()
	a := newOracle(t)
	b := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-r", a, b).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(b, "rubric.md"), old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(b, "rubric.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(b, "evaluate"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(b, "rubric.md"), 1234, 1234); err != nil {
		t.Fatal(err)
	}
	var pa, pb bytes.Buffer
	if err := WritePack(a, &pa); err != nil {
		t.Fatal(err)
	}
	if err := WritePack(b, &pb); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pa.Bytes(), pb.Bytes()) {
		t.Fatal("packs of the same content differ")
	}
	entries, err := ReadPack(bytes.NewReader(pa.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	if want := []string{"evaluate", "rubric.md", "tests", "tests/after_test.go"}; len(names) != 4 || names[0] != want[0] || names[3] != want[3] {
		t.Errorf("entries %v, want %v", names, want)
	}
	if _, err := exec.LookPath("tar"); err == nil {
		p := filepath.Join(t.TempDir(), "o.pack")
		if err := os.WriteFile(p, pa.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("tar", "-tvf", p).CombinedOutput()
		if err != nil {
			t.Fatalf("GNU tar refuses the pack: %v %s", err, out)
		}
		if !bytes.Contains(out, []byte("-rwxr-xr-x 0/0")) || !bytes.Contains(out, []byte("1970-01-01 00:00 evaluate")) {
			t.Errorf("tar listing:\n%s", out)
		}
	}
}

func TestReadPackRefusals(t *testing.T) {
	t.Parallel()
	epoch := time.Unix(0, 0)
	mk := func(hdrs ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hdrs {
			if h.ModTime.IsZero() {
				h.ModTime = epoch
			}
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if h.Size > 0 {
				if _, err := tw.Write(bytes.Repeat([]byte("x"), int(h.Size))); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	file := func(name string) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}
	}
	for _, tc := range []struct {
		name string
		pack []byte
		want error
	}{
		{"good", mk(file("a"), file("b")), nil},
		{"absolute", mk(file("/etc/x")), errPackName},
		{"dot-dot", mk(file("../x")), errPackName},
		{"inner dot-dot", mk(file("a/../../x")), errPackName},
		{"symlink", mk(&tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd", Mode: 0o777}), errPackFileType},
		{"hard link", mk(&tar.Header{Name: "l", Typeflag: tar.TypeLink, Linkname: "a", Mode: 0o644}), errPackFileType},
		{"unsorted", mk(file("b"), file("a")), errPackEntry},
		{"repeated", mk(file("a"), file("a")), errPackEntry},
		{"owner", mk(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Mode: 0o644, Uid: 1000}), errPackEntry},
		{"mtime", mk(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Mode: 0o644, ModTime: time.Unix(1, 0)}), errPackEntry},
		{"setuid mode", mk(&tar.Header{Name: "a", Typeflag: tar.TypeReg, Mode: 0o4755}), errPackEntry},
		{"truncated", mk(file("a"))[:600], errPackEntry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadPack(bytes.NewReader(tc.pack))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
