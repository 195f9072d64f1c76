package amber

import (
	"context"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/sandbox"
	"golang.org/x/sys/unix"
)

// walkingIsolation plays a candidate that writes answer.txt and an
// isolation layer whose post-run walk is given by walk: "all" calls
// spec.Inspect for every entry (as the sandbox's scrub does) and then,
// after its walk, adds late.txt, which only a second walk would see;
// "stopped" reports a walk that stopped; "none" walks nothing. The
// evaluator never runs (the run ends invalid_infrastructure there).
type walkingIsolation struct {
	t     *testing.T
	walk  string
	calls *int
}

func (w walkingIsolation) Run(_ context.Context, spec ContainerSpec, _, _ io.Writer) (*ContainerOutcome, error) {
	if spec.Inspect == nil {
		return &ContainerOutcome{PreStart: "test: no evaluator"}, nil
	}
	if err := os.WriteFile(filepath.Join(spec.Workspace, "answer.txt"), []byte("42\n"), 0o644); err != nil {
		w.t.Fatal(err)
	}
	out := &ContainerOutcome{Status: "exited"}
	switch w.walk {
	case "all":
		err := sandbox.WalkWorkspace(spec.Workspace, func(dirfd int, name, rel string, st *unix.Stat_t) error {
			*w.calls++
			spec.Inspect(dirfd, name, rel, st)
			return nil
		})
		if err != nil {
			w.t.Fatal(err)
		}
		out.Walked = true
	case "stopped":
		out.Unwalked = "d: nested deeper than 256 directories"
	}
	if err := os.WriteFile(filepath.Join(spec.Workspace, "late.txt"), []byte("late\n"), 0o644); err != nil {
		w.t.Fatal(err)
	}
	return out, nil
}

// TestRunWalksTheWorkspaceOnce: after the candidate, the run reads the
// workspace in the isolation layer's own walk and never walks it again
// (a file added after that walk is no artifact); a layer whose walk
// stopped leaves the workspace unread, the candidate's act
// (protocol_violation, errWorkspaceShape); a layer that walks nothing
// gets the run's own walk.
func TestRunWalksTheWorkspaceOnce(t *testing.T) {
	t.Parallel()
	needGit(t)
	f := newRunFixture(t)
	for _, tc := range []struct {
		walk, state, reason string
		artifacts           []string // the workspace's, in the record
	}{
		{"all", StateInvalidInfrastructure, "the oracle could not score", []string{"workspace/answer.txt"}},
		{"none", StateInvalidInfrastructure, "the oracle could not score", []string{"workspace/answer.txt", "workspace/late.txt"}},
		{"stopped", StateProtocolViolation, errWorkspaceShape.Error(), nil},
	} {
		t.Run(tc.walk, func(t *testing.T) {
			calls := 0
			o := f.opts
			o.Out = filepath.Join(t.TempDir(), "run")
			o.Sealed, o.Args = netip.MustParseAddrPort("192.0.2.1:443"), []string{"/bin/true"}
			o.Isolation = walkingIsolation{t, tc.walk, &calls}
			res, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if r := res.Record; r.TerminalState != tc.state || !strings.Contains(r.Reason, tc.reason) {
				t.Fatalf("state %s (%s), want %s naming %q", r.TerminalState, r.Reason, tc.state, tc.reason)
			}
			var arts []string
			for _, a := range res.Record.Artifacts {
				if strings.HasPrefix(a.Path, "workspace/") {
					arts = append(arts, a.Path)
				}
			}
			if !slices.Equal(arts, tc.artifacts) {
				t.Errorf("workspace artifacts %q, want %q", arts, tc.artifacts)
			}
			if tc.walk == "all" {
				// Every entry once: the checkout's .git and files and the answer.
				entries := 0
				if err := sandbox.WalkWorkspace(filepath.Join(res.Dir, "workspace"), func(int, string, string, *unix.Stat_t) error { entries++; return nil }); err != nil {
					t.Fatal(err)
				}
				if calls != entries-1 { // late.txt came after the walk
					t.Errorf("Inspect called %d times for %d entries", calls, entries-1)
				}
			}
		})
	}
}

// countingIsolation passes every container to inner, counting the calls
// of the candidate's Inspect and keeping the candidate's outcome.
type countingIsolation struct {
	inner Isolation
	calls *int
	out   **ContainerOutcome
}

func (c countingIsolation) Run(ctx context.Context, spec ContainerSpec, stdout, stderr io.Writer) (*ContainerOutcome, error) {
	if inspect := spec.Inspect; inspect != nil {
		spec.Inspect = func(dirfd int, name, rel string, st *unix.Stat_t) { *c.calls++; inspect(dirfd, name, rel, st) }
		out, err := c.inner.Run(ctx, spec, stdout, stderr)
		*c.out = out
		return out, err
	}
	return c.inner.Run(ctx, spec, stdout, stderr)
}

// The sandbox's post-run scrub is the run's one walk of the workspace:
// SandboxIsolation hands it the run's Inspect and says it walked every
// entry, and the run scores from it.
func TestSandboxIsolationWalksOnce(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	f := newRunFixture(t)
	calls := 0
	var cand *ContainerOutcome
	o := f.opts
	o.Sealed = sealedStore(t)
	o.Isolation = countingIsolation{&SandboxIsolation{StateDir: sandboxStateDir(t)}, &calls, &cand}
	o.Args = []string{"/bin/sh", "-c", "echo 42 > /workspace/answer.txt"}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if cand == nil || !cand.Walked || cand.Unwalked != "" {
		t.Fatalf("the candidate's outcome %+v, want walked", cand)
	}
	entries := 0
	if err := sandbox.WalkWorkspace(filepath.Join(res.Dir, "workspace"), func(int, string, string, *unix.Stat_t) error { entries++; return nil }); err != nil {
		t.Fatal(err)
	}
	if calls != entries {
		t.Errorf("Inspect called %d times for %d entries", calls, entries)
	}
	if r := res.Record; r.TerminalState != StateValidSuccess && r.TerminalState != StateValidFailure {
		t.Errorf("state %s (%s), want a scored run", r.TerminalState, r.Reason)
	}
}
