package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/amber"
	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// groups lists the command path (without "cleanroom") of every command
// group of the tree, the root included, and one subcommand of each.
func groups(c *cobra.Command, prefix []string, out map[string][]string) {
	if !c.HasSubCommands() {
		return
	}
	for _, s := range c.Commands() {
		if s.Hidden || s.Name() == "help" {
			continue
		}
		if _, ok := out[strings.Join(prefix, " ")]; !ok {
			out[strings.Join(prefix, " ")] = append([]string{}, append(prefix, s.Name())...)
		}
		groups(s, append(append([]string{}, prefix...), s.Name()), out)
	}
}

// A word that names no command is refused at every level of the tree, not
// only at the root: exit 2, "unknown command", the group named; a typo of
// a real command names it ("did you mean"); with --json stdout holds the
// JSON error document.
func TestUnknownSubcommandAtEveryLevel(t *testing.T) {
	t.Parallel()
	all := map[string][]string{}
	groups(newRootCmd(), nil, all)
	if len(all) < 8 {
		t.Fatalf("found only %d command groups: %v", len(all), all)
	}
	for group, sub := range all {
		prefix := sub[:len(sub)-1]
		path := strings.TrimSpace("cleanroom " + group)
		t.Run(path, func(t *testing.T) {
			code, out, errs := runCLI(t, append(append([]string{}, prefix...), "zzqqx")...)
			if code != 2 || !strings.Contains(errs, `cleanroom: unknown command "zzqqx" for "`+path+`"`) || out != "" {
				t.Errorf("unknown word: exit %d\nstdout %q\nstderr %q", code, out, errs)
			}
			// A typo: the last letter of a real command doubled.
			name := sub[len(sub)-1]
			typo := name + name[len(name)-1:]
			code, _, errs = runCLI(t, append(append([]string{}, prefix...), typo)...)
			if code != 2 || !strings.Contains(errs, "did you mean") || !strings.Contains(errs, `"`+name+`"`) {
				t.Errorf("typo %q: exit %d, stderr %q", typo, code, errs)
			}
			code, out, _ = runCLI(t, append(append([]string{"--json"}, prefix...), "zzqqx")...)
			v, err := evidence.ReadObject([]byte(out))
			if code != 2 || err != nil {
				t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
			}
			msg, _ := v.Get("error")
			ec, _ := v.Get("exit_code")
			if s, _ := msg.(string); !strings.Contains(s, `unknown command "zzqqx"`) || ec != float64(2) {
				t.Errorf("--json error document: %s", out)
			}
		})
	}
}

// A wrong number of arguments is a usage error that shows the usage line.
func TestWrongArgumentCountShowsUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  []string
		usage string
	}{
		{[]string{"run", "verify", "extra"}, "usage: cleanroom run verify [flags]"},
		{[]string{"run", "id"}, "usage: cleanroom run id FILE [flags]"},
		{[]string{"run", "finding", "classify"}, "usage: cleanroom run finding classify ID --class C --ruling TEXT [flags]"},
	} {
		code, _, errs := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errs, "cleanroom: wrong arguments: ") || !strings.Contains(errs, tc.usage) {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errs)
		}
		if strings.Count(errs, "cleanroom:") != 1 {
			t.Errorf("%v: the prefix is repeated: %q", tc.args, errs)
		}
	}
}

