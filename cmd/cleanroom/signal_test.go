package main

import (
	"bufio"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/amber"
	"github.com/cleanroom-dev/cleanroom/sandbox"
	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
)

// The signals a command is stopped with: each must leave nothing behind.
var stopSignals = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// needSandboxCLI skips where `sandbox exec` cannot run.
func needSandboxCLI(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the candidate sandbox needs root")
	}
	if _, err := sandbox.CheckKernel(); err != nil {
		t.Skipf("the candidate sandbox cannot run here: %v", err)
	}
}

// leftovers lists what a stopped command left: mounts at or beneath any
// of dirs (mountinfo), cgroup directories named id (any hierarchy), and
// any entry of tmp (the command's TMPDIR).
func leftovers(t *testing.T, tmp, id string, dirs ...string) []string {
	t.Helper()
	var left []string
	table, err := seal.ReadMountInfo(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range table {
		for _, d := range append(dirs, tmp) {
			if m.MountPoint == d || strings.HasPrefix(m.MountPoint, d+"/") {
				left = append(left, "mount "+m.MountPoint)
			}
		}
		if id != "" && (m.FSType == "cgroup" || m.FSType == "cgroup2") {
			// Unreadable entries are passed over: the walk itself never fails.
			_ = filepath.WalkDir(m.MountPoint, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() && d.Name() == id {
					left = append(left, "cgroup "+p)
				}
				return nil
			})
		}
	}
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		left = append(left, "temporary "+filepath.Join(tmp, e.Name()))
	}
	return left
}

// stopped sends sig to cmd and waits for it to end (killing it, and
// failing, if it does not within a minute: a hang, not a measurement).
func stopped(t *testing.T, cmd *exec.Cmd, sig syscall.Signal) error {
	t.Helper()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("the command did not end on %v (killed: %v)", sig, <-done)
		return nil
	}
}

// runID is the one run directory under the sandbox state root.
func runID(t *testing.T, state string) string {
	t.Helper()
	ents, err := os.ReadDir(state)
	if err != nil || len(ents) != 1 {
		t.Fatalf("state root holds %v (%v), want one run", ents, err)
	}
	return ents[0].Name()
}

// TestSignalSandboxExec: SIGINT, SIGTERM or SIGHUP to `sandbox exec` kills
// the container and tears down its tmpfs, cgroups and run directory.
func TestSignalSandboxExec(t *testing.T) {
	t.Parallel()
	needSandboxCLI(t)
	bin, _ := cliBinary(t)
	for _, sig := range stopSignals {
		t.Run(sig.String(), func(t *testing.T) {
			state, tmp := filepath.Join(searchableTempDir(t), "state"), t.TempDir()
			cmd := exec.Command(bin, "sandbox", "exec", "--state-root", state, "--", "/bin/sh", "-c", "echo ready; exec sleep 1000")
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("exec never said ready: %q %v", line, err)
			}
			id := runID(t, state)
			if err := stopped(t, cmd, sig); err == nil {
				t.Errorf("sandbox exec stopped by %v exited 0", sig)
			}
			if left := leftovers(t, tmp, id, state); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
			if ents, _ := os.ReadDir(state); len(ents) != 0 {
				t.Errorf("state root still holds %v", ents)
			}
		})
	}
}

