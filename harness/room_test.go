package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// TestRoomSession is a full blind session with the Go SDK's client over a
// command transport: the tools as declared, every file byte-exact, the
// refusals, writes, and the kernel's view of the serving process.
func TestRoomSession(t *testing.T) {
	t.Parallel()
	needSeal(t)
	files := testFiles()
	pkg, id := writePackage(t, files)
	s := startSession(t, pkg, id)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("declared tools, instructions and prompt", func(t *testing.T) {
		if got := s.cs.InitializeResult().Instructions; got != testSystem {
			t.Errorf("instructions = %q, want the SYSTEM block %q", got, testSystem)
		}
		lt, err := s.cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][2]string{
			"list_files": {testListDesc, testListSch}, "read_file": {testReadDesc, testReadSch}, "write_source": {testWriteDesc, testWriteSch},
		}
		if len(lt.Tools) != 3 {
			t.Fatalf("%d tools, want 3", len(lt.Tools))
		}
		for _, tool := range lt.Tools {
			w, ok := want[tool.Name]
			if !ok {
				t.Fatalf("unexpected tool %q", tool.Name)
			}
			if tool.Description != w[0] {
				t.Errorf("%s description = %q, want %q", tool.Name, tool.Description, w[0])
			}
			got, _ := json.Marshal(tool.InputSchema)
			var a, b any
			if err := json.Unmarshal(got, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(w[1]), &b); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Errorf("%s schema = %s, want %s", tool.Name, got, w[1])
			}
		}
		gp, err := s.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: PromptName})
		if err != nil {
			t.Fatal(err)
		}
		if len(gp.Messages) != 1 || gp.Messages[0].Content.(*mcp.TextContent).Text != testUser {
			t.Errorf("prompt = %+v, want the USER block", gp.Messages)
		}
	})

	t.Run("list_files", func(t *testing.T) {
		want := strings.Join([]string{
			"experiment/CLEAN-ROOM-PROMPT-v1.md  (" + fmt.Sprint(len(files[PromptPath])) + " bytes)",
			"spec/ADD.md  (" + fmt.Sprint(len(files["spec/ADD.md"])) + " bytes)",
			"spec/deep/x.json  (8 bytes)",
			"vectors/bin.dat  (7 bytes)",
			"vectors/empty.txt  (0 bytes)",
		}, "\n")
		if got := textOf(t, s.call(t, "list_files", map[string]any{})); got != want {
			t.Errorf("listing:\n%s\nwant:\n%s", got, want)
		}
	})

	t.Run("read every file byte-exact", func(t *testing.T) {
		for p, b := range files {
			r := s.call(t, "read_file", map[string]any{"path": p})
			if r.IsError {
				t.Fatalf("read %s refused: %v", p, r.Content)
			}
			var got []byte
			switch c := r.Content[0].(type) {
			case *mcp.TextContent:
				got = []byte(c.Text)
			case *mcp.EmbeddedResource:
				got = c.Resource.Blob
			default:
				t.Fatalf("%s: content %T", p, c)
			}
			if sha(got) != sha(b) {
				t.Errorf("%s: served sha256 %s, wrote %s", p, sha(got), sha(b))
			}
		}
		if _, ok := s.call(t, "read_file", map[string]any{"path": "vectors/bin.dat"}).Content[0].(*mcp.EmbeddedResource); !ok {
			t.Errorf("a non-UTF-8 file must come as a blob resource")
		}
	})

	t.Run("refused reads name the key", func(t *testing.T) {
		for _, key := range []string{"./spec/ADD.md", "/spec/ADD.md", "../spec/ADD.md", "spec", "spec/", "SPEC/ADD.md", "spec/add.md", "spec//ADD.md", "", "spec/ADD.md\x00"} {
			r := s.call(t, "read_file", map[string]any{"path": key})
			if !r.IsError {
				t.Errorf("read %q served, want a refusal", key)
				continue
			}
			if txt := textOf(t, r); !strings.Contains(txt, fmt.Sprintf("%q", key)) {
				t.Errorf("refusal %q does not name the key %q", txt, key)
			}
		}
		// Arguments outside the declared schema are refused too, each for
		// its own reason.
		for _, c := range []struct {
			args map[string]any
			says string
		}{
			{map[string]any{}, `argument "path" is missing`},
			{map[string]any{"path": 3}, `argument "path" is a number, not a string`},
			{map[string]any{"path": "spec/ADD.md", "extra": "x"}, `argument "extra" is not a parameter of read_file`},
		} {
			r := s.call(t, "read_file", c.args)
			if !r.IsError {
				t.Errorf("read_file %v answered, want a refusal", c.args)
				continue
			}
			if txt := textOf(t, r); !strings.Contains(txt, c.says) {
				t.Errorf("read_file %v: refusal %q does not say %q", c.args, txt, c.says)
			}
		}
	})

	t.Run("write_source", func(t *testing.T) {
		writes := map[string]string{"add.go": "package add\n", "internal/x/y.go": "package x\n"}
		for p, c := range writes {
			if r := s.call(t, "write_source", map[string]any{"path": p, "content": c}); r.IsError {
				t.Fatalf("write %s refused: %s", p, textOf(t, r))
			}
		}
		// A rewrite replaces.
		s.call(t, "write_source", map[string]any{"path": "add.go", "content": "package add // v2\n"})
		writes["add.go"] = "package add // v2\n"
		for p, c := range writes {
			b, err := os.ReadFile(filepath.Join(s.workspace, p))
			if err != nil || string(b) != c {
				t.Errorf("workspace %s = %q, %v; want %q", p, b, err, c)
			}
		}
		// What was written cannot be read back through the room.
		if r := s.call(t, "read_file", map[string]any{"path": "add.go"}); !r.IsError {
			t.Errorf("read_file of a written file answered")
		}
	})

	pid := s.serverPID(t)
	mount := viewMount(t, pid)

	t.Run("kernel: view mount ro twice, no peer group", func(t *testing.T) {
		table, err := seal.ReadMountInfo(pid)
		if err != nil {
			t.Fatal(err)
		}
		at := seal.MountsAt(table, mount)
		if len(at) != 1 {
			t.Fatalf("%d mounts at %s in the server's namespace", len(at), mount)
		}
		m := at[0]
		if !slices.Contains(m.Options, "ro") || !slices.Contains(m.SuperOptions, "ro") || m.PeerGroup() != "" || m.FSType != "tmpfs" {
			t.Errorf("view mountinfo: %s", m.Line)
		}
		host, err := seal.ReadMountInfo(0)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(seal.MountsAt(host, mount)); n != 0 {
			t.Errorf("the host sees %d mounts at %s", n, mount)
		}
		if ents, err := os.ReadDir(mount); err != nil || len(ents) != 0 {
			t.Errorf("host's mount point: %d entries, %v; want empty", len(ents), err)
		}
	})

	t.Run("kernel: descriptors", func(t *testing.T) {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range fds {
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			switch {
			case fd.Name() == "0" || fd.Name() == "1" || fd.Name() == "2":
			case strings.HasPrefix(target, "anon_inode:") || strings.HasPrefix(target, "pipe:"):
				// the Go runtime's poller and wakeup descriptors
			case target == s.workspace || target == s.tpath:
				// the session's own records, outside the view
			default:
				t.Errorf("server has fd %s -> %s", fd.Name(), target)
			}
			if strings.HasPrefix(target, mount) || strings.HasPrefix(target, "socket:") || strings.Contains(target, "memfd:") {
				t.Errorf("server has fd %s -> %s (into the view, a socket or the manifest)", fd.Name(), target)
			}
		}
	})

	t.Run("kernel: no capabilities, no_new_privs", func(t *testing.T) {
		ps, err := seal.ReadPrivileges(pid)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.CapEff != 0 || p.CapPrm != 0 || p.CapInh != 0 || p.CapBnd != 0 || p.CapAmb != 0 || !p.NoNewPrivs {
				t.Errorf("thread %d: %+v", p.Task, p)
			}
		}
	})

	t.Run("kernel: no interface up, connect fails at the transport layer", func(t *testing.T) {
		ns, err := netns.GetFromPid(pid)
		if err != nil {
			t.Fatal(err)
		}
		defer ns.Close()
		h, err := netlink.NewHandleAt(ns)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		links, err := h.LinkList()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if l.Attrs().Flags&net.FlagUp != 0 {
				t.Errorf("interface %s is up", l.Attrs().Name)
			}
		}
		errs := dialInNetns(t, ns, []string{"127.0.0.1:80", "10.0.0.1:80", "[::1]:80", "1.1.1.1:443"})
		for addr, err := range errs {
			// EADDRNOTAVAIL: with lo down, ::1 is not even a local address.
			if !errors.Is(err, syscall.ENETUNREACH) && !errors.Is(err, syscall.EHOSTUNREACH) && !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.EADDRNOTAVAIL) {
				t.Errorf("connect %s from the room's namespace: %v, want a transport-layer failure", addr, err)
			}
		}
	})

	t.Run("AC5 write into the view after the seal fails, bytes unchanged", func(t *testing.T) {
		target := filepath.Join(fmt.Sprintf("/proc/%d/root", pid), mount, "spec/ADD.md")
		err := os.WriteFile(target, []byte("MALICIOUS_AFTER_VERIFY"), 0o644)
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("writing the sealed view: %v, want EROFS", err)
		}
		err = os.WriteFile(filepath.Join(fmt.Sprintf("/proc/%d/root", pid), mount, "BLIND-PACKAGE.json"), []byte("{}"), 0o644)
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("adding a file to the sealed view: %v, want EROFS", err)
		}
		if got := textOf(t, s.call(t, "read_file", map[string]any{"path": "spec/ADD.md"})); got != string(files["spec/ADD.md"]) {
			t.Errorf("served bytes changed: %q", got)
		}
	})

	// AC7: after the session the host's mount table holds nothing of it and
	// the mount point is gone.
	if err := s.cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if err := s.cmd.Wait(); err != nil && !strings.Contains(err.Error(), "wait") {
		// CommandTransport already waited; nothing to assert here.
		_ = err
	}
	t.Run("AC7 host untouched after exit", func(t *testing.T) {
		if _, err := os.Stat(mount); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("mount point %s still exists: %v", mount, err)
		}
		host, err := seal.ReadMountInfo(0)
		if err != nil {
			t.Fatal(err)
		}
		// This room's mount point only: other rooms (parallel tests, other
		// packages) may be serving.
		for _, m := range host {
			if m.MountPoint == mount || strings.HasPrefix(m.MountPoint, mount+"/") {
				t.Errorf("host mount table holds %s", m.Line)
			}
		}
	})

	t.Run("transcript", func(t *testing.T) {
		doc := readTranscript(t, s.tpath)
		start, end := doc[0], doc[len(doc)-1]
		for k, want := range map[string]any{"type": TranscriptType, "blind_package_id": id, "served_file_count": float64(len(files)),
			"instruction_path": PromptPath, "instruction_sha256": sha(files[PromptPath])} {
			if got, _ := start.Get(k); got != want {
				t.Errorf("start %s = %v, want %v", k, got, want)
			}
		}
		if mi, _ := start.Get("view_mountinfo"); !strings.Contains(fmt.Sprint(mi), " ro,") || !strings.Contains(fmt.Sprint(mi), "tmpfs cleanroom-view ro,") {
			t.Errorf("view_mountinfo %q does not show ro per mount and at the superblock", mi)
		}
		if sd, _ := start.Get("seal_digest"); sd != sealDigestOf(files) {
			t.Errorf("seal_digest = %v, want %s", sd, sealDigestOf(files))
		}
		if ev, _ := end.Get("event"); ev != "end" {
			t.Fatalf("last line is %v, want end", ev)
		}
		fr, _ := end.Get("files_read")
		if len(fr.([]any)) != len(files) {
			t.Errorf("files_read = %v", fr)
		}
		rr, _ := end.Get("refused_reads")
		if !slices.Contains(rr.([]any), any("../spec/ADD.md")) {
			t.Errorf("refused_reads = %v lacks ../spec/ADD.md", rr)
		}
		fw, _ := end.Get("files_written")
		var got []string
		for _, w := range fw.([]any) {
			o := w.(*evidence.Object)
			p, _ := o.Get("path")
			h, _ := o.Get("sha256")
			got = append(got, fmt.Sprint(p, " ", h))
		}
		want := []string{"add.go " + sha([]byte("package add // v2\n")), "internal/x/y.go " + sha([]byte("package x\n"))}
		if !slices.Equal(got, want) {
			t.Errorf("files_written = %v, want %v", got, want)
		}
		for _, l := range doc[1 : len(doc)-1] {
			if ts, _ := l.Get("time"); ts == nil {
				t.Errorf("call without a timestamp: %v", l)
			}
		}
	})
}

