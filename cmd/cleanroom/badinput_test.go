package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/amber"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/sign"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
)

// The kinds of argument a bad input is given to.
const (
	slotFile = "file" // an input file the command reads
	slotDir  = "dir"  // a directory: read, or made (absent or empty)
	slotOut  = "out"  // an output file, created exclusively
	slotNone = ""     // not a path
)

// placeholderKinds classes the placeholders of the Use lines, and
// flagKinds the string flags, by name: the same name means the same kind of
// argument across the tree. A command that introduces a new one fails
// TestEveryCommandBadInputs until it is classed here.
var (
	placeholderKinds = map[string]string{
		"FILE": slotFile, "index.pub": slotFile, "RECORD": slotFile, "RUN.json": slotFile, "DOC": slotFile, "PROOF": slotFile,
		"A": slotFile, "B": slotFile, "A.json": slotFile, "B.json": slotFile,
		"DIR": slotDir, "WORKSPACE": slotDir, "CASEDIR": slotDir, "PKGDIR": slotDir, "EXPERIMENT_DIR": slotDir, "NEWDIR": slotDir,
		"ID": slotNone, "CASE_ID": slotNone,
	}
	flagKinds = map[string]string{
		"pub": slotFile, "key": slotFile, "sign-key": slotFile, "index-pub": slotFile, "signer-key": slotFile,
		"schema": slotFile, "since": slotFile, "spec": slotFile, "protocol": slotFile, "summary": slotFile,
		"runs": slotFile, "observations": slotFile, "reference": slotFile, "manifest": slotFile,
		"cutoff-rule-output": slotFile, "challenges": slotFile, "resume": slotFile,
		"repo": slotDir, "oracle": slotDir, "case": slotDir, "from": slotDir, "package": slotDir,
		"holdout": slotDir, "world": slotDir, "index": slotDir, "results": slotDir, "home": slotDir,
		"state-root": slotDir, "state-dir": slotDir, "scratch": slotDir, "workspace": slotDir,
		"sessions": slotDir, "dir": slotDir, "into": slotDir, "out": slotDir,
		"key-out": slotOut, "transcript": slotOut, "record": slotOut, "html": slotOut, "md": slotOut,
		"manifest-out": slotOut,
		// Not paths.
		"allow": slotNone, "available-info": slotNone, "candidate-input": slotNone, "case-id": slotNone,
		"cutoff-before-commit-date": slotNone, "cutoff-commit": slotNone, "cutoff-rule": slotNone,
		"cutoff-utc": slotNone, "eligibility-evidence": slotNone, "leak-check": slotNone,
		"leak-check-date": slotNone, "leak-check-result": slotNone, "producer": slotNone, "profile": slotNone,
		"provenance": slotNone, "topology-evidence": slotNone, "topology-rule": slotNone, "leak-date": slotNone,
		"retired": slotNone, "origin": slotNone, "date": slotNone, "identity": slotNone, "candidate": slotNone,
		"control": slotNone, "env": slotNone, "sealed": slotNone, "kind": slotNone, "plan-sha256": slotNone,
		"run": slotNone, "run-sha256": slotNone, "expect-implementation": slotNone, "expect-release": slotNone,
		"expect": slotNone, "note": slotNone, "root-label": slotNone, "allow-host": slotNone, "bind-ro": slotNone,
		"resolve": slotNone, "api-key-env": slotNone, "endpoint": slotNone, "model": slotNone,
		"request-field": slotNone, "reason": slotNone, "binary": slotNone, "command": slotNone, "files": slotNone,
		"implementation": slotNone, "tool-version": slotNone, "toolchain": slotNone, "package-files": slotNone,
		"class": slotNone, "ruling": slotNone, "question": slotNone, "why": slotNone, "memory": slotNone,
		"net": slotNone, "package-id": slotNone,
	}
	// Where one command gives a name another kind.
	commandFlagKinds = map[string]string{
		"cleanroom run report --transcript": slotFile, // the transcript to summarise
	}
)

// slot is one argument of one command a bad input is given to.
type slot struct {
	flag string // the flag's name, or "" for a positional argument
	pos  int    // the positional argument's index
	kind string
}

