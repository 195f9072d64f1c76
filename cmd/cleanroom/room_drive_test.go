package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// scriptedModel is a stand-in chat-completions endpoint on loopback:
// step i answers request i (the last step answers every later one), and
// every request's body is kept.
type scriptedModel struct {
	mu     sync.Mutex
	steps  []func(w http.ResponseWriter, r *http.Request)
	bodies []map[string]any
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.bodies = append(m.bodies, body)
	step := m.steps[min(len(m.bodies)-1, len(m.steps)-1)]
	m.mu.Unlock()
	step(w, r)
}

func (m *scriptedModel) requests() []map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]map[string]any(nil), m.bodies...)
}

// reply answers with one assistant message and a finish_reason.
func reply(message, finish string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"choices":[{"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`, message, finish)
	}
}

// calls is an assistant message calling tools: name, arguments pairs.
func calls(idPrefix string, nameArgs ...string) string {
	var cs []string
	for i := 0; i < len(nameArgs); i += 2 {
		a, _ := json.Marshal(nameArgs[i+1])
		cs = append(cs, fmt.Sprintf(`{"id":"%s%d","type":"function","function":{"name":%q,"arguments":%s}}`, idPrefix, i/2, nameArgs[i], a))
	}
	return `{"role":"assistant","content":null,"tool_calls":[` + strings.Join(cs, ",") + `]}`
}

func status(code int, header ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		http.Error(w, `{"error":"busy"}`, code)
	}
}

// resetConnection ends the request's TCP connection with a reset (no
// response at all).
func resetConnection(w http.ResponseWriter, _ *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	if err := conn.(*net.TCPConn).SetLinger(0); err != nil {
		panic(err) // a FIN, not the reset the caller asserts
	}
	conn.Close()
}

func needRoom(t *testing.T) {
	t.Helper()
	if err := exec.Command("unshare", "-m", "-n", "true").Run(); err != nil {
		t.Skipf("cannot create mount+network namespaces here: %v", err)
	}
}

// driveArgs are `room drive` arguments against the endpoint, with retry
// waits of at most 20 ms.
func driveArgs(endpoint string, more ...string) []string {
	return append([]string{"room", "drive", "--model", "m1", "--endpoint", endpoint, "--api-key-env", "ROOM_TEST_KEY",
		"--package", roomPackageAbs, "--expect", roomPackagePin, "--retry-base", "1ms", "--retry-max-wait", "20ms", "--max-turns", "20"}, more...)
}

var roomPackageAbs, _ = filepath.Abs(filepath.Join("..", "..", "harness", "testdata", "room-package"))

func driveCommand(bin string, args []string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "ROOM_TEST_KEY=sk-cli")
	return cmd
}

// transcriptDoc reads a transcript with `room transcript --json`, which
// must accept it.
func transcriptDoc(t *testing.T, path string) map[string]any {
	t.Helper()
	code, stdout, stderr := runCLI(t, "room", "transcript", "--json", path)
	if code != 0 {
		t.Fatalf("room transcript: exit %d\n%s", code, stderr)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// transcriptEvents returns the transcript's lines with the given event.
func transcriptEvents(t *testing.T, path, event string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("transcript line %.100q: %v", l, err)
		}
		if m["event"] == event {
			out = append(out, m)
		}
	}
	return out
}

