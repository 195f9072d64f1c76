package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The candidate is not host root: its first process's uids, read from the
// host's /proc, are the sandbox's (2147352576, the documented
// CandidateUID); what it creates in the workspace is owned by that uid;
// a set-uid file it makes there is neither root's nor set-uid once the run
// is over, and is named; a FIFO and a socket it leaves are named.
func TestCandidateUnprivileged(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	ws := t.TempDir()
	script := `cp /bin/sh /workspace/rootshell && chmod 4755 /workspace/rootshell && mkdir /workspace/d && chmod 2775 /workspace/d &&
mkfifo /workspace/d/fifo && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("/workspace/sock")' 2>/dev/null;
stat -c 'mode=%a' /workspace/rootshell; cat /proc/self/uid_map | tr -s ' ' | sed 's/^ /map=/'`
	res, out, stderr := runIn(t, Config{Workspace: ws}, script)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, stderr)
	}
	kv := keyValues(out)
	if kv["mode"] != "4755" {
		t.Errorf("inside, the set-uid bit did not hold (%q): the test proves nothing", kv["mode"])
	}
	if kv["map"] != "0 2147352576 65536" {
		t.Errorf("uid_map %q, want 0 2147352576 65536", kv["map"])
	}
	if res.HostUID != 2147352576 {
		t.Errorf("host uid %d, want 2147352576", res.HostUID)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(ws, "rootshell"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid == 0 || st.Uid != 2147352576 {
		t.Errorf("the candidate's file is owned by host uid %d, want 2147352576", st.Uid)
	}
	if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		t.Errorf("the candidate's file is still set-id on the host: %#o", st.Mode)
	}
	if err := unix.Lstat(filepath.Join(ws, "d"), &st); err != nil || st.Mode&unix.S_ISGID != 0 {
		t.Errorf("directory d: %v, mode %#o (set-gid must be stripped)", err, st.Mode)
	}
	want := map[string]string{"rootshell": RuleSetID, "d": RuleSetID, "d/fifo": RuleSpecialFile}
	if _, err := os.Lstat(filepath.Join(ws, "sock")); err == nil {
		want["sock"] = RuleSpecialFile
	}
	got := map[string]string{}
	for _, f := range res.Workspace {
		got[f.Path] = f.Rule
	}
	for p, r := range want {
		if got[p] != r {
			t.Errorf("finding for %s: %q, want %s (all: %+v)", p, got[p], r, res.Workspace)
		}
	}
	if len(got) != len(want) {
		t.Errorf("findings %+v, want %v", res.Workspace, want)
	}
}

// A descriptor the caller holds never becomes the candidate's: stdin `< /`
// (a host directory) gives it no way into the host's tree through
// /proc/self/fd/0, and its stdout and stderr are pipes even when the
// caller's are files.
func TestCandidateStreamsArePipes(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	root, err := os.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	outFile, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	var stderr bytes.Buffer
	script := `ls /proc/self/fd/0/etc/hostname >/dev/null 2>&1 && echo reach=yes || echo reach=no
echo fd0=$(readlink /proc/self/fd/0 | cut -d: -f1) fd1=$(readlink /proc/self/fd/1 | cut -d: -f1)
cat /proc/self/fd/0/etc/shadow 2>/dev/null | head -c 1 | wc -c | sed 's/^/shadow=/'`
	res, err := Exec(context.Background(), Config{Args: []string{"/bin/sh", "-c", script}, StateDir: testStateDir(t)},
		Stdio{Stdin: root, Stdout: outFile, Stderr: &stderr})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec: %v %+v %s", err, res, stderr.String())
	}
	b, err := os.ReadFile(outFile.Name())
	if err != nil {
		t.Fatal(err)
	}
	out := strings.ReplaceAll(string(b), " ", "\n")
	kv := keyValues(out)
	for k, v := range map[string]string{"reach": "no", "fd0": "pipe", "fd1": "pipe", "shadow": "0"} {
		if kv[k] != v {
			t.Errorf("%s=%q, want %q (output %q)", k, kv[k], v, b)
		}
	}
}

// Output beyond the limit is dropped and named; the command is not
// blocked by it.
func TestCandidateOutputBounded(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	var out bytes.Buffer
	res, err := Exec(context.Background(), Config{Args: []string{"/bin/sh", "-c", "head -c 100000 /dev/zero; echo done >&2"}, StateDir: testStateDir(t)},
		Stdio{Stdout: &out, Limit: 1000})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec: %v %+v", err, res)
	}
	if out.Len() != 1000 || len(res.Truncated) != 1 || res.Truncated[0] != "stdout" {
		t.Errorf("%d bytes, truncated %v; want 1000 and [stdout]", out.Len(), res.Truncated)
	}
}

