package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// cliBinary is the cleanroom binary the tests share, built as make builds
// it (with the room binary beside it, stamped with the VCS revision), as
// "cleanroom" in a directory of its own, so a completion script can call it
// by name through PATH (testshared.Cleanroom).
func cliBinary(t *testing.T) (bin, dir string) {
	t.Helper()
	return testshared.Cleanroom(t)
}

// TestVersion: the revision printed is the checkout's HEAD as git itself
// reports it.
func TestVersion(t *testing.T) {
	t.Parallel()
	bin, _ := cliBinary(t)
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Module, Version, Revision string
		GoVersion                 string `json:"go_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("version --json: %v\n%s", err, out)
	}
	if v.Module != "github.com/cleanroom-dev/cleanroom" || v.Version == "" || !strings.HasPrefix(v.GoVersion, "go") {
		t.Errorf("version %+v", v)
	}
	head, err := exec.Command("git", "-C", testshared.RepoRoot(t), "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): no revision to compare", err)
	}
	if want := strings.TrimSpace(string(head)); v.Revision != want {
		// HEAD can move while another commit lands during the build; the
		// stamp is then an ancestor, never an unrelated string.
		if exec.Command("git", "-C", testshared.RepoRoot(t), "merge-base", "--is-ancestor", v.Revision, want).Run() != nil {
			t.Errorf("revision %q, git HEAD %s", v.Revision, want)
		}
	}
	text, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.Contains(string(text), "revision "+v.Revision) {
		t.Errorf("version text %q (%v)", text, err)
	}
}

// TestCompletion: each shell's script is valid for that shell, and bash
// and fish, asked to complete "cleanroom run re", offer exactly report and
// reveal (the names come from the command tree through the binary).
func TestCompletion(t *testing.T) {
	t.Parallel()
	bin, binDir := cliBinary(t)
	dir := t.TempDir()
	env := append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"))
	script := func(shell string) string {
		p := filepath.Join(dir, "cleanroom."+shell)
		out, err := exec.Command(bin, "completion", shell).Output()
		if err != nil || len(out) == 0 {
			t.Fatalf("completion %s: %v", shell, err)
		}
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		shell  string
		syntax []string // the shell's parse-only check
		query  string   // a script that prints the completions of "cleanroom run re"; "" if none here
		setup  string   // a file the shell's completion framework needs
	}{
		{"bash", []string{"bash", "-n"}, `source /usr/share/bash-completion/bash_completion
source SCRIPT
COMP_WORDS=(cleanroom run re); COMP_CWORD=2; COMP_LINE="cleanroom run re"; COMP_POINT=${#COMP_LINE}
__start_cleanroom cleanroom re run 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"`, "/usr/share/bash-completion/bash_completion"},
		{"zsh", []string{"zsh", "-n"}, "", ""},
		{"fish", []string{"fish", "--no-execute"}, `source SCRIPT; complete -C "cleanroom run re" | cut -f1`, ""},
	}
	for _, c := range cases {
		t.Run(c.shell, func(t *testing.T) {
			p := script(c.shell)
			if _, err := exec.LookPath(c.shell); err != nil {
				t.Skipf("%s is not installed (Debian package %s)", c.shell, c.shell)
			}
			if out, err := exec.Command(c.syntax[0], append(c.syntax[1:], p)...).CombinedOutput(); err != nil {
				t.Fatalf("%s rejects its completion script: %v\n%s", c.shell, err, out)
			}
			if c.query == "" {
				return
			}
			if c.setup != "" {
				if _, err := os.Stat(c.setup); err != nil {
					t.Skipf("%s is absent (Debian package bash-completion)", c.setup)
				}
			}
			q := exec.Command(c.shell, "-c", strings.ReplaceAll(c.query, "SCRIPT", p))
			q.Env = env
			out, err := q.Output()
			if err != nil {
				t.Fatalf("%s completion: %v", c.shell, err)
			}
			got := strings.Fields(string(out))
			if strings.Join(got, " ") != "report reveal" {
				t.Errorf("%s completes \"cleanroom run re\" to %q, want report reveal", c.shell, got)
			}
		})
	}
}