// Run from inside a world's subdirectory, a run command finds the world as
// git finds a repository, and says which; outside any world it says to
// pass --world. A bare governance/ above does not make a world.
func TestWorldFoundFromSubdirectory(t *testing.T) {
	w := runWorld(t)
	sub := filepath.Join(w, "implementer")
	t.Chdir(sub)
	code, out, errs := runCLI(t, "run", "pin", "--reference", filepath.Join(w, "governance", "reference-adapter.json"))
	if code != 0 || !strings.Contains(out, "PINNED brun-") {
		t.Fatalf("pin from %s: exit %d\n%s%s", sub, code, out, errs)
	}
	real, _ := filepath.EvalSymlinks(w)
	if !strings.Contains(errs, "cleanroom: world "+real+" ") {
		t.Errorf("the world found above is not named on stderr: %q", errs)
	}
	if _, err := os.Stat(filepath.Join(w, "governance", experiment.RecordFileName)); err != nil {
		t.Errorf("the pin did not write the world's record: %v", err)
	}
	if _, err := os.Stat(filepath.Join(sub, "governance")); err == nil {
		t.Errorf("the pin wrote a state root into the subdirectory")
	}
	if code, out, _ := runCLI(t, "run", "status"); code != 0 || !strings.Contains(out, "PINNED") {
		t.Errorf("status from a subdirectory: exit %d\n%s", code, out)
	}

	// Outside any world (a bare governance/ above is not one): exit 2,
	// naming --world, and nothing created.
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(outside, "governance"), 0o755); err != nil {
		t.Fatal(err)
	}
	deeper := filepath.Join(outside, "a", "b")
	if err := os.MkdirAll(deeper, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(deeper)
	for _, args := range [][]string{{"run", "status"}, {"run", "abort", "--reason", "x"}, {"--json", "run", "list"}} {
		code, out, errs := runCLI(t, args...)
		if code != 2 || !strings.Contains(out+errs, "not inside a world") || !strings.Contains(out+errs, "--world") {
			t.Errorf("%v outside a world: exit %d\n%s%s", args, code, out, errs)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(outside, "governance")); len(ents) != 0 {
		t.Errorf("a command outside any world wrote into an unrelated governance/: %v", ents)
	}
}

// amber case build refuses a cutoff earlier than the cutoff commit's
// committer date, naming the rule, and builds it with the override.
func TestAmberCutoffBeforeCommitCLI(t *testing.T) {
	t.Parallel()
	dir := amberFixture(t) // committed at 2026-01-01T00:00:00Z
	p := func(s string) string { return filepath.Join(dir, s) }
	if code, _, e := runCLI(t, "amber", "key", "gen", "--out", p("k"), "--identity", "producer@example"); code != 0 {
		t.Fatal(e)
	}
	args := []string{"amber", "case", "build", "--repo", p("src"), "--cutoff-commit", "main", "--cutoff-utc", "2025-12-31T00:00:00Z",
		"--oracle", p("oracle"), "--profile", "p", "--case-id", "A-0001", "--spec", p("CORE.md"), "--protocol", p("DIST.md"), "--key", p("k"), "--out", p("case")}
	code, _, errs := runCLI(t, args...)
	if code != 1 || !strings.Contains(errs, "cleanroom: cutoff_utc is earlier than the cutoff commit's committer date") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if _, err := os.Lstat(p("case")); err == nil {
		t.Errorf("a refused build left the case directory")
	}
	code, _, errs = runCLI(t, append(args, "--cutoff-before-commit-date", "pushed 2025-12-30 per the forge log")...)
	if code != 0 {
		t.Fatalf("with the override: exit %d %s", code, errs)
	}
	b, err := os.ReadFile(p("case/manifest.yaml"))
	if err != nil || !strings.Contains(string(b), amber.ProvenanceCutoffOverride+": pushed 2025-12-30 per the forge log") {
		t.Errorf("the override is not recorded in the manifest: %v\n%s", err, b)
	}
}

// The shell completes flag values: the finding classes, and directory names
// for the flags that take a directory (cobra's directive
// ShellCompDirectiveFilterDirs, which the generated scripts honour).
func TestCompletionOfFlagValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"run", "finding", "classify", "--class", ""}, append(append([]string{}, holdout.Classes...), ":4")},
		{[]string{"run", "question", "add", "--class", "SPEC"}, []string{"SPEC_GAP", "SPEC_IMPLEMENTATION_CONFLICT", ":4"}},
		{[]string{"run", "status", "--world", ""}, []string{":16"}},
		{[]string{"run", "reveal", "--holdout", ""}, []string{":16"}},
		{[]string{"amber", "case", "build", "--oracle", ""}, []string{":16"}},
	} {
		code, out, _ := runCLI(t, append([]string{"__complete"}, tc.args...)...)
		for _, w := range tc.want {
			if code != 0 || !strings.Contains(out, w+"\n") {
				t.Errorf("completing %v: exit %d, want %q in\n%s", tc.args, code, w, out)
			}
		}
	}
}

// The same fault gets the same exit code from every command: a FIFO, a
// regular file, a dangling link or nothing at all where a directory is
// required is input that cannot be read (exit 2), named once.
func TestDirectoryInputFaultsExitTwo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo, file, dangling, none := filepath.Join(dir, "fifo"), filepath.Join(dir, "file"), filepath.Join(dir, "dangling"), filepath.Join(dir, "none")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(none, dangling); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(testshared.RepoRoot(t), "testdata", "world", "docs", "spec", "proof-wire")
	for _, in := range []string{fifo, file, dangling, none} {
		for _, args := range [][]string{
			{"holdout", "commitment", in, "--package", pkg},
			{"holdout", "check", in, "--package", pkg},
			{"release", "verify", pkg, "--holdout", in},
		} {
			code, out, errs := runCLI(t, args...)
			if code != 2 || !strings.Contains(errs, "cleanroom: ") || strings.Count(out+errs, in) != 1 {
				t.Errorf("%v: exit %d (want 2, the path named once)\n%s%s", args, code, out, errs)
			}
		}
	}
}

