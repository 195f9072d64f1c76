package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/internal/deathsig"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The test binary plays the cleanroom binary: argv[1] selects a role.
const (
	stageMarker = "harness-test-sealed-stage" // RunStage (the re-exec target)
	serveMarker = "harness-test-serve"        // Serve (what `room serve` does)
	childMarker = "harness-test-child"        // a test's own code inside fresh namespaces
)

// childFuncs are test bodies that run inside SealedCommand namespaces.
var childFuncs = map[string]func(args []string) error{}

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case stageMarker:
			os.Exit(RunStage([]string{stageMarker}, os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case serveMarker:
			os.Exit(testServeMain(os.Args[2:]))
		case childMarker:
			f := childFuncs[os.Args[2]]
			if err := f(os.Args[3:]); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// testServeMain parses "package expect workspace transcript [maxFileBytes]"
// or "package expect workspace transcript resume" (ServeOptions.Resume).
func testServeMain(a []string) int {
	o := ServeOptions{PackageDir: a[0], Expect: a[1], Workspace: a[2], Transcript: a[3], StageArgs: []string{stageMarker}}
	if len(a) > 4 && a[4] == "resume" {
		o.Resume = true
	} else if len(a) > 4 {
		o.Limits = DefaultLimits
		o.Limits.MaxFileBytes, _ = strconv.Atoi(a[4])
	}
	err := Serve(context.Background(), o, os.Stdin, os.Stdout, os.Stderr)
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// needSeal skips unless this process can create mount and network
// namespaces and mount (root, or user namespaces allowed).
func needSeal(t testing.TB) {
	t.Helper()
	if err := deathsig.Run(seal.SealedCommand("/bin/true", nil, nil)); err != nil {
		t.Skipf("cannot create mount+network namespaces here (%v): the seal needs root or unprivileged user namespaces", err)
	}
}

// The synthetic prompt: written for these tests, in the reference's block
// format. Descriptions and schemas are asserted against these constants.
const (
	testSystem    = "You are testing a sealed room.\nRead spec/ADD.md and write add.go."
	testUser      = "Begin the test."
	testListDesc  = "Enumerate the package with sizes."
	testReadDesc  = "Return one package file; exact key from the listing."
	testWriteDesc = "Store one file in the workspace; it cannot be read back."
	testListSch   = `{"type":"object","properties":{},"required":[]}`
	testReadSch   = `{"type":"object","additionalProperties":false,"properties":{"path":{"type":"string"}},"required":["path"]}`
	testWriteSch  = `{"type":"object","additionalProperties":false,"properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`
)

func toolDecl(name, desc, schema string) string {
	return fmt.Sprintf(` {"type": "function", "function": {"name": %q, "description": %q, "parameters": %s}}`, name, desc, schema)
}

// testPrompt renders a prompt file; tools are the TOOLS array entries.
func testPrompt(system, user string, tools ...string) string {
	return "# Test prompt\n\nFree text before the blocks.\n\n## SYSTEM\n\n" + system + "\n\n## END SYSTEM\n\n## USER\n\n" + user +
		"\n\n## END USER\n\n## TOOLS\n\n```json\n[\n" + strings.Join(tools, ",\n") + "\n]\n```\n\n## END TOOLS\n"
}

var goodTools = []string{
	toolDecl("list_files", testListDesc, testListSch),
	toolDecl("read_file", testReadDesc, testReadSch),
	toolDecl("write_source", testWriteDesc, testWriteSch),
}

// testFiles is the synthetic package: text, a non-UTF-8 file, an empty
// file and a nested path.
func testFiles() map[string][]byte {
	return map[string][]byte{
		PromptPath:          []byte(testPrompt(testSystem, testUser, goodTools...)),
		"spec/ADD.md":       []byte("# ADD\n\nadd(a, b) returns a + b.\n"),
		"spec/deep/x.json":  []byte(`{"a":1}` + "\n"),
		"vectors/bin.dat":   {0xff, 0xfe, 0x00, 'b', 'i', 'n', 0x80},
		"vectors/empty.txt": {},
	}
}

// writePackage writes files under a fresh directory and returns it with
// the pinned bpkg (computed by pkgwalk, the package's identity function).
func writePackage(t testing.TB, files map[string][]byte) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pkg")
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := pkgwalk.Walk(dir, pkgwalk.WalkOptions{})
	if err != nil {
		t.Fatalf("walking the synthetic package: %v", err)
	}
	m, err := pkgwalk.NewManifest(tree, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := m.ID()
	if err != nil {
		t.Fatal(err)
	}
	return dir, id
}

// openRoomAt is OpenRoom of the view at path, opened here as the serve
// stage opens its sealed mount (the descriptor is closed once measured).
func openRoomAt(path string, c RoomConfig) (*Room, error) {
	d, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	c.ViewDir = d
	return OpenRoom(c)
}

// openRoomClosed opens the room (openRoomAt) and closes it when the test
// ends, failing the test if the close fails.
func openRoomClosed(t *testing.T, pkg string, c RoomConfig) *Room {
	t.Helper()
	room, err := openRoomAt(pkg, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := room.Close(); err != nil {
			t.Error(err)
		}
	})
	return room
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// session is a Go SDK client connected over a command transport to the
// test binary running Serve.
type session struct {
	cs        *mcp.ClientSession
	cmd       *exec.Cmd
	stderr    *strings.Builder
	workspace string
	tpath     string
}

func startSession(t testing.TB, pkg, expect string, extra ...string) *session {
	t.Helper()
	return startSessionProto(t, "", pkg, expect, extra...)
}

// startSessionProto pins the protocol version the client offers ("" = the
// SDK's latest).
func startSessionProto(t testing.TB, proto, pkg, expect string, extra ...string) *session {
	t.Helper()
	base := t.TempDir()
	s := &session{workspace: filepath.Join(base, "ws"), tpath: filepath.Join(base, "transcript.jsonl"), stderr: &strings.Builder{}}
	args := append([]string{serveMarker, pkg, expect, s.workspace, s.tpath}, extra...)
	s.cmd = exec.Command(os.Args[0], args...)
	s.cmd.Stderr = s.stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "harness-test", Version: "v0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: s.cmd, TerminateDuration: 5 * time.Second}, &mcp.ClientSessionOptions{ProtocolVersion: proto})
	if err != nil {
		t.Fatalf("connecting to the sealed room: %v\nstderr:\n%s", err, s.stderr)
	}
	s.cs = cs
	t.Cleanup(func() { s.cs.Close() })
	return s
}

// call runs one tool call with a deadline (every client call has one).
func (s *session) call(t testing.TB, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v\nstderr:\n%s", name, args, err, s.stderr)
	}
	return res
}

func textOf(t testing.TB, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) != 1 {
		t.Fatalf("result has %d content items, want 1", len(r.Content))
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", r.Content[0])
	}
	return tc.Text
}

// serverPID finds the sealed server: the child of the Serve process (of
// whichever of its threads started it: children are listed per thread).
func (s *session) serverPID(t testing.TB) int {
	t.Helper()
	ppid := s.cmd.Process.Pid
	var kids []string
	for range 100 {
		kids = nil
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", ppid))
		if err != nil {
			t.Fatalf("listing threads of %d: %v", ppid, err)
		}
		for _, task := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", ppid, task.Name()))
			kids = append(kids, strings.Fields(string(b))...)
		}
		if len(kids) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(kids) != 1 {
		t.Fatalf("Serve process %d has children %q, want exactly one", ppid, kids)
	}
	pid, _ := strconv.Atoi(kids[0])
	return pid
}

// viewMount returns the view's mount point from the server's command line.
func viewMount(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(string(b), "\x00")
	for i, a := range args {
		if a == "--mount" && i+1 < len(args) {
			return args[i+1]
		}
	}
	t.Fatalf("no --mount in %q", args)
	return ""
}
