package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/bench/mcpclient"
	"github.com/cleanroom-dev/cleanroom/harness"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// roomBinary is the cleanroom binary the CLI tests share: the room re-executes itself, so
// it cannot run inside the test binary.
func roomBinary(t *testing.T) string {
	t.Helper()
	bin, _ := cliBinary(t) // one build for every test that runs the binary
	return bin
}

func TestRoomServeCLI(t *testing.T) {
	t.Parallel()
	if err := exec.Command("unshare", "-m", "-n", "true").Run(); err != nil {
		t.Skipf("cannot create mount+network namespaces here: %v", err)
	}
	bin := roomBinary(t)
	ws := filepath.Join(t.TempDir(), "ws")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no package", []string{"room", "serve", "--workspace", ws}, 2, "--world DIR, or --package DIR"},
		{"world and package", []string{"room", "serve", "--world", "w", "--package", "p", "--workspace", ws}, 2, "--world excludes"},
		{"bad pin", []string{"room", "serve", "--package", ".", "--expect", "bpkg-xyz", "--workspace", ws}, 2, "bpkg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, c.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.Stdin = strings.NewReader("")
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			if code != c.code || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d naming %q", code, stderr.String(), c.code, c.want)
			}
			if _, err := os.Stat(ws); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("workspace created by a refused room")
			}
		})
	}
}

// TestRoomServeWorld: the reference world lacks its .mjs files by design,
// so its run does not verify (its tree is not the pinned bpkg of its run
// record), and the room must refuse to serve it (exit 1, naming the rules).
func TestRoomServeWorld(t *testing.T) {
	t.Parallel()
	world := testshared.World(t, "world")
	if err := exec.Command("unshare", "-m", "-n", "true").Run(); err != nil {
		t.Skipf("cannot create mount+network namespaces here: %v", err)
	}
	bin := roomBinary(t)
	ws := filepath.Join(t.TempDir(), "ws")
	cmd := exec.Command(bin, "room", "serve", "--world", world, "--workspace", ws)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), errRoomUnverified.Error()) ||
		!strings.Contains(stderr.String(), "blind package problem") {
		t.Errorf("room serve --world: %v, stderr %q; want exit 1 naming %q and %q", err, stderr.String(), errRoomUnverified, "blind package problem")
	}
}

