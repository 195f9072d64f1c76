package sandbox

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
	"github.com/google/nftables"
)

// A SIGKILLed owner leaves its run's tmpfs, directory and cgroups; GC
// removes exactly those (a dry run names them and removes nothing), and a
// live run in the same state root is untouched and still ends normally.
func TestGC(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	t.Run("private state root", func(t *testing.T) { testGC(t, testStateDir(t)) })
	// Where the state root lies on a shared mount (systemd's /), runs bind
	// it private while they use it, and gc must see them through that bind.
	t.Run("state root on a shared mount", func(t *testing.T) {
		shared, _ := sharedPair(t)
		testGC(t, filepath.Join(shared, "state"))
	})
}

func testGC(t *testing.T, state string) {
	// The killed run: its command says ready, then sleeps.
	helper := exec.Command("/proc/self/exe", "exec-stdout", state, "/bin/sh", "-c", "echo ready; exec sleep 1000")
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	defer helper.Process.Kill()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the helper's run never said ready: %q %v", line, err)
	}
	ents, err := os.ReadDir(state)
	if err != nil || len(ents) != 1 {
		t.Fatalf("state root holds %v (%v), want the helper's run", ents, err)
	}
	killed := ents[0].Name()
	// The live run, waiting on its stdin.
	stdinR, stdinW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		res, err := Exec(context.Background(), Config{StateDir: state, Args: []string{"/bin/sh", "-c", "echo ready; read x"}}, Stdio{Stdin: stdinR, Stdout: outW})
		outW.Close()
		if err == nil && res.ExitCode != 0 {
			err = errors.New(res.Status)
		}
		done <- err
	}()
	if line, err := bufio.NewReader(outR).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("the live run never said ready: %q %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }() // drained until the run ends
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	// The candidate dies of its parent-death signal; its cgroups empty
	// once it is gone (a wait, not a measurement).
	cgroups := func() []string {
		table := mustMountInfo(t)
		cg, err := runCgroups(table)
		if err != nil {
			t.Fatal(err)
		}
		return cg[killed]
	}
	if len(cgroups()) == 0 {
		t.Fatal("the killed run has no cgroups to leave behind")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		busy := false
		for _, cg := range cgroups() {
			if b, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs")); len(strings.TrimSpace(string(b))) > 0 {
				busy = true
			}
		}
		if !busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the killed run's candidate outlived it")
		}
	}
	dir := filepath.Join(state, killed)
	for _, dry := range []bool{true, false} {
		rep, err := GC(state, dry)
		if err != nil {
			t.Fatalf("GC(dry=%v): %v %+v", dry, err, rep)
		}
		if len(rep.Stale) != 1 || rep.Stale[0].ID != killed || len(rep.Live) != 1 || rep.Live[0] == killed {
			t.Fatalf("GC(dry=%v): %+v, want stale %s and one live run", dry, rep, killed)
		}
		s := rep.Stale[0]
		if !slices.Equal(s.Mounts, []string{dir}) || len(s.Cgroups) == 0 || s.Removed == dry {
			t.Errorf("GC(dry=%v): %+v", dry, s)
		}
		_, mounted := mountAt(t, dir)
		if _, err := os.Lstat(dir); dry != (err == nil) || dry != mounted || dry != (len(cgroups()) > 0) {
			t.Errorf("GC(dry=%v): dir present %v, mounted %v, cgroups %v", dry, err == nil, mounted, cgroups())
		}
	}
	live := filepath.Join(state, mustLive(t, state))
	if _, ok := mountAt(t, live); !ok {
		t.Errorf("the live run's tmpfs %s is gone", live)
	}
	if _, err := stdinW.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	stdinW.Close()
	if err := <-done; err != nil {
		t.Errorf("the live run: %v", err)
	}
	if ents, _ := os.ReadDir(state); len(ents) != 0 {
		t.Errorf("the state root still holds %v", ents)
	}
}