// Every document the help texts and the README cite ships in this
// repository: each docs/….md path exists, and each section of
// docs/formats.md cited by number has its heading, so nothing dangles for a
// user who has only the repository.
func TestCitedDocumentsShip(t *testing.T) {
	t.Parallel()
	root := testshared.RepoRoot(t)
	var texts []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		texts = append(texts, c.Short, c.Long)
		c.Flags().VisitAll(func(f *pflag.Flag) { texts = append(texts, f.Usage) })
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd())
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	texts = append(texts, string(readme))
	// Sources too: a text printed at run time (run pin's note) cites as well.
	srcs, _ := filepath.Glob(filepath.Join(root, "cmd", "cleanroom", "*.go"))
	for _, p := range srcs {
		if !strings.HasSuffix(p, "_test.go") {
			b, _ := os.ReadFile(p)
			texts = append(texts, string(b))
		}
	}
	all := strings.Join(texts, "\n")
	formats, err := os.ReadFile(filepath.Join(root, "docs", "formats.md"))
	if err != nil {
		t.Fatal(err)
	}
	headings := regexp.MustCompile(`(?m)^#+ (?:(\d+(?:\.\d+)?)\.? |(Distribution §[0-9.]+):)`)
	have := map[string]bool{}
	for _, m := range headings.FindAllStringSubmatch(string(formats), -1) {
		have[m[1]+m[2]] = true
	}
	cited := 0
	for _, m := range regexp.MustCompile(`docs/formats\.md §(\d+(?:\.\d+)?)`).FindAllStringSubmatch(all, -1) {
		cited++
		if !have[m[1]] {
			t.Errorf("formats.md §%s is cited and has no heading", m[1])
		}
	}
	for _, m := range regexp.MustCompile(`Distribution §[0-9]+(?:\.[0-9]+)?`).FindAllString(all, -1) {
		if !have[m] {
			t.Errorf("%s is cited and docs/formats.md has no section for it", m)
		}
	}
	if cited < 4 {
		t.Errorf("only %d citations of docs/formats.md found: the test reads the wrong texts", cited)
	}
	for _, m := range regexp.MustCompile(`docs/[A-Za-z0-9_/-]+\.(?:md|png)`).FindAllString(all, -1) {
		if _, err := os.Stat(filepath.Join(root, m)); err != nil {
			t.Errorf("%s is cited and does not exist", m)
		}
	}
	for _, gone := range []string{"TRVM-FORMATS §", "DESIGN.md", "AMBER-FORMATS"} {
		if strings.Contains(all, gone) {
			t.Errorf("%q is cited: a document the repository does not ship", gone)
		}
	}
}

// Human output spells values for people, never as Go prints them.
func TestPlainValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    any
		want string
	}{
		{nil, "none"}, {"x", "x"}, {float64(1000000), "1000000"}, {0.5, "0.5"}, {true, "true"}, {3, "3"},
		{[]any{"a", float64(2)}, `["a",2]`},
	} {
		if got := plainValue(tc.v); got != tc.want {
			t.Errorf("plainValue(%#v) = %q, want %q", tc.v, got, tc.want)
		}
	}
	if got := plainMap(map[string]float64{"tests_pass": 1, "a": 0.25}); got != "a=0.25, tests_pass=1" {
		t.Errorf("plainMap = %q", got)
	}
	if got := plainMap(map[string]int{}); got != "none" {
		t.Errorf("plainMap of nothing = %q", got)
	}
}

// A flag value the parser refuses is named in words, not in strconv's.
func TestFlagValueErrorsInWords(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "question", "add", "--revision", "abc"}, `invalid argument "abc" for "--revision" flag: not an integer`},
		{[]string{"release", "issue", "x", "--spec-revision", "99999999999999999999"}, `invalid argument "99999999999999999999" for "--spec-revision" flag: out of range`},
	} {
		code, _, errs := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Contains(errs, "strconv") {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errs)
		}
	}
}