// TestRoomDriveCLI runs `room drive` end to end against a scripted
// chat-completions server on 127.0.0.1, on the synthetic room package.
func TestRoomDriveCLI(t *testing.T) {
	t.Parallel()
	if err := exec.Command("unshare", "-m", "-n", "true").Run(); err != nil {
		t.Skipf("cannot create mount+network namespaces here: %v", err)
	}
	bin := roomBinary(t)
	var mu sync.Mutex
	var auth []string
	replies := []string{
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"write_source","arguments":"{\"path\":\"sorted/sorted.go\",\"content\":\"package sorted\\n\"}"}}]}`,
		`{"role":"assistant","content":"done"}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		auth = append(auth, r.Header.Get("Authorization"))
		i := min(len(auth)-1, len(replies)-1)
		fmt.Fprintf(w, `{"choices":[{"message":%s}],"usage":{"total_tokens":5}}`, replies[i])
	}))
	defer srv.Close()
	base := t.TempDir()
	ws, tpath := filepath.Join(base, "ws"), filepath.Join(base, "t.jsonl")
	pkg, _ := filepath.Abs(filepath.Join("..", "..", "harness", "testdata", "room-package"))
	cmd := exec.Command(bin, "room", "drive", "--model", "m1", "--endpoint", srv.URL, "--api-key-env", "ROOM_TEST_KEY",
		"--package", pkg, "--expect", "bpkg-bf608ff8dd92dee2a27258aaed6d594ffcaea9b5975ae1728f5a772adaad86b4",
		"--workspace", ws, "--transcript", tpath, "--max-turns", "5")
	cmd.Env = append(os.Environ(), "ROOM_TEST_KEY=sk-cli")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("room drive: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "stop model_stopped") {
		t.Errorf("output %q", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) != 2 || auth[0] != "Bearer sk-cli" {
		t.Errorf("model saw %d requests, auth %q", len(auth), auth)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "sorted", "sorted.go")); err != nil || string(b) != "package sorted\n" {
		t.Errorf("workspace: %q, %v", b, err)
	}
	code, stdout, stderr := runCLI(t, "room", "transcript", "--json", tpath)
	if code != 0 || !strings.Contains(stdout, `"stop": "model_stopped"`) || !strings.Contains(stdout, `"complete": true`) {
		t.Errorf("room transcript: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestRoomServeWorldPin serves a pinned world only while its run
// verifies: the pinned run is served; the same world with its record edited
// to name another package (run verify: NOT VERIFIED) is refused, exit 1,
// naming the rule, before anything is served.
func TestRoomServeWorldPin(t *testing.T) {
	t.Parallel()
	if err := exec.Command("unshare", "-m", "-n", "true").Run(); err != nil {
		t.Skipf("cannot create mount+network namespaces here: %v", err)
	}
	bin := roomBinary(t)
	world := runWorld(t)
	if code, _, errs := runCLI(t, "run", "pin", "--world", world, "--reference", filepath.Join(world, "governance", "reference-adapter.json")); code != 0 {
		t.Fatalf("run pin: %d %s", code, errs)
	}
	spec, err := os.ReadFile(filepath.Join(world, "docs", "spec", "proof-wire", "TOY-TALLY-v1.md"))
	if err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(world, "governance", "blind-run.json")
	for _, c := range []struct {
		name string
		edit func(t *testing.T)
		code int
	}{
		{"pinned", func(*testing.T) {}, 0},
		{"record edited to name another package", func(t *testing.T) {
			b, err := os.ReadFile(record)
			if err != nil {
				t.Fatal(err)
			}
			re := regexp.MustCompile(`bpkg-[0-9a-f]{64}`)
			if !re.Match(b) {
				t.Fatalf("no blind_package_id in %s", b)
			}
			if err := os.WriteFile(record, re.ReplaceAll(b, []byte("bpkg-"+strings.Repeat("0", 64))), 0o644); err != nil {
				t.Fatal(err)
			}
			if code, _, _ := runCLI(t, "run", "verify", "--world", world); code != 1 {
				t.Fatalf("run verify of the edited record: exit %d, want 1", code)
			}
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.edit(t)
			ws := filepath.Join(t.TempDir(), "ws")
			cmd := exec.Command(bin, "room", "serve", "--world", world, "--workspace", ws)
			stdin, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The room may refuse and exit before reading: its exit code is
			// what is asserted, not this write.
			_, _ = io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"TOY-TALLY-v1.md"}}}
`)
			// Read until the call is answered (or the room exits), then end
			// the session by closing stdin.
			var stdout strings.Builder
			sc := bufio.NewScanner(out)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				stdout.WriteString(sc.Text() + "\n")
				if strings.Contains(sc.Text(), `"id":2`) {
					break
				}
			}
			stdin.Close()
			_, _ = io.Copy(io.Discard, out) // drained so that Wait returns; its status is asserted
			err := cmd.Wait()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, c.code, stderr.String())
			}
			want, _ := json.Marshal(string(spec))
			if c.code == 0 && !strings.Contains(stdout.String(), string(want)) {
				t.Errorf("the specification was not served: %.300s", stdout.String())
			}
			if c.code == 1 {
				for _, rule := range []string{errRoomUnverified.Error(), "run_id does not identify the record"} {
					if !strings.Contains(stderr.String(), rule) {
						t.Errorf("stderr does not name %q: %s", rule, stderr.String())
					}
				}
				if stdout.Len() != 0 {
					t.Errorf("a refused room served: %s", stdout.String())
				}
				if _, err := os.Stat(ws); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a refused room created its workspace")
				}
			}
		})
	}
}

// roomPackagePin is the bpkg of harness/testdata/room-package.
const roomPackagePin = "bpkg-bf608ff8dd92dee2a27258aaed6d594ffcaea9b5975ae1728f5a772adaad86b4"

// servingExe runs one room session with the cleanroom binary bin on the
// synthetic room package (initialize, list_files, end) and returns the
// executable of the process that served it, read from /proc while it did.
func servingExe(t *testing.T, bin string) string {
	t.Helper()
	pkg, _ := filepath.Abs(filepath.Join("..", "..", "harness", "testdata", "room-package"))
	cmd := exec.Command(bin, "room", "serve", "--package", pkg, "--expect", roomPackagePin, "--workspace", filepath.Join(t.TempDir(), "ws"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cl, err := mcpclient.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	// A session that hangs fails the test instead of waiting.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.Initialize(ctx); err != nil {
		t.Fatalf("initialize: %v (stderr %q; close: %v)", err, stderr.String(), cl.Close(0))
	}
	// The command's one child is the sealed server: the seal stage that
	// became the serve stage by exec. It was forked by one of the
	// command's threads, so every thread's children are listed.
	var children []string
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", cl.Pid()))
	for _, task := range tasks {
		b, _ := os.ReadFile(task)
		children = append(children, strings.Fields(string(b))...)
	}
	if len(children) != 1 {
		t.Fatalf("children of room serve: %q (close: %v)", children, cl.Close(0))
	}
	exe, err := os.Readlink("/proc/" + children[0] + "/exe")
	if err != nil {
		t.Fatalf("%v (close: %v)", err, cl.Close(0))
	}
	if got, err := cl.CallTool(ctx, "list_files", map[string]any{}); err != nil || !strings.Contains(got, "spec/SORTED.md") {
		t.Errorf("list_files answered %q, %v", got, err)
	}
	if err := cl.Close(time.Minute); err != nil {
		t.Fatalf("room serve: %v (stderr %q)", err, stderr.String())
	}
	return exe
}

// TestRoomStageBinary: `room serve` runs the sealed stages in the room
// binary built with it (make's layout), and in its own binary when the
// room binary beside it is from another build; the session is served
// either way, and `version` says which.
func TestRoomStageBinary(t *testing.T) {
	t.Parallel()
	if err := exec.Command("unshare", "-m", "-n", "true").Run(); err != nil {
		t.Skipf("cannot create mount+network namespaces here: %v", err)
	}
	bin, dir := cliBinary(t)
	roomStage := func(bin string) string {
		out, err := exec.Command(bin, "--json", "version").Output()
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			RoomStage string `json:"room_stage"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		return v.RoomStage
	}
	stage := filepath.Join(dir, harness.StageName)
	if got := roomStage(bin); got != stage {
		t.Errorf("version: room_stage %q, want %q", got, stage)
	}
	if exe := servingExe(t, bin); exe != stage {
		t.Errorf("served by %s, want the room binary %s", exe, stage)
	}

	// Another build beside it: a copy of the command line itself, a Go
	// binary with another build ID.
	other := t.TempDir()
	copyFile := func(src, dst string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	otherBin := filepath.Join(other, "cleanroom")
	copyFile(bin, otherBin)
	copyFile(bin, filepath.Join(other, harness.StageName))
	if got := roomStage(otherBin); !strings.HasPrefix(got, "built in") || !strings.Contains(got, "room binary is from another build") {
		t.Errorf("version with a room binary of another build: room_stage %q", got)
	}
	if exe := servingExe(t, otherBin); exe != otherBin {
		t.Errorf("served by %s, want the command's own binary %s", exe, otherBin)
	}
}

// TestRoomAgentCLI: room agent's usage errors (exit 2, naming the flag)
// and a session whose agent exits non-zero (exit 1, the record written).
func TestRoomAgentCLI(t *testing.T) {
	t.Parallel()
	bin := roomBinary(t)
	pkg, _ := filepath.Abs(filepath.Join("..", "..", "harness", "testdata", "room-package"))
	run := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), stderr.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, stderr.String()
	}
	base := t.TempDir()
	room := []string{"room", "agent", "--package", pkg, "--expect", roomPackagePin, "--workspace", filepath.Join(base, "ws")}
	withT := append(append([]string{}, room...), "--transcript", filepath.Join(base, "t.jsonl"))
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no transcript", append(append([]string{}, room...), "--", "/bin/true"), "--transcript is required"},
		{"no command", withT, "requires at least 1 arg"},
		{"allow-host without port", append(append([]string{}, withT...), "--allow-host", "api.example.com", "--", "/bin/true"), "--allow-host"},
		{"allow-host wildcard", append(append([]string{}, withT...), "--allow-host", "*.example.com:443", "--", "/bin/true"), "--allow-host"},
		{"env not set", append(append([]string{}, withT...), "--env", "CLEANROOM_TEST_UNSET_VARIABLE", "--", "/bin/true"), "--env CLEANROOM_TEST_UNSET_VARIABLE"},
		{"resolve without address", append(append([]string{}, withT...), "--resolve", "model.test=not-an-ip", "--", "/bin/true"), "--resolve"},
		{"bind without destination", append(append([]string{}, withT...), "--bind-ro", "/usr", "--", "/bin/true"), "--bind-ro"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stderr := run(c.args...)
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 naming %q", code, stderr, c.want)
			}
		})
	}
	t.Run("agent exits 4", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("room agent needs root")
		}
		if err := exec.Command("unshare", "-m", "-n", "true").Run(); err != nil {
			t.Skipf("cannot create mount+network namespaces here: %v", err)
		}
		code, stderr := run(append(append([]string{}, withT...), "--", "/bin/sh", "-c", "exit 4")...)
		if code != 1 || !strings.Contains(stderr, "status 4") {
			t.Fatalf("exit %d, stderr %q; want 1 naming the agent's status 4", code, stderr)
		}
		b, err := os.ReadFile(filepath.Join(base, "t.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := harness.ReadTranscript(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := doc.Get("agent"); !ok {
			t.Errorf("no agent line in %s", b)
		}
		// The workspace and transcript exist now: a second session is
		// refused before anything runs.
		if code, stderr := run(append(append([]string{}, withT...), "--", "/bin/true")...); code != 2 || !strings.Contains(stderr, "exists") {
			t.Errorf("second session: exit %d, stderr %q; want 2 naming the existing path", code, stderr)
		}
	})
}

