package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// genRepo writes a git repository of about objects objects (per commit:
// the commit, a root tree and a new blob, in files spread over 50 paths)
// with git fast-import, and returns the tip commit.
func genRepo(dir string, objects int) (string, error) {
	env := append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	git := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = env
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if _, err := git("", "init", "--quiet", "-b", "main"); err != nil {
		return "", err
	}
	var in strings.Builder
	for i := range objects / 3 {
		fmt.Fprintf(&in, "commit refs/heads/main\ncommitter Bench <bench@example.invalid> %d +0000\ndata 9\nstep %04d\n", 1767225600+i, i%10000)
		body := fmt.Sprintf("package gen\n\n// V is step %d.\nconst V = %d\n", i, i)
		fmt.Fprintf(&in, "M 644 inline src/f%02d.go\ndata %d\n%s\n", i%50, len(body), body)
	}
	if _, err := git(in.String(), "fast-import", "--quiet"); err != nil {
		return "", err
	}
	if _, err := git("", "repack", "-adq"); err != nil {
		return "", err
	}
	return git("", "rev-parse", "main")
}

func amberRows(c *config) []Row {
	objects := 15000
	if c.quick {
		objects = 300
	}
	const target = "≤ 1.3× git bundle create + sha256sum"
	work := fmt.Sprintf("AMBER `amber case build` (bundle, oracle pack, manifest, signature), repository of ~%d objects", objects)
	fail := func(err error) []Row {
		return []Row{{Issue: 9, Work: work, Clean: "—", Peer: "—", Ratio: "—", Target: target, Verdict: notMeasured + ": " + err.Error()}}
	}
	base := filepath.Join(c.tmp, "amber")
	repo := filepath.Join(base, "repo")
	tip, err := genRepo(repo, objects)
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(base)
	key := filepath.Join(base, "key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "bench", "-f", key).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("ssh-keygen: %v: %s", err, out))
	}
	files := map[string]string{
		"oracle/rubric.md":           "criterion tests_pass: the hidden tests pass\n",
		"oracle/tests/after_test.go": "package gen\n",
		"CORE.md":                    "# Core\n\nA specification written for the benchmark.\n",
		"DIST.md":                    "# Distribution\n\nA protocol written for the benchmark.\n",
	}
	for p, s := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(base, p)), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(filepath.Join(base, p), []byte(s), 0o644); err != nil {
			return fail(err)
		}
	}
	seq := 0
	build := timed(func() (*exec.Cmd, func(), error) {
		seq++
		out := filepath.Join(base, fmt.Sprintf("case%d", seq))
		return exec.Command(c.bin, "amber", "case", "build", "--repo", repo, "--cutoff-commit", tip, "--cutoff-utc", "2026-03-01T00:00:00Z",
			"--oracle", filepath.Join(base, "oracle"), "--profile", "bench-profile", "--case-id", fmt.Sprintf("A-bench-%04d", seq),
			"--spec", filepath.Join(base, "CORE.md"), "--protocol", filepath.Join(base, "DIST.md"), "--key", key, "--out", out), func() { os.RemoveAll(out) }, nil
	})
	// The peer: the same ref, the same git settings as the case build
	// (bundle v3, one pack thread), then sha256sum of the bundle.
	peer := timed(func() (*exec.Cmd, func(), error) {
		seq++
		out := filepath.Join(base, fmt.Sprintf("plain%d.bundle", seq))
		script := `git -C "$1" update-ref refs/bench/cutoff "$2" && git -C "$1" -c pack.threads=1 bundle create --quiet --version=3 "$3" refs/bench/cutoff && sha256sum "$3" >/dev/null`
		return exec.Command("sh", "-c", script, "sh", repo, tip, out), func() { os.Remove(out) }, nil
	})
	if _, err := build(); err != nil {
		return fail(err)
	}
	ds, err := alternate(c.rounds, build, peer)
	if err != nil {
		return fail(err)
	}
	tb, tp := median(ds[0]), median(ds[1])
	return []Row{{Issue: 9, Work: work + " vs `git bundle create` + `sha256sum`", Clean: ms(tb), Peer: ms(tp),
		Ratio: fmt.Sprintf("%.2f×", float64(tb)/float64(tp)), Target: target, Verdict: verdict(float64(tb) <= 1.3*float64(tp)),
		Note: "both bundle the same history with one pack thread; the build adds the oracle pack, the manifest, the signature and its own checks"}}
}