// commandSlots lists the path arguments of a leaf command: its positional
// placeholders (from the Use line) and its string flags, local and
// inherited. Names no table classes are returned in unknown.
func commandSlots(c *cobra.Command) (pos []string, slots []slot, unknown []string) {
	toks := strings.Fields(c.Use)[1:]
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t == "--" {
			break // the command the command runs
		}
		if t == "|" || t == "[flags]" {
			continue
		}
		if bare := strings.TrimLeft(t, "[("); strings.HasPrefix(bare, "-") {
			// A flag: its value follows unless the flag closes its group.
			if !strings.HasSuffix(t, "]") && !strings.HasSuffix(t, ")") {
				i++
			}
			continue
		}
		name := strings.TrimRight(strings.Trim(t, "[]()"), ".…")
		kind, ok := placeholderKinds[name]
		if !ok {
			unknown = append(unknown, "placeholder "+name)
			continue
		}
		pos = append(pos, kind)
		if kind != slotNone {
			slots = append(slots, slot{pos: len(pos) - 1, kind: kind})
		}
	}
	seen := map[string]bool{}
	visit := func(f *pflag.Flag) {
		if seen[f.Name] || !slices.Contains([]string{"string", "stringSlice", "stringArray"}, f.Value.Type()) {
			return
		}
		seen[f.Name] = true
		kind, ok := commandFlagKinds[c.CommandPath()+" --"+f.Name]
		if !ok {
			kind, ok = flagKinds[f.Name]
		}
		if !ok {
			unknown = append(unknown, "flag --"+f.Name)
			return
		}
		if kind != slotNone {
			slots = append(slots, slot{flag: f.Name, kind: kind})
		}
	}
	c.LocalFlags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	return pos, slots, unknown
}