// `room transcript` shows what the transcript holds raw (a hostile value
// in any of its strings) spelled out in its text output, and as recorded
// with --json.
func TestRoomTranscriptShowsInvisibleEscaped(t *testing.T) {
	t.Parallel()
	sum := strings.Repeat("ab", 32)
	id := "bpkg-\u202eevil\u200b\x1b]0;title\x07"
	q, _ := json.Marshal(id)
	p := filepath.Join(t.TempDir(), "t.jsonl")
	lines := `{"blind_package_id":` + string(q) + `,"event":"start","instruction_path":"experiment/CLEAN-ROOM-PROMPT-v1.md","instruction_sha256":"` + sum + `","seal_digest":"` + sum + `","served_file_count":3,"time":"2026-01-01T00:00:00Z","type":"TRVM-CLEAN-ROOM-TRANSCRIPT-v1","view_mountinfo":"","workspace":"/ws"}
{"calls":0,"event":"end","files_read":[],"files_written":[],"refused_reads":[],"time":"2026-01-01T00:00:04Z"}
`
	if err := os.WriteFile(p, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "room", "transcript", p)
	if code != 0 || !strings.Contains(out, `bpkg-\u{202E}evil\u{200B}\u{001B}]0;title\u{0007}`) || strings.ContainsAny(out, "\u202e\u200b\x1b\x07") {
		t.Errorf("room transcript text: exit %d %q %s", code, out, errs)
	}
	code, out, _ = runCLI(t, "room", "transcript", "--json", p)
	if code != 0 || !strings.Contains(out, "\u202e") {
		t.Errorf("room transcript --json does not print the value as recorded: %q", out)
	}
}