// TestRoomDriveSurvives drives the sealed room against an endpoint that
// answers 429 with Retry-After, then 503, then resets the connection, then
// the model calls a tool that does not exist, then read_file with empty
// arguments, then a reply cut at the token limit, then valid calls and a
// stop: the session completes (exit 0), every retry and tool error is in
// the transcript, and the transcript reads.
func TestRoomDriveSurvives(t *testing.T) {
	t.Parallel()
	needRoom(t)
	bin := roomBinary(t)
	m := &scriptedModel{steps: []func(http.ResponseWriter, *http.Request){
		status(http.StatusTooManyRequests, "Retry-After", "1"),
		status(http.StatusServiceUnavailable),
		resetConnection,
		reply(calls("a", "delete_package", `{}`), "tool_calls"),
		reply(calls("b", "read_file", ""), "tool_calls"),
		reply(`{"role":"assistant","content":"I will now write the fi"}`, "length"),
		reply(calls("c", "list_files", `{}`, "read_file", `{"path":"spec/SORTED.md"}`, "write_source", `{"path":"sorted/sorted.go","content":"package sorted\n"}`), "tool_calls"),
		reply(`{"role":"assistant","content":"done"}`, "stop"),
	}}
	srv := httptest.NewServer(m)
	defer srv.Close()
	base := t.TempDir()
	ws, tpath := filepath.Join(base, "ws"), filepath.Join(base, "t.jsonl")
	cmd := driveCommand(bin, driveArgs(srv.URL, "--workspace", ws, "--transcript", tpath))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("room drive: %v\nstdout %s\nstderr %s", err, &stdout, &stderr)
	}
	if !strings.Contains(stdout.String(), "stop model_stopped") || !strings.Contains(stdout.String(), "3 retries, 2 tool errors") {
		t.Errorf("output %q", &stdout)
	}
	if !strings.Contains(stderr.String(), "turn 2/20: 1 calls (read_file), 1 tool errors") {
		t.Errorf("no progress line for turn 2 on stderr:\n%s", &stderr)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "sorted", "sorted.go")); err != nil || string(b) != "package sorted\n" {
		t.Errorf("workspace: %q, %v", b, err)
	}
	if n := len(m.requests()); n != 8 {
		t.Errorf("the endpoint saw %d requests, want 8", n)
	}

	doc := transcriptDoc(t, tpath)
	if doc["stop"] != "model_stopped" || doc["complete"] != true {
		t.Errorf("transcript stop %v complete %v", doc["stop"], doc["complete"])
	}
	retries := transcriptEvents(t, tpath, "retry")
	var reasons []string
	for _, r := range retries {
		reasons = append(reasons, fmt.Sprint(r["reason"]))
	}
	want := []string{"HTTP 429", "HTTP 503", "model request connection failed", "cut_off: finish_reason length"}
	if len(reasons) != len(want) {
		t.Fatalf("retry lines %q, want %q", reasons, want)
	}
	for i := range want {
		if reasons[i] != want[i] {
			t.Errorf("retry %d: %q, want %q", i, reasons[i], want[i])
		}
	}
	// Retry-After: 1 (second) is honoured up to --retry-max-wait (20 ms);
	// the backoff of the first retry would be about --retry-base (1 ms).
	if retries[0]["wait_ms"] != float64(20) {
		t.Errorf("429 with Retry-After waited %v ms, want the 20 ms cap", retries[0]["wait_ms"])
	}
	if d := len(doc["retries"].([]any)); d != 4 {
		t.Errorf("document retries %d, want 4", d)
	}
	drive := transcriptEvents(t, tpath, "drive")
	if len(drive) != 1 || drive[0]["tool_errors"] != float64(2) || drive[0]["retries"] != float64(3) || drive[0]["cut_offs"] != float64(1) {
		t.Errorf("drive line %v", drive)
	}
	// The tool errors were answered to the model, and the room was never
	// asked: its calls are the three valid ones.
	refusals := map[string]string{}
	for _, msg := range doc["messages"].([]any) {
		mm := msg.(map[string]any)
		if mm["role"] == "tool" {
			refusals[fmt.Sprint(mm["tool_call_id"])] = fmt.Sprint(mm["content"])
		}
	}
	if !strings.Contains(refusals["a0"], `no tool named "delete_package"`) || refusals["b0"] != "REFUSED: arguments are empty" {
		t.Errorf("tool answers %q", refusals)
	}
	if n := len(doc["access"].([]any)); n != 3 {
		t.Errorf("the room recorded %d calls, want 3", n)
	}
	// The cut reply was asked again, not added: the request after it holds
	// the same conversation as the one that was cut.
	reqs := m.requests()
	if a, b := len(reqs[5]["messages"].([]any)), len(reqs[6]["messages"].([]any)); a != b {
		t.Errorf("the request after the cut reply holds %d messages, the cut one %d", b, a)
	}
}