// sealDigestOf computes seal_digest independently of the code under test.
func sealDigestOf(files map[string][]byte) string {
	var lines []string
	for _, p := range slices.Sorted(maps.Keys(files)) {
		lines = append(lines, p+"\t"+sha(files[p]))
	}
	return sha([]byte(strings.Join(lines, "\n")))
}

func readTranscript(t *testing.T, p string) []*evidence.Object {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []*evidence.Object
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		o, err := evidence.ReadObject(sc.Bytes())
		if err != nil {
			t.Fatalf("transcript line %q: %v", sc.Text(), err)
		}
		out = append(out, o)
	}
	if len(out) < 2 {
		t.Fatalf("transcript has %d lines", len(out))
	}
	return out
}

// dialInNetns connects from a thread moved into ns; the thread is never
// returned to the pool (the goroutine exits locked, so Go ends it).
func dialInNetns(t *testing.T, ns netns.NsHandle, addrs []string) map[string]error {
	t.Helper()
	out := map[string]error{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			out["setns"] = err
			return
		}
		for _, a := range addrs {
			host, port, _ := net.SplitHostPort(a)
			ip := net.ParseIP(host)
			fam, sa := unix.AF_INET, unix.Sockaddr(nil)
			if ip.To4() != nil {
				s4 := &unix.SockaddrInet4{Port: atoi(port)}
				copy(s4.Addr[:], ip.To4())
				sa = s4
			} else {
				fam = unix.AF_INET6
				s6 := &unix.SockaddrInet6{Port: atoi(port)}
				copy(s6.Addr[:], ip.To16())
				sa = s6
			}
			// A raw socket on this thread: the Go net package would dial
			// from whatever thread its poller runs on.
			fd, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				out[a] = err
				continue
			}
			out[a] = unix.Connect(fd, sa)
			unix.Close(fd)
		}
	}()
	<-done
	return out
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestRoomProtocolVersions: the room answers clients of the stateless
// protocol (the SDK's default) and of the initialize-handshake era alike.
func TestRoomProtocolVersions(t *testing.T) {
	t.Parallel()
	needSeal(t)
	files := testFiles()
	pkg, id := writePackage(t, files)
	for _, proto := range []string{"2025-11-25", "2025-06-18", "2024-11-05"} {
		t.Run(proto, func(t *testing.T) {
			s := startSessionProto(t, proto, pkg, id)
			if got := s.cs.InitializeResult().ProtocolVersion; got != proto {
				t.Errorf("negotiated %s, offered %s", got, proto)
			}
			if got := s.cs.InitializeResult().Instructions; got != testSystem {
				t.Errorf("instructions %q", got)
			}
			if got := textOf(t, s.call(t, "read_file", map[string]any{"path": "spec/ADD.md"})); got != string(files["spec/ADD.md"]) {
				t.Errorf("read_file = %q", got)
			}
		})
	}
}