// `room transcript --recover` ends a record whose room agent was killed
// while it appended its agent line (cut short, its journal beside it):
// without --recover the record is refused and the journal named; with it
// the line is written again naming the cut, and the record reads; a cut
// line that is not the journal's beginning is refused, exit 1.
func TestRoomTranscriptRecover(t *testing.T) {
	t.Parallel()
	sum := strings.Repeat("ab", 32)
	session := `{"blind_package_id":"bpkg-x","event":"start","instruction_path":"experiment/CLEAN-ROOM-PROMPT-v1.md","instruction_sha256":"` + sum + `","seal_digest":"` + sum + `","served_file_count":3,"time":"2026-01-01T00:00:00Z","type":"TRVM-CLEAN-ROOM-TRANSCRIPT-v1","view_mountinfo":"","workspace":"/ws"}
{"calls":0,"event":"end","files_read":[],"files_written":[],"refused_reads":[],"time":"2026-01-01T00:00:04Z"}
`
	agent := `{"command":["agent","--fast"],"event":"agent","room_exit":0,"time":"2026-01-01T00:00:05Z"}`
	for name, c := range map[string]struct {
		cut     string
		refusal string // the refusal --recover names on stderr, exit 1 ("": none)
	}{
		"the agent line cut":    {cut: agent[:40]},
		"the whole line, no LF": {cut: agent},
		"another line cut":      {cut: `{"event":"call","seq":1`, refusal: "not the beginning of the journalled agent line"},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "t.jsonl")
			if err := os.WriteFile(p, []byte(session+c.cut), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p+harness.PendingSuffix, []byte(agent), 0o644); err != nil {
				t.Fatal(err)
			}
			if code, _, errs := runCLI(t, "room", "transcript", p); code != 1 || !strings.Contains(errs, "--recover") {
				t.Errorf("room transcript of a cut record: exit %d, stderr %q; want 1 naming --recover", code, errs)
			}
			code, out, errs := runCLI(t, "room", "transcript", "--recover", "--json", p)
			if c.refusal != "" {
				if code != 1 || !strings.Contains(errs, c.refusal) {
					t.Errorf("room transcript --recover: exit %d, stderr %q; want 1 naming %q", code, errs, c.refusal)
				}
				return
			}
			var doc struct {
				CutLines []struct {
					Bytes  int    `json:"bytes"`
					SHA256 string `json:"sha256"`
				} `json:"cut_lines"`
				Agent struct {
					Command []string `json:"command"`
				} `json:"agent"`
			}
			if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil {
				t.Fatalf("room transcript --recover: exit %d (%v), stderr %q", code, err, errs)
			}
			h := sha256.Sum256([]byte(c.cut))
			if len(doc.CutLines) != 1 || doc.CutLines[0].Bytes != len(c.cut) || doc.CutLines[0].SHA256 != hex.EncodeToString(h[:]) {
				t.Errorf("cut_lines %+v, want the %d bytes cut", doc.CutLines, len(c.cut))
			}
			if !slices.Equal(doc.Agent.Command, []string{"agent", "--fast"}) {
				t.Errorf("the recovered agent line's command %q", doc.Agent.Command)
			}
		})
	}
}