// TestRoomDriveResume kills `room drive` mid-session (SIGKILL, while the
// model is thinking), then `room drive --resume` continues it in the same
// workspace against a freshly sealed room: the model is sent the recorded
// conversation, the session completes, and the transcript (two sessions,
// one resumption) verifies.
func TestRoomDriveResume(t *testing.T) {
	t.Parallel()
	needRoom(t)
	bin := roomBinary(t)
	thinking := make(chan struct{}, 1)
	m := &scriptedModel{steps: []func(http.ResponseWriter, *http.Request){
		reply(calls("a", "write_source", `{"path":"a.go","content":"package a\n"}`), "tool_calls"),
		reply(calls("b", "read_file", `{"path":"spec/SORTED.md"}`), "tool_calls"),
		func(w http.ResponseWriter, r *http.Request) {
			thinking <- struct{}{}
			<-r.Context().Done() // until the relay is killed
		},
		reply(calls("c", "write_source", `{"path":"b.go","content":"package b\n"}`), "tool_calls"),
		reply(`{"role":"assistant","content":"done"}`, "stop"),
	}}
	srv := httptest.NewServer(m)
	defer srv.Close()
	base := t.TempDir()
	ws, tpath := filepath.Join(base, "ws"), filepath.Join(base, "t.jsonl")
	cmd := driveCommand(bin, driveArgs(srv.URL, "--workspace", ws, "--transcript", tpath))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-thinking:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the third request never came; stderr:\n%s", &stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	// The room, its stdin closed, ends its record.
	deadline := time.Now().Add(30 * time.Second)
	for len(transcriptEvents(t, tpath, "end")) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the room never ended its record; stderr:\n%s", &stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := transcriptEvents(t, tpath, "drive"); len(d) != 0 {
		t.Fatalf("a killed relay wrote a drive line: %v", d)
	}

	resume := driveCommand(bin, driveArgs(srv.URL, "--resume", tpath))
	out, err := resume.CombinedOutput()
	if err != nil {
		t.Fatalf("room drive --resume: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "stop model_stopped") {
		t.Errorf("output %s", out)
	}
	for name, want := range map[string]string{"a.go": "package a\n", "b.go": "package b\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("workspace %s: %q, %v", name, b, err)
		}
	}
	// The first request of the resumed session is the recorded
	// conversation: the opening, two turns and their answers (the third
	// turn, in flight when the relay was killed, is asked again: four
	// turns in all).
	reqs := m.requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests, want 5", len(reqs))
	}
	before, after := reqs[2]["messages"].([]any), reqs[3]["messages"].([]any)
	bj, _ := json.Marshal(before)
	aj, _ := json.Marshal(after)
	if len(after) != 6 || !bytes.Equal(bj, aj) {
		t.Errorf("the resumed session sent %d messages %s, want the 6 recorded %s", len(after), aj, bj)
	}
	doc := transcriptDoc(t, tpath)
	if doc["stop"] != "model_stopped" || doc["complete"] != true || len(doc["resumptions"].([]any)) != 1 || doc["turns"] != float64(4) {
		t.Errorf("transcript: stop %v complete %v resumptions %v turns %v", doc["stop"], doc["complete"], doc["resumptions"], doc["turns"])
	}
	if fw := doc["files_written"].([]any); len(fw) != 2 {
		t.Errorf("files_written %v, want a.go and b.go", fw)
	}
	if starts := transcriptEvents(t, tpath, "start"); len(starts) != 2 || starts[1]["resumed"] != true {
		t.Errorf("start lines %v", starts)
	}

	// A completed session is not resumed, and an edit of the record is
	// seen: both refused (exit 1).
	if code, _, stderr := runCLI(t, driveArgs(srv.URL, "--resume", tpath)...); code != 1 || !strings.Contains(stderr, "transcript cannot be resumed") {
		t.Errorf("resuming a completed session: exit %d, %s", code, stderr)
	}
	b, _ := os.ReadFile(tpath)
	edited := bytes.Replace(b, []byte(`"turn":1,`), []byte(`"turn":9,`), 1)
	if bytes.Equal(edited, b) {
		t.Fatal("the edit changed nothing")
	}
	epath := filepath.Join(base, "edited.jsonl")
	if err := os.WriteFile(epath, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "room", "transcript", epath); code != 1 || !strings.Contains(stderr, "prefix_sha256") {
		t.Errorf("an edited record before the resumption: exit %d, %s", code, stderr)
	}
}

