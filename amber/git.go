package amber

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"

	"github.com/cleanroom-dev/cleanroom/internal/capbuf"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// gitEnv is the environment every git command runs with: the caller's, minus
// every GIT_* variable (GIT_DIR, GIT_OBJECT_DIRECTORY, GIT_ALTERNATE_… would
// silently point a command at another repository or object store), without
// system configuration (a host's gitconfig could install hooks, fsck
// leniencies or replace refs), and with prompts off (no forge credentials are
// ever asked for).
func gitEnv(isolated bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GIT_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_NO_REPLACE_OBJECTS=1")
	if isolated {
		// A scratch repository of the receiver: no user configuration at
		// all, so nothing can weaken transfer.fsckObjects or fsck.
		env = append(env, "GIT_CONFIG_GLOBAL=/dev/null")
	}
	return env
}

// GitError reports a git command that failed, with its stderr.
type GitError struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *GitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *GitError) Unwrap() error { return e.Err }

// maxGitOutput caps what is kept of a git command's stdout held in memory.
const maxGitOutput = 64 << 20

// git runs git in dir and returns its stdout.
func git(ctx context.Context, dir string, isolated bool, args ...string) ([]byte, error) {
	cmd := gitCmd(ctx, dir, isolated, args...)
	out, stderr := &capbuf.Buffer{Max: maxGitOutput}, &capbuf.Buffer{Max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, stderr
	if err := cmd.Run(); err != nil {
		return out.Bytes(), &GitError{Args: args, Stderr: stderr.String(), Err: err}
	}
	return out.Bytes(), nil
}

// gitCountLines runs git in dir and counts the lines of its stdout without
// holding them (an object listing can outgrow maxGitOutput).
func gitCountLines(ctx context.Context, dir string, args ...string) (int64, error) {
	cmd := gitCmd(ctx, dir, true, args...)
	var n lineCounter
	stderr := &capbuf.Buffer{Max: 64 << 10}
	cmd.Stdout, cmd.Stderr = &n, stderr
	if err := cmd.Run(); err != nil {
		return 0, &GitError{Args: args, Stderr: stderr.String(), Err: err}
	}
	return int64(n), nil
}

type lineCounter int64

func (c *lineCounter) Write(p []byte) (int, error) {
	*c += lineCounter(bytes.Count(p, []byte{'\n'}))
	return len(p), nil
}

func gitCmd(ctx context.Context, dir string, isolated bool, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(isolated)
	return cmd
}

var reGitVersion = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^git version ([0-9][0-9A-Za-z.\-+]*)`) })

// GitVersion returns the version `git --version` reports ("2.39.5").
func GitVersion(ctx context.Context) (string, error) {
	out, err := git(ctx, "", true, "--version")
	if err != nil {
		return "", err
	}
	m := reGitVersion().FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("unrecognised git --version output %q", out)
	}
	return string(m[1]), nil
}

// BundleRef is the single ref every cleanroom base.bundle carries.
const BundleRef = "refs/cleanroom/cutoff"

// Rules a bundle header can break.
var (
	errBundleSignature    = fault.New(fault.Refused, "bundle signature line is not \"# v3 git bundle\"")
	errBundleCapability   = fault.New(fault.Refused, "bundle capability other than @object-format")
	errBundlePrerequisite = fault.New(fault.Refused, "bundle has prerequisites (a thin bundle is not self-contained)")
	errBundleRefs         = fault.New(fault.Refused, "bundle must carry exactly one ref")
	errBundleHeader       = fault.New(fault.Refused, "malformed bundle header")
	errBundleUnreachable  = fault.New(fault.Refused, "bundle carries objects its ref does not reach")
)

// BundleHeader is a parsed v3 git bundle header (gitformat-bundle(5)).
type BundleHeader struct {
	Version      int    // 3
	ObjectFormat string // "sha1" or "sha256"
	RefOID       string
	RefName      string
	Length       int // bytes up to and including the blank line
}

const maxBundleHeader = 64 << 10

// ParseBundleHeader reads the header of a bundle from r and refuses anything
// but a v3 header with an @object-format capability, no prerequisites and
// exactly one ref, followed by a PACK.
func ParseBundleHeader(r io.Reader) (*BundleHeader, error) {
	br := bufio.NewReader(io.LimitReader(r, maxBundleHeader+4))
	h := &BundleHeader{}
	line := func() (string, error) {
		s, err := br.ReadString('\n')
		h.Length += len(s)
		if err != nil {
			return "", fmt.Errorf("%w: truncated at byte %d", errBundleHeader, h.Length)
		}
		if h.Length > maxBundleHeader {
			return "", fmt.Errorf("%w: header over %d bytes", errBundleHeader, maxBundleHeader)
		}
		return strings.TrimSuffix(s, "\n"), nil
	}
	first, err := line()
	if err != nil {
		return nil, err
	}
	if first != "# v3 git bundle" {
		return nil, fmt.Errorf("%w: %q", errBundleSignature, first)
	}
	h.Version = 3
	var refs int
	for {
		l, err := line()
		if err != nil {
			return nil, err
		}
		switch {
		case l == "":
			if h.ObjectFormat == "" {
				return nil, fmt.Errorf("%w: no @object-format capability", errBundleHeader)
			}
			if refs != 1 {
				return nil, fmt.Errorf("%w: found %d", errBundleRefs, refs)
			}
			magic, err := br.Peek(4)
			if err != nil || string(magic) != "PACK" {
				return nil, fmt.Errorf("%w: no PACK after the header", errBundleHeader)
			}
			return h, nil
		case strings.HasPrefix(l, "@"):
			v, ok := strings.CutPrefix(l, "@object-format=")
			// @filter (a partial bundle) or any unknown capability changes
			// what the pack holds: refuse rather than ignore.
			if !ok || refs > 0 || h.ObjectFormat != "" {
				return nil, fmt.Errorf("%w: %q", errBundleCapability, l)
			}
			if v != "sha1" && v != "sha256" {
				return nil, fmt.Errorf("%w: object format %q", errBundleHeader, v)
			}
			h.ObjectFormat = v
		case strings.HasPrefix(l, "-"):
			// A prerequisite: the bundle needs history the receiver may not
			// have, so it is not the self-contained base state.
			return nil, fmt.Errorf("%w: %q", errBundlePrerequisite, l)
		default:
			oid, name, ok := strings.Cut(l, " ")
			want := 40
			if h.ObjectFormat == "sha256" {
				want = 64
			}
			if !ok || len(oid) != want || !reCommit().MatchString(oid) || name == "" || strings.ContainsAny(name, " \t") {
				return nil, fmt.Errorf("%w: ref line %q", errBundleHeader, l)
			}
			refs++
			h.RefOID, h.RefName = oid, name
		}
	}
}
