package docs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// block is one runnable fenced block of a guide.
type block struct {
	line  int // 1-based line of the opening fence
	needs []string
	body  string
}

// The rules parseGuide refuses a guide by.
var (
	errUnclosed         = errors.New("runnable block never closed")
	errUnknownAttribute = errors.New("unknown block attribute")
	// A misspelt need would otherwise skip the rest of the guide for good.
	errUnknownNeed = errors.New("unknown requirement")
)

// knownNeeds are the requirements a block may name (requirement probes them).
var knownNeeds = []string{"namespaces", "root", "node", "python3", "git", "ssh-keygen"}

// parseGuide returns the runnable blocks of a Markdown guide. An unclosed
// fence is an error, so a block cannot silently swallow the rest.
func parseGuide(b []byte) ([]block, error) {
	var out []block
	sc := bufio.NewScanner(bytes.NewReader(b))
	var cur *block
	var body strings.Builder
	other := 0 // the fence length of an open non-runnable block
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		trim := strings.TrimSpace(l)
		switch {
		case cur != nil && trim == "```":
			cur.body = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(l + "\n")
		case other > 0 && len(trim) >= other && strings.Trim(trim, "`") == "":
			other = 0 // a closing fence: only backticks, at least as many
		case other > 0:
		case strings.HasPrefix(trim, "```sh run"):
			cur = &block{line: n}
			body.Reset()
			for _, f := range strings.Fields(strings.TrimPrefix(trim, "```sh run")) {
				v, ok := strings.CutPrefix(f, "needs=")
				if !ok {
					return nil, fmt.Errorf("line %d: %q: %w", n, f, errUnknownAttribute)
				}
				cur.needs = strings.Split(v, ",")
				for _, need := range cur.needs {
					if !slices.Contains(knownNeeds, need) {
						return nil, fmt.Errorf("line %d: %q (one of %s): %w", n, need, strings.Join(knownNeeds, ", "), errUnknownNeed)
					}
				}
			}
		case strings.HasPrefix(trim, "```"):
			other = len(trim) - len(strings.TrimLeft(trim, "`"))
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("line %d: %w", cur.line, errUnclosed)
	}
	return out, sc.Err()
}

// requirement probes one need; "" means this machine provides it.
func requirement(need string) string {
	switch need {
	case "namespaces":
		if err := exec.Command("unshare", "-m", "-n", "-p", "-f", "true").Run(); err != nil {
			return "cannot create mount, network and pid namespaces here (" + err.Error() + ")"
		}
	case "root":
		if os.Geteuid() != 0 {
			return "needs root"
		}
	case "node", "python3", "git", "ssh-keygen":
		if _, err := exec.LookPath(need); err != nil {
			return need + " is not installed"
		}
		// An adapter's interpreter is looked for in fixed system
		// directories, and the sandbox binds only /usr.
		if need == "python3" && !executable("/usr/bin/python3") && !executable("/usr/local/bin/python3") {
			return "python3 is not in /usr/bin or /usr/local/bin, where an adapter's interpreter is looked for"
		}
	}
	return ""
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// The guides the issues ask for; each must exist and have runnable steps.
var guides = []string{"own-experiment", "operator", "implementer", "scorer", "amber-producer", "evaluation-host"}

func TestGuides(t *testing.T) {
	t.Parallel()
	src, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// The binary `make build` makes, as the guides tell the reader to use.
	_, binDir := testshared.Cleanroom(t)
	// Every guide in guides/ runs, not only the ones the issue named: a
	// guide added later cannot rot unnoticed either.
	files, err := filepath.Glob(filepath.Join("guides", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range guides {
		if !slices.Contains(files, filepath.Join("guides", g+".md")) {
			t.Errorf("guides/%s.md is missing", g)
		}
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".md"), func(t *testing.T) {
			// Each guide runs in its own directory and HOME; the sandbox
			// state root holds one directory per run.
			t.Parallel()
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			blocks, err := parseGuide(b)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(blocks) == 0 {
				t.Fatalf("%s has no runnable block", file)
			}
			skip := ""
			ran := 0
			var script strings.Builder
			script.WriteString("set -euo pipefail\n")
			for _, bl := range blocks {
				for _, n := range bl.needs {
					if r := requirement(n); r != "" && skip == "" {
						skip = fmt.Sprintf("%s:%d and after: %s", file, bl.line, r)
					}
				}
				if skip != "" {
					break
				}
				fmt.Fprintf(&script, "echo '>>> %s:%d' >&2\n%s", file, bl.line, bl.body)
				ran++
			}
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"), "CLEANROOM_SRC="+src, "HOME="+dir)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v (the last '>>>' line is the failing block)\n%s", file, err, tail(out, 60))
			}
			t.Logf("%s ran %d of %d block(s)", file, ran, len(blocks))
			if skip != "" {
				t.Skip(skip)
			}
		})
	}
}

// TestParseGuide: the block parser keeps only "sh run" blocks, reads
// their needs, and refuses an unclosed fence, an unknown attribute or an
// unknown need.
func TestParseGuide(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		md      string
		want    []string // bodies
		needs   string
		wantErr error
	}{
		{"plain and runnable", "x\n```sh\nnot run\n```\n```sh run\necho a\n```\n", []string{"echo a\n"}, "", nil},
		{"needs", "```sh run needs=node,namespaces\necho b\n```\n", []string{"echo b\n"}, "node,namespaces", nil},
		{"fence inside other block", "````md\n```sh run\necho c\n```\n````\n", nil, "", nil},
		{"unclosed", "```sh run\necho d\n", nil, "", errUnclosed},
		{"unknown attribute", "```sh run fast\necho e\n```\n", nil, "", errUnknownAttribute},
		{"unknown need", "```sh run needs=node,namespace\necho f\n```\n", nil, "", errUnknownNeed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bs, err := parseGuide([]byte(c.md))
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
			var got []string
			for _, b := range bs {
				got = append(got, b.body)
				if c.needs != "" && strings.Join(b.needs, ",") != c.needs {
					t.Errorf("needs %v, want %s", b.needs, c.needs)
				}
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("blocks %q, want %q", got, c.want)
			}
		})
	}
}

func tail(b []byte, lines int) string {
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