func mustMountInfo(t *testing.T) []seal.MountInfo {
	t.Helper()
	table, err := seal.ReadMountInfo(0)
	if err != nil {
		t.Fatal(err)
	}
	return table
}

func mustLive(t *testing.T, state string) string {
	t.Helper()
	rep, err := GC(state, true)
	if err != nil || len(rep.Live) != 1 {
		t.Fatalf("GC: %+v %v, want one live run", rep, err)
	}
	return rep.Live[0]
}

// A stale run whose cgroup still has a process is left whole and named:
// nothing is killed, nothing removed, and GC reports ErrGCIncomplete.
func TestGCLeavesBusyRun(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	const id = "cr0000000000aa"
	state := testStateDir(t)
	if err := os.MkdirAll(filepath.Join(state, id), 0o700); err != nil {
		t.Fatal(err)
	}
	cg := filepath.Join("/sys/fs/cgroup/pids", cgroupParent, id)
	if _, err := os.Stat("/sys/fs/cgroup/pids"); err != nil {
		cg = filepath.Join("/sys/fs/cgroup", cgroupParent, id) // v2
	}
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Skipf("cannot make a cgroup here: %v", err)
	}
	sleeper := exec.Command("/bin/sleep", "1000")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sleeper.Process.Kill()
		sleeper.Wait()
		os.Remove(cg)
	})
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	rep, err := GC(state, false)
	if !errors.Is(err, ErrGCIncomplete) {
		t.Fatalf("GC: %v, want %v", err, ErrGCIncomplete)
	}
	if len(rep.Stale) != 1 || rep.Stale[0].Removed || len(rep.Stale[0].Problems) != 1 || !strings.Contains(rep.Stale[0].Problems[0], "cgroup still has 1 processes") {
		t.Errorf("report %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(state, id)); err != nil {
		t.Errorf("the busy run's directory was removed: %v", err)
	}
	if sleeper.ProcessState != nil || sleeper.Process.Signal(syscall.Signal(0)) != nil {
		t.Error("the process in the busy cgroup is gone")
	}
}

// TestGCRemovesAKilledRunsFilter: the host-side nftables table of an
// allowlisted run whose owner was killed before its teardown is removed
// with the run (reported by a dry run first); a table of the same form
// whose run is not under this state root is not gc's to touch.
func TestGCRemovesAKilledRunsFilter(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	c, err := nftables.New()
	if err != nil {
		t.Skipf("nftables: %v", err)
	}
	state := testStateDir(t)
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	stale, other := "cr5a1e00000001", "cr5a1e00000002"
	// What a killed run leaves: its directory (no owner lock in it) and
	// its filter table.
	if err := os.Mkdir(filepath.Join(state, stale), 0o700); err != nil {
		t.Fatal(err)
	}
	tables := map[string]string{}
	for _, id := range []string{stale, other} {
		name := (&egress{id: id}).tableName()
		tables[id] = name
		c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: name})
		t.Cleanup(func() { _ = delFilterTable(name) })
	}
	if err := c.Flush(); err != nil {
		t.Skipf("installing nftables tables: %v", err)
	}
	exists := func(name string) bool {
		_, err := c.ListTableOfFamily(name, nftables.TableFamilyINet)
		return err == nil
	}
	rep, err := GC(state, true)
	if err != nil || len(rep.Stale) != 1 || rep.Stale[0].Filter != tables[stale] {
		t.Fatalf("dry run: %+v, %v; want the stale run with its table %s", rep, err, tables[stale])
	}
	if !exists(tables[stale]) {
		t.Fatal("a dry run removed the table")
	}
	rep, err = GC(state, false)
	if err != nil || len(rep.Stale) != 1 || !rep.Stale[0].Removed {
		t.Fatalf("gc: %+v, %v", rep, err)
	}
	if exists(tables[stale]) {
		t.Errorf("table %s is still there after gc", tables[stale])
	}
	if !exists(tables[other]) {
		t.Errorf("gc removed %s, whose run is not under its state root", tables[other])
	}
}
