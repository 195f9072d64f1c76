package main

import (
	"encoding/json"

	"github.com/cleanroom-dev/cleanroom/amber"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// amberFixture writes a small source repository, an oracle and the pinned
// files for the CLI tests.
func amberFixture(t *testing.T) (dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir = t.TempDir()
	src := filepath.Join(dir, "src")
	for _, args := range [][]string{
		{"init", "--quiet", "-b", "main", src},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(src, "a.go"), []byte("package a\n"), 0o644))
	for _, args := range [][]string{{"add", "a.go"}, {"-c", "user.name=T", "-c", "user.email=t@example.invalid", "commit", "--quiet", "-m", "a"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = src
		// Committed before the cutoffs the tests name: a cutoff earlier
		// than its commit's committer date is refused.
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "oracle"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "oracle", "evaluate"), []byte("#!/bin/sh\necho '{\"ok\": 1}'\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "CORE.md"), []byte("# core\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "DIST.md"), []byte("# dist\n"), 0o644))
	return dir
}

func TestAmberCLIProducerFlow(t *testing.T) {
	t.Parallel()
	d := amberFixture(t)
	p := func(n string) string { return filepath.Join(d, n) }
	build := func(caseID, out string, extra ...string) []string {
		return append([]string{"amber", "case", "build", "--repo", p("src"), "--cutoff-commit", "main", "--cutoff-utc", "2026-01-15T00:00:00Z",
			"--oracle", p("oracle"), "--profile", "test", "--case-id", caseID, "--spec", p("CORE.md"), "--protocol", p("DIST.md"),
			"--key", p("k"), "--out", out}, extra...)
	}
	for _, step := range []struct {
		name string
		args []string
		code int
		want string // in stdout (JSON) or, for a refusal, stderr (the rule broken)
	}{
		{"key gen", []string{"--json", "amber", "key", "gen", "--out", p("k"), "--identity", "producer@example"}, 0, `"signing_key_id": "SHA256:`},
		{"key gen refuses to overwrite", []string{"amber", "key", "gen", "--out", p("k")}, 2, "key file already exists"},
		{"case build", append([]string{"--json"}, build("A-1", p("case"))...), 0, `"isolation_class": "full_isolation"`},
		{"case build into an existing dir", build("A-1", p("case")), 2, "output case directory already exists"},
		{"case build, CRLF spec", build("A-2", p("case2"), "--spec", p("crlf.md")), 1, "pinned file is not UTF-8 with LF line endings and no BOM"},
		{"case build, missing flag", []string{"amber", "case", "build", "--repo", p("src")}, 2, `required flag(s) "case-id", "cutoff-commit"`},
		{"second case", build("A-3", p("case3"), "--cutoff-utc", "2026-01-16T00:00:00Z"), 0, ""},
		{"case verify", []string{"--json", "amber", "case", "verify", p("case"), "--pub", p("k.pub")}, 0, `"ok": true`},
		{"index init", []string{"amber", "index", "init", p("ix"), "--origin", "test.invalid/index", "--key-out", p("ix.key")}, 0, ""},
		{"index append", []string{"--json", "amber", "index", "append", p("ix"), "--key", p("ix.key"), "--case", p("case"), "--pub", p("k.pub")}, 0, `"index_version": 1`},
		{"index append twice", []string{"amber", "index", "append", p("ix"), "--key", p("ix.key"), "--case", p("case"), "--pub", p("k.pub")}, 1, "case already in the index"},
		{"index verify", []string{"--json", "amber", "index", "verify", p("ix"), "--pub", p("ix/index.pub")}, 0, `"entries": 1`},
		{"index prove", []string{"amber", "index", "prove", p("ix"), "A-1"}, 0, "c2sp.org/tlog-proof@v1\nextra "},
		{"index prove --json", []string{"--json", "amber", "index", "prove", p("ix"), "A-1"}, 0, `"proof": "c2sp.org/tlog-proof@v1\nextra `},
		{"index prove --out", []string{"--json", "amber", "index", "prove", p("ix"), "A-1", "--out", p("proof2")}, 0, `"out": "` + p("proof2") + `"`},
		{"index prove --out existing", []string{"amber", "index", "prove", p("ix"), "A-1", "--out", p("proof2")}, 2, ""},
		{"index verify-proof", []string{"--json", "amber", "index", "verify-proof", p("proof"), "--pub", p("ix/index.pub")}, 0, `"case_id": "A-1"`},
		{"summary", []string{"--json", "amber", "summary", p("case"), "--pub", p("k.pub"), "--key", p("k"), "--index", p("ix")}, 0, `"index_version": 1`},
		{"compare same", []string{"--json", "amber", "compare", p("case"), p("case/summary.yaml")}, 0, `"comparable": true`},
		{"compare other cutoff", []string{"--json", "amber", "compare", p("case"), p("case3")}, 1, `"comparable": false`},
		{"index retire", []string{"--json", "amber", "index", "retire", p("ix"), "--key", p("ix.key"), "--case-id", "A-1", "--date", "2026-03-01"}, 0, `"state": "retired:2026-03-01"`},
		{"index show", []string{"--json", "amber", "index", "show", p("ix")}, 0, `"index_version": 2`},
		{"index verify since", []string{"amber", "index", "verify", p("ix"), "--since", p("cp1")}, 0, "consistency proof checked"},
		{"run a retired case", []string{"amber", "run", p("case"), "--candidate", "x/y", "--pub", p("k.pub"), "--key", p("k"), "--index", p("ix"),
			"--sealed", "192.0.2.1:443", "--out", p("run"), "--", "/bin/true"}, -1, ""},
	} {
		t.Run(step.name, func(t *testing.T) {
			switch step.name {
			case "case build, CRLF spec":
				if err := os.WriteFile(p("crlf.md"), []byte("# core\r\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			case "index verify since":
				// cp1: the checkpoint after the first append, kept by a consumer.
			}
			code, out, errb := runCLI(t, step.args...)
			if step.code >= 0 && code != step.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, step.code, out, errb)
			}
			if step.name == "run a retired case" {
				// Where the sandbox runs, the index refuses the case (exit
				// 1); elsewhere the run cannot start at all (exit 2).
				want, why := 1, "case is retired"
				if (&amber.SandboxIsolation{}).Available() != nil {
					want, why = 2, "sandbox not available"
				}
				if code != want || !strings.Contains(errb, why) {
					t.Fatalf("run of a retired case: exit %d %q, want %d %q", code, errb, want, why)
				}
				if _, err := os.Stat(p("run")); !os.IsNotExist(err) {
					t.Errorf("refused run left %s", p("run"))
				}
			}
			if !strings.Contains(out+errb, step.want) {
				t.Errorf("output lacks %q:\nstdout: %s\nstderr: %s", step.want, out, errb)
			}
			if step.name == "index prove" {
				if err := os.WriteFile(p("proof"), []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if step.name == "index prove --out existing" {
				// The refused second write left the first proof as it was.
				first, _ := os.ReadFile(p("proof"))
				if b, _ := os.ReadFile(p("proof2")); len(first) == 0 || string(b) != string(first) {
					t.Errorf("%s holds %q, want the first proof", p("proof2"), b)
				}
			}
			if step.name == "index append" {
				b, _ := os.ReadFile(p("ix/checkpoint"))
				if err := os.WriteFile(p("cp1"), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestAmberCLIVerifyNamesTheCheck: a tampered case is refused with exit 1
// and the JSON names the failed check.
func TestAmberCLIVerifyNamesTheCheck(t *testing.T) {
	t.Parallel()
	d := amberFixture(t)
	p := func(n string) string { return filepath.Join(d, n) }
	if code, _, e := runCLI(t, "amber", "key", "gen", "--out", p("k")); code != 0 {
		t.Fatal(e)
	}
	if code, _, e := runCLI(t, "amber", "case", "build", "--repo", p("src"), "--cutoff-commit", "main", "--cutoff-utc", "2026-01-15T00:00:00Z",
		"--oracle", p("oracle"), "--profile", "test", "--case-id", "A-1", "--spec", p("CORE.md"), "--protocol", p("DIST.md"),
		"--key", p("k"), "--out", p("case")); code != 0 {
		t.Fatal(e)
	}
	for _, tc := range []struct {
		file, check string
	}{
		{"manifest.yaml", "manifest-signature"},
		{"base.bundle", "bundle-sha256"},
		{"oracle.pack", "oracle-sha256"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "case")
			if out, err := exec.Command("cp", "-a", p("case"), dir).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v %s", err, out)
			}
			f := filepath.Join(dir, tc.file)
			b, _ := os.ReadFile(f)
			b[len(b)/2] ^= 1
			if err := os.WriteFile(f, b, 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, _ := runCLI(t, "--json", "amber", "case", "verify", dir, "--pub", p("k.pub"))
			if code != 1 {
				t.Fatalf("exit %d, want 1: %s", code, out)
			}
			var res struct {
				OK     bool   `json:"ok"`
				Failed string `json:"failed"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			if res.OK || res.Failed != tc.check {
				t.Errorf("failed %q, want %q", res.Failed, tc.check)
			}
		})
	}
}

// TestDemoAmberStage runs the demo's AMBER stage (with the run where the
// sandbox is available).
func TestDemoAmberStage(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	got, err := demoAmberStage(t.Context(), &demoEnv{out: t.TempDir(), ids: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(got)
	if !strings.HasPrefix(got, "case A-demo-0001 manifest ") {
		t.Errorf("stage result %q", got)
	}
	if (&amber.SandboxIsolation{}).Available() == nil && !strings.Contains(got, "run valid_task_success, record verified by value") {
		t.Errorf("with the sandbox, the stage must run: %q", got)
	}
}
