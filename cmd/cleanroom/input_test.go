package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cleanroom-dev/cleanroom/amber"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/sign"
)

// TestInputFilesMustBeRegular runs the built command with a FIFO (no writer
// ever comes) or a character device where it reads an input file: each must
// refuse it at once with exit 2, naming the file — not wait forever for a
// writer, nor read /dev/zero until memory runs out.
func TestInputFilesMustBeRegular(t *testing.T) {
	t.Parallel()
	bin, _ := cliBinary(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	regular := filepath.Join(dir, "regular")
	if err := os.WriteFile(regular, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "k")
	if err := sign.GenerateKeyWithComment(key, "t"); err != nil {
		t.Fatal(err)
	}
	ix := filepath.Join(dir, "ix")
	if _, err := amber.InitIndex(ix, "test.invalid/index", filepath.Join(dir, "ix.key")); err != nil {
		t.Fatal(err)
	}
	pkg := filepath.Join(testshared.RepoRoot(t), "testdata", "world", "docs", "spec", "proof-wire")
	cases := []struct {
		name string
		args func(in string) []string
	}{
		{"run id", func(in string) []string { return []string{"run", "id", in} }},
		{"run pin --reference", func(in string) []string {
			return []string{"run", "pin", "--world", dir, "--reference", in}
		}},
		{"room transcript", func(in string) []string { return []string{"room", "transcript", in} }},
		{"fleet plan --runs", func(in string) []string {
			return []string{"fleet", "plan", "--runs", in, "--out", filepath.Join(dir, "plan")}
		}},
		{"fleet collect --runs", func(in string) []string {
			return []string{"fleet", "collect", "--runs", in, "--from", dir, "--into", filepath.Join(dir, "into")}
		}},
		{"holdout score --challenges", func(in string) []string {
			return []string{"holdout", "score", "--package", pkg, "--challenges", in, "--observations", regular}
		}},
		{"amber index verify --pub", func(in string) []string { return []string{"amber", "index", "verify", ix, "--pub", in} }},
		{"amber index verify --since", func(in string) []string { return []string{"amber", "index", "verify", ix, "--since", in} }},
		{"amber index verify-proof", func(in string) []string {
			return []string{"amber", "index", "verify-proof", in, "--pub", regular}
		}},
		{"amber case verify --schema", func(in string) []string {
			return []string{"amber", "case", "verify", dir, "--pub", key + ".pub", "--schema", in}
		}},
		{"amber case build --cutoff-rule-output", func(in string) []string {
			return []string{"amber", "case", "build", "--repo", dir, "--cutoff-commit", "main", "--cutoff-utc", "2026-01-15T00:00:00Z",
				"--oracle", dir, "--profile", "p", "--case-id", "A-1", "--spec", regular, "--protocol", regular,
				"--key", key, "--out", filepath.Join(dir, "case"), "--cutoff-rule-output", in}
		}},
	}
	// A directory and a dangling symbolic link given as the file are the
	// same fault as a FIFO: input that cannot be read, exit 2, from every
	// command.
	subdir := filepath.Join(dir, "adir")
	dangling := filepath.Join(dir, "dangling")
	if err := os.Mkdir(subdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "nothing-here"), dangling); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		for _, in := range []string{fifo, "/dev/zero", subdir, dangling} {
			t.Run(c.name+" "+filepath.Base(in), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, c.args(in)...)
				// A wrong reading of /dev/zero must fail the test, not the machine.
				cmd.Env = append(os.Environ(), "GOMEMLIMIT=256MiB")
				out, err := cmd.CombinedOutput()
				if ctx.Err() != nil {
					t.Fatalf("%v: still waiting after 10s (killed)", c.args(in))
				}
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 2 {
					t.Fatalf("%v: %v, want exit 2\n%s", c.args(in), err, out)
				}
				rule := "not a regular file"
				switch {
				case in == dangling:
					rule = "no such file or directory"
				case in == subdir && c.name == "holdout score --challenges":
					// --challenges takes a holdout directory too: this one
					// has no INDEX.json to read.
					rule = "INDEX.json: no such file or directory"
				}
				if !strings.Contains(string(out), in) || !strings.Contains(string(out), rule) {
					t.Errorf("%v: the error does not name %s and the rule:\n%s", c.args(in), in, out)
				}
			})
		}
	}
}

// A release record that is not a regular file, or a package that is not a
// directory, is input that cannot be read (exit 2), as a missing one is —
// not a record that broke a rule (exit 1).
func TestReleaseUnreadableInputExitsTwo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"release id of a FIFO", []string{"release", "id", fifo}, "not a regular file"},
		{"release id of a directory", []string{"release", "id", dir}, "not a regular file"},
		{"release diff of a device", []string{"release", "diff", "/dev/zero", "/dev/zero"}, "not a regular file"},
		{"release verify of a FIFO", []string{"release", "verify", fifo, "--holdout", dir}, "not a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCLI(t, c.args...)
			if code != 2 || !strings.Contains(out+errs, c.want) {
				t.Errorf("exit %d (want 2), output:\n%s%s\nwant it to contain %q", code, out, errs, c.want)
			}
		})
	}
}