// fillFlags lists the flags of c that TestEveryCommandBadInputs fills with
// a good value when the bad input goes elsewhere: the required ones, the
// world of every run command, and what a command requires by its own check.
func fillFlags(c *cobra.Command) []string {
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if _, req := f.Annotations[cobra.BashCompOneRequiredFlag]; req {
			names = append(names, f.Name)
		}
	})
	if c.Flags().Lookup("world") != nil {
		names = append(names, "world")
	}
	extra := map[string][]string{
		"cleanroom run abort":      {"reason"},
		"cleanroom package emit":   {"from", "into", "expect"},
		"cleanroom package verify": {"expect"},
		"cleanroom fleet bind":     {"results", "kind", "run", "run-sha256", "plan-sha256"},
		"cleanroom room serve":     {"workspace"},
		"cleanroom room drive":     {"workspace"},
		"cleanroom room agent":     {"workspace", "transcript"},
		"cleanroom amber run":      {"candidate", "pub", "key", "index", "sealed", "out"},
		"cleanroom release issue":  {"spec-revision", "experiment-revision", "corpus-revision"},
	}
	for _, n := range extra[c.CommandPath()] {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// leafCommands returns every runnable command of the tree without
// subcommands: what a user can run.
func leafCommands(c *cobra.Command) []*cobra.Command {
	if !c.HasSubCommands() {
		return []*cobra.Command{c}
	}
	var out []*cobra.Command
	for _, s := range c.Commands() {
		out = append(out, leafCommands(s)...)
	}
	return out
}

// TestEveryCommandBadInputs walks every command of the tree and gives each
// of its path arguments the same bad inputs — a FIFO no writer opens, a
// directory, a dangling symbolic link, a file of garbage — one at a time,
// the other arguments left out or given a placeholder. One fault, one exit
// code, whichever command meets it (docs/exit-codes.md):
//
//   - a FIFO, a dangling link, or a directory where a file is read: the
//     input cannot be read, exit 2; a FIFO, a regular file or a dangling
//     link where a directory is expected, or over an output: exit 2;
//   - garbage in a file the command reads: the bytes were read and a rule
//     says no, exit 1; so is a file over the size its reader takes (a
//     sparse 1 GiB file: refused by its size, never read).
//
// The code is checked where the bad input is what stopped the command (its
// message names the path); a run stopped first by another argument says
// nothing of this fault, and the fillers must keep those a minority.
//
// Never a panic, never a wait on the FIFO (each run has 20 s).
func TestEveryCommandBadInputs(t *testing.T) {
	dir := t.TempDir()
	// Each run gets its own bad inputs: a FIFO one run left open must not
	// pair with the next run's.
	n := 0
	makeInputs := func() (fifo, adir, dangling, garbage string) {
		n++
		d := filepath.Join(dir, fmt.Sprintf("bad-%d", n))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		fifo, adir, dangling, garbage = filepath.Join(d, "fifo"), filepath.Join(d, "adir"), filepath.Join(d, "dangling"), filepath.Join(d, "garbage")
		if err := unix.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(adir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(d, "nothing-here"), dangling); err != nil {
			t.Fatal(err)
		}
		// Not JSON, not YAML, not a key, not a git bundle: bytes no reader takes.
		if err := os.WriteFile(garbage, []byte("\x00\x01garbage{[\xff\xfe\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return fifo, adir, dangling, garbage
	}
	// What the other arguments get, so that the bad input is what stops
	// the command: a world with an issued release, a key pair, an index,
	// an empty directory, a fresh path for outputs, words for the rest.
	w := runWorld(t)
	key := filepath.Join(dir, "k")
	if err := sign.GenerateKeyWithComment(key, "t"); err != nil {
		t.Fatal(err)
	}
	ix := filepath.Join(dir, "ix")
	if _, err := amber.InitIndex(ix, "test.invalid/index", filepath.Join(dir, "ix.key")); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	text := filepath.Join(dir, "text.md")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(text, []byte("text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := 0
	good := func(name string) string {
		switch name {
		case "world":
			return w
		case "package":
			return filepath.Join(w, "docs", "spec", "proof-wire")
		case "holdout", "challenges":
			return filepath.Join(w, "governance", "holdout")
		case "pub", "index-pub", "signer-key":
			return key + ".pub"
		case "key", "sign-key":
			return key
		case "index":
			return ix
		case "case", "repo", "oracle", "from", "results", "home", "state-root", "state-dir", "scratch", "sessions", "dir":
			return empty
		case "spec", "protocol", "cutoff-rule-output", "observations", "runs", "reference", "manifest", "schema", "since", "summary", "resume":
			return text
		case "into", "out", "key-out", "transcript", "workspace", "record", "html", "md", "manifest-out":
			fresh++
			return filepath.Join(dir, fmt.Sprintf("fresh-%d", fresh))
		case "spec-revision", "experiment-revision", "corpus-revision":
			return "1"
		case "retired", "date", "leak-date":
			return "2026-01-01"
		case "cutoff-utc":
			return "2026-01-15T00:00:00Z"
		case "origin":
			return "test.invalid/index"
		case "sealed":
			return "127.0.0.1:9"
		case "endpoint":
			return "http://127.0.0.1:9/v1"
		case "expect":
			return "bpkg-" + strings.Repeat("0", 64)
		case "run-sha256", "plan-sha256":
			return strings.Repeat("0", 64)
		case "kind":
			return "blind"
		case "candidate":
			return "p/m"
		}
		return "x"
	}
	filler := map[string]string{slotFile: text, slotDir: empty, slotNone: "x"}
	faults := []struct {
		name string
		path func() string
		want map[string]int // by slot kind; absent: not asserted
	}{
		{"fifo", func() string { p, _, _, _ := makeInputs(); return p }, map[string]int{slotFile: 2, slotDir: 2, slotOut: 2}},
		{"directory", func() string { _, p, _, _ := makeInputs(); return p }, map[string]int{slotFile: 2, slotOut: 2}},
		{"dangling link", func() string { _, _, p, _ := makeInputs(); return p }, map[string]int{slotFile: 2, slotDir: 2, slotOut: 2}},
		{"garbage", func() string { _, _, _, p := makeInputs(); return p }, map[string]int{slotFile: 1, slotDir: 2, slotOut: 2}},
		// Over every cap a file argument has (the largest, a transcript's,
		// is 256 MiB): its reader refuses it by its size, before reading
		// it, as it refuses garbage. Sparse: it costs no disk, and a
		// reader that read it would show in the suite's time.
		{"too large", func() string {
			p, _, _, _ := makeInputs()
			return sparseFile(t, filepath.Join(filepath.Dir(p), "too-large"), 1<<30)
		}, map[string]int{slotFile: 1}},
	}
	leaves := leafCommands(newRootCmd())
	if len(leaves) < 60 {
		t.Fatalf("found only %d commands", len(leaves))
	}
	var runs, named int
	for _, c := range leaves {
		path := c.CommandPath()
		pos, slots, unknown := commandSlots(c)
		if len(unknown) > 0 {
			t.Errorf("%s: %s not classed as a path or not (placeholderKinds, flagKinds in badinput_test.go)", path, strings.Join(unknown, ", "))
		}
		words := strings.Fields(path)[1:]
		for _, s := range slots {
			for _, f := range faults {
				want, asserted := f.want[s.kind]
				if !asserted {
					continue
				}
				bad := f.path()
				args := slices.Clone(words)
				for i, k := range pos {
					v := filler[k]
					if s.flag == "" && s.pos == i {
						v = bad
					}
					args = append(args, v)
				}
				for _, name := range fillFlags(c) {
					if name != s.flag && !(s.flag == "package" && name == "world") {
						args = append(args, "--"+name, good(name))
					}
				}
				if s.flag == "package" && c.Flags().Lookup("expect") != nil {
					args = append(args, "--expect", good("expect"))
				}
				if s.flag != "" {
					args = append(args, "--"+s.flag, bad)
				}
				if strings.Contains(c.Use, " -- ") {
					args = append(args, "--", "/bin/true")
				}
				name := fmt.Sprintf("%s %s %s", path, s, f.name)
				code, stderr, done := runBounded(args, bad)
				runs++
				if !done {
					t.Errorf("%s: still running after 20s (a FIFO opened for reading blocks until a writer comes)", name)
					continue
				}
				if strings.Contains(stderr, "panic") {
					t.Errorf("%s: panicked:\n%s", name, stderr)
					continue
				}
				met := strings.Contains(stderr, bad)
				if met {
					named++
				} else if testing.Verbose() {
					// Stopped by another argument first: its code is not
					// this fault's.
					t.Logf("%s: not reached: exit %d: %s", name, code, strings.TrimSpace(stderr))
				}
				if met && code != want {
					t.Errorf("%s: exit %d, want %d (args %q)\n%s", name, code, want, args, stderr)
				}
			}
		}
	}
	// The fillers must leave most bad inputs reached, or the test would
	// check only how commands refuse a missing argument.
	t.Logf("%d runs over %d commands; %d stopped by the bad input itself (named in the message)", runs, len(leaves), named)
	if named*2 < runs {
		t.Errorf("only %d of %d runs were stopped by the bad input", named, runs)
	}
}

// sparseFile makes a file of size bytes at p that holds no data: larger
// than any cap at no cost in disk.
func sparseFile(t *testing.T, p string, size int64) string {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func (s slot) String() string {
	if s.flag != "" {
		return "--" + s.flag
	}
	return fmt.Sprintf("arg %d", s.pos+1)
}

// runBounded runs the command line in this process, as a user would see
// it, giving up after 20 s; a run still blocked opening the FIFO at bad is
// then released by a writer that comes and goes, so that it ends.
func runBounded(args []string, bad string) (code int, stderr string, done bool) {
	type result struct {
		code   int
		stderr string
	}
	ch := make(chan result, 1)
	go func() {
		var out, errb strings.Builder
		defer func() {
			if p := recover(); p != nil {
				ch <- result{-1, fmt.Sprintf("panic: %v", p)}
			}
		}()
		c := execute(args, &out, &errb)
		ch <- result{c, errb.String()}
	}()
	select {
	case r := <-ch:
		return r.code, r.stderr, true
	case <-time.After(20 * time.Second):
		if fd, err := unix.Open(bad, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); err == nil {
			unix.Close(fd)
		}
		return 0, "", false
	}
}

// Faults that neighbour each other exit with one code whichever command
// meets them: a world with no release, and a holdout directory with no
// INDEX.json, are input that is not there (2) for every command that reads
// them — they were 1 from `run pin` and `holdout commitment`.
func TestNeighbouringFaultsOneCode(t *testing.T) {
	w := filepath.Join(t.TempDir(), "world")
	if err := os.CopyFS(w, os.DirFS(filepath.Join(testshared.RepoRoot(t), "testdata", "world"))); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(w, "docs", "spec", "proof-wire")
	noIndex := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"run pin, no release", []string{"run", "pin", "--world", w}, "SPEC-RELEASE.json"},
		{"release verify, no release", []string{"release", "verify", pkg}, "SPEC-RELEASE.json"},
		{"holdout commitment, no INDEX.json", []string{"holdout", "commitment", noIndex, "--package", pkg}, "INDEX.json"},
		{"holdout check, no INDEX.json", []string{"holdout", "check", noIndex, "--package", pkg}, "INDEX.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, c.args...)
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want 2 naming %s:\n%s", code, c.want, stderr)
			}
		})
	}
}

// TestFaultsClassedWhereMade: faults a command used to re-class by hand
// exit with the code every other command gives the same fault, now that the
// class is decided where the error is made (docs/exit-codes.md). Each case
// above the last two was a wrong code: a --since checkpoint over its cap
// was unusable (2), a missing --resume transcript was "refused" (1), a
// bundle --out under a missing directory too, a package schema of garbage
// was unusable (2) for score, check and interop and refused (1) for
// fixture, a FIFO as the world's declaration was refused (1) for the
// findings register only.
func TestFaultsClassedWhereMade(t *testing.T) {
	t.Parallel()
	w := runWorld(t)
	dir := t.TempDir()
	pkg := filepath.Join(w, "docs", "spec", "proof-wire")
	holdoutDir := filepath.Join(w, "governance", "holdout")
	garbage := filepath.Join(dir, "garbage.jsonl")
	if err := os.WriteFile(garbage, []byte("\x00\x01garbage{[\xff\xfe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(dir, "absent.jsonl")
	drive := func(resume string) []string {
		return []string{"room", "drive", "--resume", resume, "--package", pkg, "--expect", "bpkg-" + strings.Repeat("0", 64),
			"--model", "m", "--endpoint", "http://127.0.0.1:9/v1", "--api-key-env", "CLEANROOM_TEST_UNSET_KEY"}
	}
	// A package whose recipe schema is garbage.
	badPkg := filepath.Join(dir, "badpkg")
	if err := os.CopyFS(badPkg, os.DirFS(pkg)); err != nil {
		t.Fatal(err)
	}
	badSchema := filepath.Join(badPkg, "experiment", "holdout-recipe-v1.schema.json")
	if err := os.WriteFile(badSchema, []byte("\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	obs := filepath.Join(dir, "obs.json")
	if err := os.WriteFile(obs, []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A world whose declaration (experiment/world.json, optional) is a FIFO.
	fifoWorld := filepath.Join(dir, "fifo-world")
	if err := os.CopyFS(fifoWorld, os.DirFS(w)); err != nil {
		t.Fatal(err)
	}
	decl := filepath.Join(fifoWorld, "docs", "spec", "proof-wire", "experiment", "world.json")
	if err := unix.Mkfifo(decl, 0o600); err != nil {
		t.Fatal(err)
	}
	// An index and a checkpoint over every cap (TestEveryCommandBadInputs
	// gives DIR an empty directory, so it never reaches --since).
	ix := filepath.Join(dir, "ix")
	if _, err := amber.InitIndex(ix, "test.invalid/index", filepath.Join(dir, "ix.key")); err != nil {
		t.Fatal(err)
	}
	big := sparseFile(t, filepath.Join(dir, "big"), 1<<30)
	for _, c := range []struct {
		name  string
		args  []string
		code  int
		names string // what the message must name
	}{
		{"amber index verify --since too large", []string{"amber", "index", "verify", ix, "--since", big}, 1, big},
		{"room drive --resume of a missing transcript", drive(absent), 2, absent},
		{"room drive --resume of garbage", drive(garbage), 1, garbage},
		{"sandbox bundle --out under a missing directory", []string{"sandbox", "bundle", "--out", filepath.Join(dir, "absent", "bundle"), "--", "/bin/true"}, 2, "absent"},
		{"holdout fixture, schema of garbage", []string{"holdout", "fixture", filepath.Join(badPkg, "experiment")}, 1, badSchema},
		{"holdout score, schema of garbage", []string{"holdout", "score", "--package", badPkg, "--challenges", holdoutDir, "--observations", obs}, 1, badSchema},
		{"holdout check, schema of garbage", []string{"holdout", "check", holdoutDir, "--package", badPkg}, 1, badSchema},
		{"holdout interop, schema of garbage", []string{"holdout", "interop", "--package", badPkg, obs, obs}, 1, badSchema},
		{"run finding list, declaration a FIFO", []string{"run", "finding", "list", "--world", fifoWorld}, 2, "world.json"},
		{"run finding classify, declaration a FIFO", []string{"run", "finding", "classify", "--world", fifoWorld, "find-0", "--class", "SPEC_GAP", "--ruling", "x"}, 2, "world.json"},
		{"run question add, declaration a FIFO", []string{"run", "question", "add", "--world", fifoWorld, "--revision", "1", "--question", "q", "--why", "w", "--ruling", "r", "--class", "SPEC_GAP"}, 2, "world.json"},
		// Unchanged codes, now classed where made: an entry the arguments
		// leave incomplete is unusable (holdout's entry rule).
		{"run finding classify, no ruling", []string{"run", "finding", "classify", "--world", w, "find-0", "--class", "SPEC_GAP", "--ruling", " "}, 2, "needs a ruling"},
		{"run question add, no question", []string{"run", "question", "add", "--world", w, "--revision", "1", "--why", "w", "--ruling", "r", "--class", "SPEC_GAP"}, 2, "required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.names) {
				t.Errorf("exit %d, want %d naming %s:\n%s", code, c.code, c.names, stderr)
			}
		})
	}
}
