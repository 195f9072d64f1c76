package pkgwalk_test

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// benchDir returns a fresh directory on tmpfs (/dev/shm) when there is
// one, so the benchmarks measure hashing and syscalls, not a disk.
func benchDir(b *testing.B) string {
	b.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "pkgwalk-bench-")
		if err == nil {
			b.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return b.TempDir()
}

// genPackage writes n files totalling about total bytes (sizes vary
// around the mean) in 100 directories, and returns the total written.
func genPackage(b *testing.B, root string, n int, total int64) int64 {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	mean := total / int64(n)
	buf := make([]byte, 3*mean+2)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	var written int64
	for i := range n {
		size := mean/2 + rng.Int64N(mean+1)
		dir := filepath.Join(root, fmt.Sprintf("d%02d", i%100))
		if i < 100 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		data := buf[i%int(mean+1) : i%int(mean+1)+int(size)]
		data[0] = byte(i) // distinct contents, so no two files share a digest
		data[1] = byte(i >> 8)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.bin", i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
		written += size
	}
	return written
}

// timeCmd runs a shell pipeline once and returns its wall time.
func timeCmd(b *testing.B, script string) (time.Duration, bool) {
	b.Helper()
	start := time.Now()
	cmd := exec.Command("sh", "-c", script)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Logf("%s: %v: %s", script, err, out)
		return 0, false
	}
	return time.Since(start), true
}

// opensslRate returns the single-core SHA-256 rate of `openssl speed -evp
// sha256` at 16 KiB blocks, in bytes per second, or 0 when unavailable.
func opensslRate(b *testing.B) float64 {
	b.Helper()
	out, err := exec.Command("openssl", "speed", "-evp", "sha256", "-bytes", "16384", "-seconds", "1").Output()
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && strings.HasPrefix(strings.ToLower(f[0]), "sha256") && strings.HasSuffix(f[1], "k") {
			v, err := strconv.ParseFloat(strings.TrimSuffix(f[1], "k"), 64)
			if err == nil {
				return v * 1000
			}
		}
	}
	return 0
}

func benchManifest(b *testing.B, n int, total int64) {
	root := filepath.Join(benchDir(b), "pkg")
	size := genPackage(b, root, n, total)
	cores := runtime.GOMAXPROCS(0)
	b.SetBytes(size)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		tree, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{})
		if err != nil || tree.Err() != nil || len(tree.Files) != n {
			b.Fatalf("walk: %v %v %d", err, tree.Err(), len(tree.Files))
		}
		if _, err := pkgwalk.NewManifest(tree, ""); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start).Seconds() / float64(b.N)
	b.StopTimer()
	rate := float64(size) / per
	b.ReportMetric(rate/1e9, "GB/s")
	if d, ok := timeCmd(b, "find "+root+" -type f -print0 | xargs -0 sha256sum >/dev/null"); ok {
		b.ReportMetric(d.Seconds()/per, "x-faster-than-sha256sum")
	}
	if o := opensslRate(b); o > 0 {
		b.ReportMetric(o/1e9, "openssl-GB/s-1core")
		b.ReportMetric(100*rate/(o*float64(cores)), "%-of-openssl-per-core")
	}
}

// BenchmarkManifest: manifest of a generated 10,000-file package (80 MB),
// side by side with find | xargs sha256sum and against openssl's
// single-core SHA-256 rate (target ≥ 75% per core used).
func BenchmarkManifest(b *testing.B) { benchManifest(b, 10000, 80<<20) }

// BenchmarkManifest1GiB is the full-size target (10,000 files,
// 1 GiB); set CLEANROOM_BENCH_LARGE=1 to run it.
func BenchmarkManifest1GiB(b *testing.B) {
	if os.Getenv("CLEANROOM_BENCH_LARGE") == "" {
		b.Skip("set CLEANROOM_BENCH_LARGE=1 for the 1 GiB package")
	}
	benchManifest(b, 10000, 1<<30)
}

func benchEmit(b *testing.B, n int, total int64) {
	base := benchDir(b)
	root := filepath.Join(base, "pkg")
	size := genPackage(b, root, n, total)
	tree, err := pkgwalk.Walk(root, pkgwalk.WalkOptions{})
	if err != nil {
		b.Fatal(err)
	}
	m, err := pkgwalk.NewManifest(tree, "")
	if err != nil {
		b.Fatal(err)
	}
	id, _ := m.ID()
	b.SetBytes(size)
	b.ResetTimer()
	var i int
	var spent time.Duration
	for b.Loop() {
		dest := filepath.Join(base, fmt.Sprintf("out%d", i))
		i++
		start := time.Now()
		if _, err := pkgwalk.Emit(b.Context(), root, dest, id, pkgwalk.EmitOptions{}); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(start)
		b.StopTimer()
		os.RemoveAll(dest)
		b.StartTimer()
	}
	b.StopTimer()
	per := spent.Seconds() / float64(b.N)
	if d, ok := timeCmd(b, "cp -a "+root+" "+filepath.Join(base, "cp-a")); ok {
		b.ReportMetric(per/d.Seconds(), "x-time-of-cp-a")
	}
}

// BenchmarkEmit: emit of the generated 10,000-file package (structural
// walk, kernel copy, walk and hash of the delivered copy), side by side with cp -a
// (target ≤ 1.2× its time).
func BenchmarkEmit(b *testing.B) { benchEmit(b, 10000, 80<<20) }

// BenchmarkEmit1GiB: CLEANROOM_BENCH_LARGE=1.
func BenchmarkEmit1GiB(b *testing.B) {
	if os.Getenv("CLEANROOM_BENCH_LARGE") == "" {
		b.Skip("set CLEANROOM_BENCH_LARGE=1 for the 1 GiB package")
	}
	benchEmit(b, 10000, 1<<30)
}
