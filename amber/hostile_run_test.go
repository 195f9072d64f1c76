package amber

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunWorkspaceShapeIsTheCandidates: a workspace the host cannot walk
// to hash the artifacts — nested deeper than a path may be long — is the
// candidate's act (protocol_violation, naming errWorkspaceShape), never
// the infrastructure's: a candidate must not be able to get its run
// signed invalid_infrastructure (issue 19's "blame the infrastructure").
func TestRunWorkspaceShapeIsTheCandidates(t *testing.T) {
	needSandbox(t)
	f := newRunFixture(t)
	iso := &SandboxIsolation{StateDir: sandboxStateDir(t)}
	o := f.opts
	o.Out = filepath.Join(t.TempDir(), "run")
	o.Sealed, o.Isolation = sealedStore(t), iso
	// 20 directories of 250 bytes each, made one level at a time: the
	// host's path to the innermost is over PATH_MAX (4096).
	o.Args = []string{"/bin/sh", "-c", `cd /workspace && n=$(printf '%0250d' 0) && for i in $(seq 20); do mkdir $n && cd $n || exit 1; done; echo 42 > /workspace/answer.txt`}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r := res.Record; r.TerminalState != StateProtocolViolation || !strings.Contains(r.Reason, errWorkspaceShape.Error()) {
		t.Fatalf("state %s (%s), want %s naming %q", r.TerminalState, r.Reason, StateProtocolViolation, errWorkspaceShape)
	}
}

// A sparse file of a terabyte, made in an instant: refused by its size
// before a byte of it is hashed (the fix is asserted by its class; the
// run would otherwise hash zeros for many minutes).
func TestRunSparseFileIsTheCandidates(t *testing.T) {
	needSandbox(t)
	f := newRunFixture(t)
	o := f.opts
	o.Out = filepath.Join(t.TempDir(), "run")
	o.Sealed, o.Isolation = sealedStore(t), &SandboxIsolation{StateDir: sandboxStateDir(t)}
	o.Args = []string{"/bin/sh", "-c", `truncate -s 1T /workspace/big && echo 42 > /workspace/answer.txt`}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r := res.Record; r.TerminalState != StateProtocolViolation || !strings.Contains(r.Reason, errWorkspaceShape.Error()) {
		t.Fatalf("state %s (%s), want %s naming %q", r.TerminalState, r.Reason, StateProtocolViolation, errWorkspaceShape)
	}
}

// More bytes than the artifact list takes, by the files' sizes.
func TestSnapshotTooManyBytes(t *testing.T) {
	defer func(n int64) { maxArtifactBytes = n }(maxArtifactBytes)
	maxArtifactBytes = 100
	ws := t.TempDir()
	for i, n := range []int{60, 41} {
		if err := os.WriteFile(filepath.Join(ws, strings.Repeat("f", i+1)), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := walked(t, ws, map[string]string{}).artifacts(); !errors.Is(err, errWorkspaceShape) {
		t.Errorf("101 bytes over a cap of 100: %v, want %v", err, errWorkspaceShape)
	}
	if err := os.Truncate(filepath.Join(ws, "ff"), 40); err != nil {
		t.Fatal(err)
	}
	if _, err := walked(t, ws, map[string]string{}).artifacts(); err != nil {
		t.Errorf("100 bytes, the cap: %v", err)
	}
}

// More files than the artifact list takes is the candidate's act too.
func TestSnapshotTooManyFiles(t *testing.T) {
	defer func(n int) { maxArtifactFiles = n }(maxArtifactFiles)
	maxArtifactFiles = 10
	ws := t.TempDir()
	for i := range 11 {
		if err := os.WriteFile(filepath.Join(ws, strings.Repeat("f", i+1)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := walked(t, ws, map[string]string{}).artifacts(); !errors.Is(err, errWorkspaceShape) {
		t.Errorf("11 files over a cap of 10: %v, want %v", err, errWorkspaceShape)
	}
}

// A file whose own name takes its path past PATH_MAX (its directory's
// path still within it) fails at the open that hashes it: the
// candidate's act as well.
func TestSnapshotFileNameTooLong(t *testing.T) {
	ws := t.TempDir()
	pastPathMax(t, ws)
	if _, err := walked(t, ws, map[string]string{}).artifacts(); !errors.Is(err, errWorkspaceShape) {
		t.Errorf("a file past PATH_MAX: %v, want %v", err, errWorkspaceShape)
	}
}

// The same under .git, which the artifact list leaves out but the
// evaluator may read (it may run git): still the candidate's act, never
// a path the evaluator fails on and the run signed
// invalid_infrastructure for.
func TestSnapshotGitPathTooLong(t *testing.T) {
	ws := t.TempDir()
	pastPathMax(t, filepath.Join(ws, ".git"))
	if _, err := walked(t, ws, map[string]string{}).artifacts(); !errors.Is(err, errWorkspaceShape) {
		t.Errorf("a file under .git past PATH_MAX: %v, want %v", err, errWorkspaceShape)
	}
}

// pastPathMax makes, beneath dir, a directory whose path is about 3,990
// bytes (within PATH_MAX, 4096) and in it a file whose full path is past
// PATH_MAX, made relative to its directory.
func pastPathMax(t *testing.T, dir string) {
	t.Helper()
	d := dir
	for rem := 3990 - len(d) - 1; rem > 0; rem = 3990 - len(d) - 1 {
		d = filepath.Join(d, strings.Repeat("d", min(rem, 250)))
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Skipf("cannot make the tree here: %v", err)
	}
	f, err := os.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd, err := unix.Openat(int(f.Fd()), strings.Repeat("f", 200), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
}

// walked is the workspace ws walked by the run's own walk after a run
// whose snapshot before was before.
func walked(t *testing.T, ws string, before map[string]string) *wsWalk {
	t.Helper()
	w, err := newWalk(ws, before)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	w.walk()
	return w
}