// Every directory the path rules refuse as --workspace (or --package) is
// refused by name before anything is mounted.
func TestHostPathRefusals(t *testing.T) {
	t.Parallel()
	state := testStateDir(t)
	if err := os.MkdirAll(filepath.Join(state, "inner"), 0o700); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	link := filepath.Join(tmp, "etc-link")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(tmp, "real"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, rule string
	}{
		{"/", RuleSystemTree},
		{"/etc", RuleSystemTree},
		{"/etc/ssl", RuleSystemTree},
		{"/proc", RuleSystemTree},
		{"/proc/self/root", RuleSystemTree},
		{"/sys", RuleSystemTree},
		{"/sys/fs/cgroup", RuleSystemTree},
		{"/dev", RuleSystemTree},
		{"/usr", RuleSystemTree},
		{"/usr/lib", RuleSystemTree},
		{"/boot", RuleSystemTree},
		{"/var", RuleSystemTree},
		{"/var/lib", RuleSystemTree},
		{"/run", RuleSystemTree},
		{"/tmp", RuleSystemTree},
		{"/home", RuleSystemTree},
		{"/root", RuleSystemTree},
		{filepath.Join(link, "ssl"), RuleSystemTree}, // a parent symlinked into /etc
		{state, RuleStateRoot},
		{filepath.Join(state, "inner"), RuleStateRoot},
		{filepath.Dir(state), RuleStateRoot}, // a parent of the state root
		{link, RuleNotDir},                   // the directory itself a symlink
		{filepath.Join(tmp, "missing"), RuleNotDir},
		{"relative/ws", RuleNotDir},
	} {
		for _, role := range []string{"workspace", "package"} {
			cfg := Config{Args: []string{"/bin/true"}, StateDir: state}
			if role == "workspace" {
				cfg.Workspace = tc.dir
			} else {
				cfg.Package = tc.dir
			}
			_, err := Exec(context.Background(), cfg, Stdio{})
			var pr *PathRefusal
			if !errors.As(err, &pr) || pr.Rule != tc.rule || pr.Role != role || !errors.Is(err, errHostPath) || !errors.Is(err, errConfig) {
				t.Errorf("%s %s: %v, want rule %s", role, tc.dir, err, tc.rule)
			}
		}
	}
	// A real directory outside them passes the rules (and the bind path
	// is the resolved one).
	if got, err := CheckHostDir("workspace", filepath.Join(tmp, "real"), state); err != nil || got != filepath.Join(tmp, "real") {
		t.Errorf("a plain directory: %q, %v", got, err)
	}
	// `sandbox exec --workspace` also wants it empty, or a run's own.
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var pr *PathRefusal
	if err := CheckNewWorkspace(full, state); !errors.As(err, &pr) || pr.Rule != RuleNotEmpty {
		t.Errorf("a non-empty directory: %v, want rule %s", err, RuleNotEmpty)
	}
	if err := CheckNewWorkspace(t.TempDir(), state); err != nil {
		t.Errorf("an empty directory: %v", err)
	}
	if err := os.Chown(full, CandidateUID, CandidateUID); err != nil {
		t.Fatal(err)
	}
	if err := CheckNewWorkspace(full, state); err != nil {
		t.Errorf("a run's own workspace: %v", err)
	}
}

// A candidate that nests directories past the walk's depth to hide a
// set-uid file beneath them gets the workspace named unwalked, which the
// caller refuses; the walk does not run out of descriptors.
func TestWorkspaceTooDeep(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	ws := t.TempDir()
	res, _, stderr := runIn(t, Config{Workspace: ws}, `d=/workspace; i=0; while [ $i -lt 300 ]; do d=$d/d; i=$((i+1)); done; mkdir -p $d && cp /bin/true $d/x && chmod 4755 $d/x`)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, stderr)
	}
	var unwalked bool
	for _, f := range res.Workspace {
		unwalked = unwalked || (f.Rule == RuleUnwalked && strings.Contains(f.Detail, "deeper than 256"))
	}
	if !unwalked {
		t.Errorf("findings %+v, want %s", res.Workspace, RuleUnwalked)
	}
}
