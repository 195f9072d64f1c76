package main

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// genTree writes n files of together about total random bytes (sizes
// vary ±50% around the mean, 100 files per directory) under dir.
func genTree(dir string, n int, total int64) (int64, error) {
	mean := total / int64(n)
	buf := make([]byte, mean*3/2+1)
	if _, err := rand.Read(buf); err != nil {
		return 0, err
	}
	var sum int64
	for i := range n {
		sz := mean/2 + int64(i*7919)%(mean+1)
		sub := filepath.Join(dir, fmt.Sprintf("d%03d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(sub, 0o755); err != nil {
				return 0, err
			}
		}
		// Each file differs in its first bytes, so no two are identical.
		copy(buf, fmt.Sprintf("%08d", i))
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%05d.bin", i)), buf[:sz], 0o644); err != nil {
			return 0, err
		}
		sum += sz
	}
	return sum, nil
}

// opensslRate is `openssl speed -evp sha256` at 16 KiB blocks on one
// core, in bytes per second.
func opensslRate(seconds int) (float64, error) {
	out, err := exec.Command("openssl", "speed", "-evp", "sha256", "-bytes", "16384", "-seconds", strconv.Itoa(seconds)).Output()
	if err != nil {
		return 0, fmt.Errorf("openssl speed: %w", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && strings.EqualFold(f[0], "sha256") {
			v, err := strconv.ParseFloat(strings.TrimSuffix(f[len(f)-1], "k"), 64)
			if err == nil {
				return v * 1000, nil
			}
		}
	}
	return 0, fmt.Errorf("openssl speed: no sha256 line in %q", out)
}

func packageRows(c *config) []Row {
	// The issue's size: its targets are stated for 10,000 files / 1 GiB
	// (smaller files would make per-file syscalls, not hashing, the cost).
	n, total := 10000, int64(1<<30)
	if c.quick {
		n, total = 200, 4<<20
	}
	work := fmt.Sprintf("package manifest (`package id`), %d files / %s on tmpfs", n, mib(total))
	fail := func(issue int, w, target string, err error) []Row {
		return []Row{{Issue: issue, Work: w, Clean: "—", Peer: "—", Ratio: "—", Target: target, Verdict: notMeasured + ": " + err.Error()}}
	}
	root := filepath.Join(c.tmp, "pkg")
	size, err := genTree(root, n, total)
	if err != nil {
		return fail(3, work, "≥ 75% of openssl per core", err)
	}
	defer os.RemoveAll(root)
	id, err := packageID(c, root)
	if err != nil {
		return fail(3, work, "≥ 75% of openssl per core", err)
	}
	cr := timed(func() (*exec.Cmd, func(), error) { return exec.Command(c.bin, "package", "id", root), nil, nil })
	sums := timed(func() (*exec.Cmd, func(), error) {
		return exec.Command("sh", "-c", `find "$1" -type f -print0 | xargs -0 sha256sum >/dev/null`, "sh", root), nil, nil
	})
	ds, err := alternate(c.rounds, cr, sums)
	if err != nil {
		return fail(3, work, "≥ 75% of openssl per core", err)
	}
	tc, ts := median(ds[0]), median(ds[1])
	rate := float64(size) / tc.Seconds()
	cores := runtime.NumCPU()
	rows := []Row{{Issue: 3, Work: work + " vs `find -type f | xargs sha256sum`",
		Clean: fmt.Sprintf("%s (%.2f GB/s)", ms(tc), rate/1e9), Peer: fmt.Sprintf("%s (%.2f GB/s)", ms(ts), float64(size)/ts.Seconds()/1e9),
		Ratio: fmt.Sprintf("%.2f× its time", float64(tc)/float64(ts)), Target: "well ahead of sha256sum (follows from the openssl target)", Verdict: verdict(tc < ts)}}
	ossl, err := opensslRate(1)
	if err != nil {
		rows = append(rows, fail(3, "package manifest vs the openssl limit", "≥ 75% of openssl per core", err)...)
	} else {
		frac := rate / (ossl * float64(cores))
		rows = append(rows, Row{Issue: 3, Work: fmt.Sprintf("package manifest vs `openssl speed -evp sha256` (16 KiB blocks) × %d cores", cores),
			Clean: fmt.Sprintf("%.2f GB/s", rate/1e9), Peer: fmt.Sprintf("%.2f GB/s per core × %d", ossl/1e9, cores),
			Ratio: fmt.Sprintf("%.0f%% of the limit", 100*frac), Target: "≥ 75% of the openssl single-core rate per core used", Verdict: verdict(frac >= 0.75),
			Note: "the manifest time includes the walk (open, fstat, read of every file through descriptors), process start-up and the bpkg; openssl hashes one buffer in memory"})
	}

	seq := 0
	emit := timed(func() (*exec.Cmd, func(), error) {
		seq++
		dst := filepath.Join(c.tmp, fmt.Sprintf("emit%d", seq))
		return exec.Command(c.bin, "package", "emit", "--no-sync", "--from", root, "--into", dst, "--expect", id), func() { os.RemoveAll(dst) }, nil
	})
	cp := timed(func() (*exec.Cmd, func(), error) {
		seq++
		dst := filepath.Join(c.tmp, fmt.Sprintf("cp%d", seq))
		return exec.Command("cp", "-a", root, dst), func() { os.RemoveAll(dst) }, nil
	})
	ds, err = alternate(c.rounds, emit, cp)
	ework := fmt.Sprintf("package emit (structural walk, kernel copy, walk and hash of the delivered copy), %d files / %s, vs `cp -a`", n, mib(total))
	if err != nil {
		return append(rows, fail(3, ework, "≤ 1.2× cp -a", err)...)
	}
	te, tcp := median(ds[0]), median(ds[1])
	return append(rows, Row{Issue: 3, Work: ework, Clean: ms(te), Peer: ms(tcp), Ratio: fmt.Sprintf("%.2f×", float64(te)/float64(tcp)),
		Target: "≤ 1.2× cp -a", Verdict: verdict(float64(te) <= 1.2*float64(tcp)),
		Note: "emit on tmpfs with --no-sync (a tmpfs needs no fsync), as cp -a does none"})
}