// TestManPages: one page per visible command, none for hidden ones, and
// each page carries the command's own synopsis and flags.
func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man")
	t.Setenv("SOURCE_DATE_EPOCH", "1767225600") // 2026-01-01
	code, out, errs := runCLI(t, "man", "--dir", dir)
	if code != 0 {
		t.Fatalf("man: %d %s%s", code, out, errs)
	}
	cases := []struct {
		page string
		want []string
	}{
		{"cleanroom.1", []string{".TH \"CLEANROOM\" \"1\" \"Jan 2026\"", "cleanroom-run(1)", "cleanroom-version(1)"}},
		{"cleanroom-run-report.1", []string{".TH \"CLEANROOM-RUN-REPORT\" \"1\"", "--html", "--replace", "self-contained"}},
		{"cleanroom-run-pin.1", []string{".TH \"CLEANROOM-RUN-PIN\" \"1\" \"Jan 2026\""}},
		{"cleanroom-completion-bash.1", []string{"bash"}},
		{"cleanroom-world-init.1", []string{"--root-label", "empty directory"}},
	}
	for _, c := range cases {
		b, err := os.ReadFile(filepath.Join(dir, c.page))
		if err != nil {
			t.Errorf("%s: %v", c.page, err)
			continue
		}
		for _, w := range c.want {
			if !bytes.Contains(b, []byte(w)) {
				t.Errorf("%s lacks %q", c.page, w)
			}
		}
	}
	for _, hidden := range []string{"cleanroom-man.1", "cleanroom-room-sealed-stage.1"} {
		if _, err := os.Stat(filepath.Join(dir, hidden)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a hidden command has a page: %s", hidden)
		}
	}
	if code, _, _ := runCLI(t, "man"); code != 2 {
		t.Errorf("man without --dir: exit %d, want 2", code)
	}
}

// TestRunReportCLI: the report of a revealed run, on stdout and into
// files; an existing file is refused unless --replace; no record is exit 1.
func TestRunReportCLI(t *testing.T) {
	t.Parallel()
	w := runWorld(t)
	if code, _, errs := runCLI(t, "run", "report", "--world", w); code != 1 || !strings.Contains(errs, "no run record") {
		t.Errorf("report without a run: exit %d %q, want 1 naming the rule", code, errs)
	}
	for _, step := range [][]string{
		{"run", "pin", "--world", w, "--reference", filepath.Join(w, "governance/reference-adapter.json")},
		{"run", "freeze", "--world", w, "--implementation", "candidate", "--files", "implementer/tally-candidate",
			"--binary", "implementer/tally-candidate", "--toolchain", "node", "--model", "m", "--tool-version", "t"},
		{"run", "reveal", "--world", w},
	} {
		if code, _, errs := runCLI(t, step...); code != 0 {
			t.Fatalf("%v: %d %s", step, code, errs)
		}
	}
	code, md, errs := runCLI(t, "run", "report", "--world", w)
	if code != 0 || !strings.HasPrefix(md, "# cleanroom run report") || !strings.Contains(md, "REVEALED") {
		t.Fatalf("report on stdout: %d %s\n%s", code, errs, md)
	}
	out := t.TempDir()
	html, mdf := filepath.Join(out, "r.html"), filepath.Join(out, "r.md")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"write both", []string{"--html", html, "--md", mdf}, 0, "wrote " + html},
		{"exists", []string{"--html", html}, 2, "--replace"},
		{"replace", []string{"--html", html, "--replace"}, 0, "wrote " + html},
		{"bad flag", []string{"--htm", html}, 2, "unknown flag"},
		{"no world", []string{"--world", filepath.Join(out, "nowhere")}, 2, "nowhere"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "report", "--world", w}, c.args...)
			code, stdout, stderr := runCLI(t, args...)
			if code != c.code || !strings.Contains(stdout+stderr, c.want) {
				t.Errorf("exit %d %q%q, want %d naming %q", code, stdout, stderr, c.code, c.want)
			}
		})
	}
	b, err := os.ReadFile(html)
	if err != nil || !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) {
		t.Errorf("html file: %v %.40q", err, b)
	}
	code, js, _ := runCLI(t, "run", "report", "--world", w, "--json")
	var v struct {
		Status string `json:"status"`
		Report struct {
			RunID string `json:"run_id"`
		} `json:"report"`
	}
	if code != 0 || json.Unmarshal([]byte(js), &v) != nil || v.Status != "REVEALED" || !strings.HasPrefix(v.Report.RunID, "brun-") {
		t.Errorf("--json: %d %+v\n%s", code, v, js)
	}
}

