package amber

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// sparsePack is a tar whose one entry is a PAX GNU sparse 1.0 file: 2 KiB
// on the wire, a logical size of almost the whole pack cap.
func sparsePack(t *testing.T) []byte {
	t.Helper()
	rec := func(k, v string) string {
		l := len(k) + len(v) + 3
		for len(fmt.Sprint(l))+len(k)+len(v)+3 != l {
			l++
		}
		return fmt.Sprintf("%d %s=%s\n", l, k, v)
	}
	pax := rec("GNU.sparse.major", "1") + rec("GNU.sparse.minor", "0") + rec("GNU.sparse.name", "evaluate") + rec("GNU.sparse.realsize", "1000000000")
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	// The PAX header block, written as a file and retyped to 'x' below.
	if err := tw.WriteHeader(&tar.Header{Name: "PaxHeaders/evaluate", Mode: 0o644, Size: int64(len(pax)), ModTime: packEpoch, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(pax)); err != nil {
		t.Fatal(err)
	}
	mapBlock := make([]byte, 512)
	copy(mapBlock, "1\n0\n0\n")
	if err := tw.WriteHeader(&tar.Header{Name: "evaluate", Mode: 0o644, Size: 512, ModTime: packEpoch, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(mapBlock); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	out := b.Bytes()
	out[156] = tar.TypeXHeader
	copy(out[148:156], "        ")
	sum := 0
	for _, c := range out[:512] {
		sum += int(c)
	}
	copy(out[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return out
}

// TestReadPackSparseBomb: a sparse entry is not a form WritePack writes; it
// is refused before its logical size is read into memory.
func TestReadPackSparseBomb(t *testing.T) {
	// Not parallel: it measures the process's heap.
	p := sparsePack(t)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := ReadPack(bytes.NewReader(p))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errPackEntry) {
		t.Errorf("sparse entry (%d bytes on the wire): %v, want errPackEntry", len(p), err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("reading a %d-byte pack allocated %d MiB", len(p), grew>>20)
	}
}

// TestPackLongNameRoundTrip: the one PAX record WritePack writes (a path
// over 100 bytes or not ASCII) still reads back.
func TestPackLongNameRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	long := strings.Repeat("d", 120) + "/é" + strings.Repeat("f", 100)
	if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(long)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, long), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WritePack(dir, &b); err != nil {
		t.Fatal(err)
	}
	es, err := ReadPack(bytes.NewReader(b.Bytes()))
	if err != nil || len(es) != 2 || es[1].Name != long {
		t.Fatalf("long name: %v %v", es, err)
	}
}