// TestRoomUnprivileged runs the room as an unprivileged user (uid 65534):
// the seal then happens in a user namespace that maps that uid to 0. It
// needs root to switch users and a kernel that allows user namespaces.
func TestRoomUnprivileged(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("switching to an unprivileged uid needs root")
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err != nil || strings.TrimSpace(string(b)) == "0" {
		t.Skipf("user namespaces are disabled here (%q, %v)", b, err)
	}
	// A directory the unprivileged user can traverse, holding a copy of
	// this test binary and the package.
	base, err := os.MkdirTemp("", "room-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o777); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "harness.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	files := testFiles()
	src, id := writePackage(t, files)
	pkg := filepath.Join(base, "pkg")
	if err := os.CopyFS(pkg, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(pkg, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
	ws, tpath := filepath.Join(base, "ws"), filepath.Join(base, "t.jsonl")
	cmd := exec.Command(bin, serveMarker, pkg, id, ws, tpath)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Skipf("the room could not start unprivileged here (%v): %s", err, stderr.String())
	}
	defer cs.Close()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "spec/ADD.md"}})
	if err != nil || r.IsError || r.Content[0].(*mcp.TextContent).Text != string(files["spec/ADD.md"]) {
		t.Fatalf("read_file unprivileged: %v %v", r, err)
	}
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_source", Arguments: map[string]any{"path": "a.go", "content": "package a\n"}}); err != nil || r.IsError {
		t.Fatalf("write_source unprivileged: %v %v", r, err)
	}
	// The server: a user namespace mapping 65534 to 0, the view sealed.
	s := &session{cmd: cmd}
	pid := s.serverPID(t)
	if m, _ := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", pid)); strings.Join(strings.Fields(string(m)), " ") != "0 65534 1" {
		t.Errorf("server uid_map %q, want 0 65534 1", m)
	}
	mount := viewMount(t, pid)
	table, err := seal.ReadMountInfo(pid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seal.CheckSealedEntry(mount, seal.MountsAt(table, mount)); err != nil {
		t.Errorf("unprivileged view: %v", err)
	}
	fi, err := os.Stat(filepath.Join(ws, "a.go"))
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Errorf("workspace file owner: %v %v", fi, err)
	}
}

// TestRoomSignal: a SIGTERM to `room serve` ends the session cleanly — the
// transcript gets its end line and the mount point is removed.
func TestRoomSignal(t *testing.T) {
	t.Parallel()
	needSeal(t)
	pkg, id := writePackage(t, testFiles())
	s := startSession(t, pkg, id)
	s.call(t, "read_file", map[string]any{"path": "spec/ADD.md"})
	mount := viewMount(t, s.serverPID(t))
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { _ = s.cs.Wait(); close(done) }() // the end is asserted, not how
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the room did not end on SIGTERM")
	}
	// The session's end is the server's exit; wait for the Serve process.
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(mount); errors.Is(err, os.ErrNotExist) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(mount); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("mount point %s left behind: %v", mount, err)
	}
	doc := readTranscript(t, s.tpath)
	if ev, _ := doc[len(doc)-1].Get("event"); ev != "end" {
		t.Errorf("transcript's last event %v, want end", ev)
	}
}