// TestSignalRoomServe: SIGINT, SIGTERM or SIGHUP to `room serve` ends the
// session cleanly: the transcript complete (its end line written, read
// back by `room transcript`), the view's mount point and its mount gone.
func TestSignalRoomServe(t *testing.T) {
	t.Parallel()
	if err := exec.Command("unshare", "-m", "-n", "true").Run(); err != nil {
		t.Skipf("cannot create mount+network namespaces here: %v", err)
	}
	bin := roomBinary(t)
	pkg, _ := filepath.Abs(filepath.Join("..", "..", "harness", "testdata", "room-package"))
	for _, sig := range stopSignals {
		t.Run(sig.String(), func(t *testing.T) {
			base, tmp := t.TempDir(), t.TempDir()
			tpath := filepath.Join(base, "t.jsonl")
			cmd := exec.Command(bin, "room", "serve", "--package", pkg, "--expect", roomPackagePin,
				"--workspace", filepath.Join(base, "ws"), "--transcript", tpath)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			stdin, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			if _, err := io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_files","arguments":{}}}
`); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(out)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() && !strings.Contains(sc.Text(), `"id":2`) {
			}
			go func() { _, _ = io.Copy(io.Discard, out) }() // drained until the room ends
			// Its exit status is not asserted here: what it leaves behind is.
			_ = stopped(t, cmd, sig)
			stdin.Close()
			if left := leftovers(t, tmp, ""); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
			code, js, errs := runCLI(t, "room", "transcript", "--json", tpath)
			if code != 0 || !strings.Contains(js, `"complete": true`) || !strings.Contains(js, `"tool": "list_files"`) {
				t.Errorf("room transcript after %v: exit %d\n%s%s", sig, code, js, errs)
			}
		})
	}
}

// TestSignalAmberRun: SIGINT, SIGTERM or SIGHUP to `amber run` while the
// candidate runs kills its container and removes its tmpfs, cgroups and
// temporary directories; the run directory is whole: a signed record
// saying the run was interrupted (invalid_infrastructure), nothing scored.
func TestSignalAmberRun(t *testing.T) {
	t.Parallel()
	needSandboxCLI(t)
	bin, _ := cliBinary(t)
	d := amberFixture(t)
	p := func(n string) string { return filepath.Join(d, n) }
	for _, step := range [][]string{
		{"amber", "key", "gen", "--out", p("k"), "--identity", "producer@example"},
		{"amber", "case", "build", "--repo", p("src"), "--cutoff-commit", "main", "--cutoff-utc", "2026-01-15T00:00:00Z",
			"--oracle", p("oracle"), "--profile", "test", "--case-id", "A-1", "--spec", p("CORE.md"), "--protocol", p("DIST.md"),
			"--key", p("k"), "--out", p("case")},
		{"amber", "index", "init", p("ix"), "--origin", "test.invalid/index", "--key-out", p("ix.key")},
		{"amber", "index", "append", p("ix"), "--key", p("ix.key"), "--case", p("case"), "--pub", p("k.pub")},
	} {
		if code, out, errs := runCLI(t, step...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", step[:3], code, out, errs)
		}
	}
	for _, sig := range stopSignals {
		t.Run(sig.String(), func(t *testing.T) {
			state, tmp, run := filepath.Join(searchableTempDir(t), "state"), t.TempDir(), filepath.Join(searchableTempDir(t), "run")
			cmd := exec.Command(bin, "amber", "run", p("case"), "--candidate", "x/y", "--pub", p("k.pub"), "--key", p("k"), "--index", p("ix"),
				"--sealed", "192.0.2.1:443", "--state-dir", state, "--out", run, "--", "/bin/sh", "-c", "echo ready; exec sleep 1000")
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			// The candidate says ready into its stdout file.
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
				if b, _ := os.ReadFile(filepath.Join(run, "candidate.stdout")); string(b) == "ready\n" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the candidate never said ready: %s", stderr.String())
				}
			}
			id := runID(t, state)
			_ = stopped(t, cmd, sig) // what it leaves behind is asserted, not its status
			if left := leftovers(t, tmp, id, state, run); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
			if ents, _ := os.ReadDir(state); len(ents) != 0 {
				t.Errorf("state root still holds %v", ents)
			}
			rec, err := amber.LoadRecordFile(filepath.Join(run, amber.RecordFile))
			if err != nil {
				t.Fatalf("the interrupted run's record: %v (stderr %s)", err, stderr.String())
			}
			if rec.TerminalState != amber.StateInvalidInfrastructure || !strings.Contains(rec.Reason, "interrupted") {
				t.Errorf("record %s (%s), want %s, interrupted", rec.TerminalState, rec.Reason, amber.StateInvalidInfrastructure)
			}
		})
	}
}