// TestExitCodes pins the table of docs/exit-codes.md with one invocation
// per row that needs no namespaces.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	w := runWorld(t)
	out := filepath.Join(t.TempDir(), "exists.md")
	if err := os.WriteFile(out, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "blind-run.json")
	if err := os.WriteFile(rec, []byte(`{"type":"TRVM-BLIND-IMPLEMENTATION-RUN-v3","type":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"ok", []string{"version"}, 0},
		{"ok: a check that passes", []string{"release", "verify", filepath.Join(w, "docs/spec/proof-wire"), "--holdout", filepath.Join(w, "governance/holdout")}, 0},
		{"refused: no run record", []string{"run", "report", "--world", w}, 1},
		{"refused: a record that breaks the strict reader", []string{"run", "id", rec}, 1},
		{"unusable: unknown flag", []string{"version", "--frobnicate"}, 2},
		{"unusable: wrong argument count", []string{"run", "id"}, 2},
		{"unusable: no such world", []string{"run", "verify", "--world", filepath.Join(w, "absent")}, 2},
		{"unusable: output exists", []string{"run", "report", "--world", w, "--md", out}, 2},
		{"unusable: a key that exists", []string{"amber", "key", "gen", "--out", out}, 2},
		{"unusable: a class not one of the six", []string{"run", "finding", "classify", "--world", w, "find-000000000000", "--class", "MAYBE_A_BUG", "--ruling", "x"}, 2},
		{"unusable: no such finding", []string{"run", "finding", "classify", "--world", w, "find-000000000000", "--class", "SPEC_GAP", "--ruling", "x"}, 2},
		// A --holdout that names no directory is not "no holdout".
		{"unusable: a --holdout that is not there", []string{"release", "verify", filepath.Join(w, "docs/spec/proof-wire"), "--holdout", filepath.Join(w, "governance/typo")}, 2},
		{"unusable: a --holdout that is a file", []string{"release", "issue", filepath.Join(w, "docs/spec/proof-wire"), "--holdout", out, "--spec-revision", "1", "--experiment-revision", "1", "--corpus-revision", "1"}, 2},
		{"unusable: room serve of no world", []string{"room", "serve", "--world", filepath.Join(w, "absent"), "--workspace", filepath.Join(t.TempDir(), "ws")}, 2},
		{"unusable: an amber flag value", []string{"amber", "index", "init", filepath.Join(t.TempDir(), "ix"), "--origin", "a b", "--key-out", filepath.Join(t.TempDir(), "k")}, 2},
		{"unusable: a sandbox bundle over an existing --out", []string{"sandbox", "bundle", "--out", t.TempDir(), "--", "/bin/true"}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "unusable: output exists" {
				if code, _, errs := runCLI(t, "run", "pin", "--world", w, "--reference", filepath.Join(w, "governance/reference-adapter.json")); code != 0 {
					t.Fatalf("pin: %d %s", code, errs)
				}
			}
			code, stdout, stderr := runCLI(t, c.args...)
			if code != c.code {
				t.Errorf("%v: exit %d, want %d\n%s%s", c.args, code, c.code, stdout, stderr)
			}
			if code == 0 || slices.Equal(c.args[:2], []string{"room", "serve"}) {
				return // (room serve's stdout is the MCP session: below)
			}
			// With --json the same failure prints one JSON document on
			// stdout: the command's own, or the error with its exit code.
			// (before any "--": after it, --json is the command's argument)
			args := slices.Clone(c.args)
			at := slices.Index(args, "--")
			if at < 0 {
				at = len(args)
			}
			code, stdout, _ = runCLI(t, slices.Insert(args, at, "--json")...)
			v, err := evidence.Read([]byte(stdout))
			if err != nil {
				t.Fatalf("%v --json: stdout is not one JSON document (%v): %q", c.args, err, stdout)
			}
			if o, ok := v.(*evidence.Object); ok {
				if ec, ok := o.Get("exit_code"); ok && ec != float64(code) {
					t.Errorf("%v --json: exit_code %v in the document, exit %d", c.args, ec, code)
				}
			}
		})
	}
	// Where stdout is another party's stream, a failure adds nothing to it.
	for _, args := range [][]string{
		{"sandbox", "exec", "--json", "--frobnicate", "--", "true"},
		{"room", "serve", "--json", "--frobnicate"},
	} {
		if code, stdout, _ := runCLI(t, args...); code != 2 || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q; want 2 and nothing on stdout", args, code, stdout)
		}
	}
}

// TestDemoReport: the function the demo calls writes both files of the
// run it is given, and never over existing ones.
func TestDemoReport(t *testing.T) {
	t.Parallel()
	w := runWorld(t)
	var log bytes.Buffer
	if _, err := runDemoCycle(context.Background(), w, experiment.Environment{Toolchain: "node", Model: "scripted", ToolVersion: "test"}, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	out := t.TempDir()
	line, err := demoReport(context.Background(), w, out)
	if err != nil || !strings.HasPrefix(line, "REVEALED brun-") {
		t.Fatalf("demoReport: %q %v", line, err)
	}
	for _, f := range []string{"report.html", "report.md"} {
		if b, err := os.ReadFile(filepath.Join(out, f)); err != nil || !bytes.Contains(b, []byte("CANDIDATE_FROZEN")) {
			t.Errorf("%s: %v", f, err)
		}
	}
	if _, err := demoReport(context.Background(), w, out); !errors.Is(err, os.ErrExist) {
		t.Errorf("a second report into the same directory: %v, want os.ErrExist", err)
	}
}

// run report --html A --md B writes both or neither: B existing (or
// unwritable) must not leave a new A behind, which would refuse the retry.
func TestRunReportWritesBothOrNeither(t *testing.T) {
	t.Parallel()
	w := runWorld(t)
	if code, _, errs := runCLI(t, "run", "pin", "--world", w, "--reference", filepath.Join(w, "governance/reference-adapter.json")); code != 0 {
		t.Fatalf("pin: %d %s", code, errs)
	}
	out := t.TempDir()
	html := filepath.Join(out, "r.html")
	exists := filepath.Join(out, "exists.md")
	if err := os.WriteFile(exists, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		md   string
		want string
	}{
		{"md exists", exists, "--replace"},
		{"md on a full file system", filepath.Join(testshared.FullFS(t), "r.md"), "no space left"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "run", "report", "--world", w, "--html", html, "--md", c.md)
			if code != 2 || !strings.Contains(stdout+stderr, c.want) {
				t.Errorf("exit %d %q%q, want 2 naming %q", code, stdout, stderr, c.want)
			}
			if _, err := os.Stat(html); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a failed report left %s behind (%v)", html, err)
			}
			if b, _ := os.ReadFile(exists); string(b) != "kept" {
				t.Errorf("%s changed: %q", exists, b)
			}
		})
	}
}