// TestRoomServeWorldRootLabel: a world made by `world init --root-label
// spec/checksum` keeps its package in spec/checksum, named by the
// cleanroom-package at its root. `room serve --world` serves that
// directory under the run's own pin (list_files and read_file answer with
// its files, from the official Go SDK client); the same record edited to
// name the package the same bytes have under the default label (a pin
// measured from another directory) does not verify, and the room refuses
// it, exit 1, naming the rule, before anything is served.
func TestRoomServeWorldRootLabel(t *testing.T) {
	t.Parallel()
	needRoom(t)
	bin := roomBinary(t)
	world := filepath.Join(t.TempDir(), "world")
	if code, out, errs := runCLI(t, "world", "init", world, "--root-label", "spec/checksum"); code != 0 {
		t.Fatalf("world init --root-label spec/checksum: %d %s%s", code, out, errs)
	}
	pkg, hold := filepath.Join(world, "spec", "checksum"), filepath.Join(world, "governance", "holdout")
	for _, step := range [][]string{
		{"release", "issue", pkg, "--spec-revision", "1", "--experiment-revision", "1", "--corpus-revision", "1", "--holdout", hold},
		{"run", "pin", "--world", world},
	} {
		if code, out, errs := runCLI(t, step...); code != 0 {
			t.Fatalf("%v: %d %s%s", step, code, out, errs)
		}
	}
	spec, err := os.ReadFile(filepath.Join(pkg, "SPEC.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The same bytes measured under the default label: another bpkg.
	code, defaultID, errs := runCLI(t, "package", "id", pkg, "--holdout", hold, "--root-label", "docs/spec/proof-wire")
	defaultID = strings.TrimSpace(defaultID)
	if code != 0 || !regexp.MustCompile(`^bpkg-[0-9a-f]{64}$`).MatchString(defaultID) {
		t.Fatalf("package id --root-label docs/spec/proof-wire: %d %q %s", code, defaultID, errs)
	}
	record := filepath.Join(world, "governance", "blind-run.json")
	for _, c := range []struct {
		name string
		edit func(t *testing.T)
		code int
	}{
		{"pinned under its label", func(*testing.T) {}, 0},
		{"record naming the default label's package", func(t *testing.T) {
			b, err := os.ReadFile(record)
			if err != nil {
				t.Fatal(err)
			}
			re := regexp.MustCompile(`bpkg-[0-9a-f]{64}`)
			pinned := re.Find(b)
			if pinned == nil || string(pinned) == defaultID {
				t.Fatalf("pinned %q, the default label's package %s: want a pin of its own", pinned, defaultID)
			}
			if err := os.WriteFile(record, re.ReplaceAll(b, []byte(defaultID)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.edit(t)
			ws := filepath.Join(t.TempDir(), "ws")
			cmd := exec.Command(bin, "room", "serve", "--world", world, "--workspace", ws)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			// A session that hangs fails the test instead of waiting.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "root-label-test", Version: "v0"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
			if c.code != 0 {
				if err == nil {
					cs.Close()
					t.Fatalf("a room on an unverified run answered initialize; stderr %s", &stderr)
				}
				cmd.Wait() // the transport started it; reap it if it has not been
				if code := cmd.ProcessState.ExitCode(); code != c.code {
					t.Errorf("exit %d, want %d; stderr %s", code, c.code, &stderr)
				}
				// The package rule, at the labelled directory, against the pin the record names.
				for _, rule := range []string{errRoomUnverified.Error(), "spec/checksum: blind package problem: pinned " + defaultID} {
					if !strings.Contains(stderr.String(), rule) {
						t.Errorf("stderr does not name %q: %s", rule, &stderr)
					}
				}
				if _, err := os.Stat(ws); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("a refused room created its workspace")
				}
				return
			}
			if err != nil {
				t.Fatalf("connect: %v; stderr %s", err, &stderr)
			}
			text := func(name string, args map[string]any) string {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
				if err != nil || res.IsError || len(res.Content) == 0 {
					t.Fatalf("%s: %+v %v", name, res, err)
				}
				tc, ok := res.Content[0].(*mcp.TextContent)
				if !ok {
					t.Fatalf("%s answered %T", name, res.Content[0])
				}
				return tc.Text
			}
			files := text("list_files", map[string]any{})
			for _, f := range []string{"SPEC.md", "experiment/CONTRACT.md", "vectors/public/messages/hello.txt"} {
				if !strings.Contains(files, f) {
					t.Errorf("list_files does not show %s: %s", f, files)
				}
			}
			if got := text("read_file", map[string]any{"path": "SPEC.md"}); got != string(spec) {
				t.Errorf("read_file SPEC.md served %.200q, want the bytes of spec/checksum/SPEC.md", got)
			}
			if err := cs.Close(); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("close: %v; stderr %s", err, &stderr)
			}
		})
	}
}