// TestRoomServeSessions launches `room serve --sessions DIR` three times in
// a row from the official Go SDK client, one fixed command line: three
// sessions, each with its own workspace and transcript; `room sessions`
// lists them, and ignores what is not a session.
func TestRoomServeSessions(t *testing.T) {
	t.Parallel()
	needRoom(t)
	bin := roomBinary(t)
	dir := filepath.Join(t.TempDir(), "sessions")
	for i := range 3 {
		cmd := exec.Command(bin, "room", "serve", "--package", roomPackageAbs, "--expect", roomPackagePin, "--sessions", dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		client := mcp.NewClient(&mcp.Implementation{Name: "sessions-test", Version: "v0"}, nil)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			cancel()
			t.Fatalf("launch %d: %v\n%s", i, err, &stderr)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_source", Arguments: map[string]any{"path": fmt.Sprintf("s%d.go", i), "content": "package s\n"}})
		if err != nil || res.IsError {
			t.Errorf("launch %d: write_source %v %v", i, res, err)
		}
		if err := cs.Close(); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("launch %d: close: %v\n%s", i, err, &stderr)
		}
		cancel()
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a session"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "other"), 0o755); err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := runCLI(t, "--json", "room", "sessions", dir)
	if code != 0 {
		t.Fatalf("room sessions: exit %d: %s", code, stderr)
	}
	var list []sessionEntry
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || len(list) != 3 {
		t.Fatalf("room sessions listed %s (%v), want 3 sessions", stdout, err)
	}
	seen := map[string]bool{}
	for i, s := range list {
		if s.State != "complete" || s.FilesWritten != 1 || seen[s.Dir] || filepath.Dir(s.Dir) != dir {
			t.Errorf("session %d: %+v", i, s)
		}
		seen[s.Dir] = true
		if _, err := os.Stat(filepath.Join(s.Workspace, fmt.Sprintf("s%d.go", i))); err != nil {
			t.Errorf("session %d workspace: %v", i, err)
		}
		if _, err := os.Stat(s.Transcript); err != nil {
			t.Errorf("session %d transcript: %v", i, err)
		}
	}
	if code, text, _ := runCLI(t, "room", "sessions", dir); code != 0 || !strings.Contains(text, "3 sessions in") {
		t.Errorf("room sessions (text): exit %d, %s", code, text)
	}

	// A session whose room is serving is listed as running.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	live := exec.Command(bin, "room", "serve", "--package", roomPackageAbs, "--expect", roomPackagePin, "--sessions", dir)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sessions-test", Version: "v0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: live}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, stdout, _ = runCLI(t, "--json", "room", "sessions", dir)
	cs.Close()
	list = nil
	if err := json.Unmarshal([]byte(stdout), &list); err != nil || len(list) != 4 || list[3].State != "running" || list[0].State != "complete" {
		t.Errorf("room sessions with one room serving: %s (%v)", stdout, err)
	}

	// A launch the room refuses (another pin) leaves no session behind,
	// and --sessions excludes --workspace.
	refused := filepath.Join(t.TempDir(), "refused")
	cmd := exec.Command(bin, "room", "serve", "--package", roomPackageAbs, "--expect", "bpkg-"+strings.Repeat("0", 64), "--sessions", refused)
	cmd.Stdin = strings.NewReader("")
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Errorf("room serve --sessions of another pin: %v, want exit 1", err)
	}
	if entries, err := os.ReadDir(refused); err != nil || len(entries) != 0 {
		t.Errorf("a refused launch left %v (%v)", entries, err)
	}
	if code, _, stderr := runCLI(t, "room", "serve", "--package", roomPackageAbs, "--expect", roomPackagePin, "--sessions", refused, "--workspace", filepath.Join(refused, "ws")); code != 2 || !strings.Contains(stderr, "--sessions excludes") {
		t.Errorf("--sessions with --workspace: exit %d, %s", code, stderr)
	}
}
