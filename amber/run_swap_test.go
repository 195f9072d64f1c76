package amber

import (
	"context"
	"io"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// historyIsolation fails the test if the candidate's workspace, when the
// runner hands it to the sandbox, holds the commit made after the cutoff.
type historyIsolation struct {
	t     *testing.T
	after string
}

func (h historyIsolation) Run(_ context.Context, spec ContainerSpec, _, _ io.Writer) (*ContainerOutcome, error) {
	if exec.Command("git", "-C", spec.Workspace, "cat-file", "-e", h.after).Run() == nil {
		h.t.Errorf("the candidate's workspace holds post-cutoff commit %s", h.after)
	}
	return &ContainerOutcome{PreStart: "test: stop here"}, nil
}

// TestRunChecksOutTheVerifiedBundle: base.bundle replaced after the case
// was verified (here at the runner's first clock reading, between the
// verification and the checkout) by a bundle that also carries the history
// after the cutoff must not reach the candidate's workspace: the runner
// checks out only bytes whose sha256 is the manifest's.
func TestRunChecksOutTheVerifiedBundle(t *testing.T) {
	t.Parallel()
	needGit(t)
	repo := newTestRepo(t, 3)
	_, s := newSigner(t)
	bo := buildOpts(t, repo, s)
	c, err := Build(context.Background(), bo)
	if err != nil {
		t.Fatal(err)
	}
	ixDir, ixKey := newTestIndex(t, 0)
	m, msha, err := VerifySignedManifest(c.Dir, s.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := AppendCaseFile(ixDir, ixKey, EntryFromManifest(m, msha)); err != nil {
		t.Fatal(err)
	}
	// The same ref at the same cutoff, and the after-cutoff commit too.
	gitT(t, repo.Dir, "update-ref", BundleRef, repo.Cutoff)
	hostile := filepath.Join(t.TempDir(), "hostile.bundle")
	gitT(t, repo.Dir, "bundle", "create", "--quiet", hostile, BundleRef, "main")
	swapped := false
	o := RunOptions{CaseDir: c.Dir, Producer: s.PublicKey(), IndexDir: ixDir, Signer: s,
		Provider: "test", Model: "scripted", Out: filepath.Join(t.TempDir(), "run"),
		Args: []string{"/bin/true"}, Sealed: netip.MustParseAddrPort("192.0.2.1:443"),
		Isolation: historyIsolation{t, repo.After},
		Now: func() time.Time {
			if !swapped {
				swapped = true
				if out, err := exec.Command("cp", hostile, filepath.Join(c.Dir, BundleFile)).CombinedOutput(); err != nil {
					t.Fatalf("cp: %v %s", err, out)
				}
			}
			return time.Date(2026, 2, 1, 12, 0, 0, 0, time.UTC)
		}}
	var progress []string
	o.Progress = func(line string) { progress = append(progress, line) }
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	// The operator saw each step start and end, the failing one as failed.
	got := strings.Join(progress, "\n")
	for _, re := range []string{`(?m)^verifying the case .*…$`, `(?m)^verifying the case .*: verified \([0-9.]+m?s\)$`, `(?m)^checking out base\.bundle into .*: failed \([0-9.]+m?s\)$`} {
		if !regexp.MustCompile(re).MatchString(got) {
			t.Errorf("progress lacks %s:\n%s", re, got)
		}
	}
	if !swapped {
		t.Fatal("the bundle was never swapped: the test proves nothing")
	}
	if res.Record.TerminalState != StateInvalidInfrastructure {
		t.Errorf("state %s (%s), want %s", res.Record.TerminalState, res.Record.Reason, StateInvalidInfrastructure)
	}
}
