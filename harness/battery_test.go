package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestWriteSourceBattery: the rerun's write_source names beyond
// TestWorkspaceBadInput — a segment longer than the file system takes,
// a path past the length and depth caps, bidi and zero-width characters,
// names a host tool might treat specially — each refused by name or
// written inside the workspace and nowhere else; the session goes on.
func TestWriteSourceBattery(t *testing.T) {
	pkg, id := writePackage(t, testFiles())
	base := t.TempDir()
	ws := filepath.Join(base, "ws")
	cs := memSession(t, openRoomClosed(t, pkg, RoomConfig{Expect: id, Workspace: ws, Limits: DefaultLimits}))
	deep := strings.Repeat("d/", DefaultLimits.MaxDepth) + "f.go"
	for _, c := range []struct {
		path string
		rule error // nil: written
	}{
		{strings.Repeat("a", 300) + ".go", errWritePath}, // longer than a file name may be
		{strings.Repeat("a/", DefaultLimits.MaxPathBytes/2) + "x", errWritePath},
		{deep, errWritePath},
		{"a\u202eog.txt", errWritePath}, // right-to-left override
		{"a\u200b.go", errWritePath},    // zero-width space
		{"CON", nil},                    // a Windows device name: an ordinary file here
		{"...", nil},
		{"-rf", nil},
		{".git/hooks/pre-commit", nil},
	} {
		res := callMem(t, cs, "write_source", map[string]any{"path": c.path, "content": "x"})
		txt := res.Content[0].(*mcp.TextContent).Text
		if c.rule == nil {
			if res.IsError {
				t.Errorf("write %.40q: %q, want it written", c.path, txt)
			}
			continue
		}
		if !res.IsError || !strings.Contains(txt, c.rule.Error()) {
			t.Errorf("write %.40q: %q, want a refusal naming %q", c.path, txt, c.rule)
		}
	}
	// The session still serves.
	if res := callMem(t, cs, "write_source", map[string]any{"path": "after.go", "content": "x"}); res.IsError {
		t.Errorf("after the refusals: %v", res.Content[0])
	}
	outside, err := os.ReadDir(base)
	if err != nil || len(outside) != 1 || outside[0].Name() != "ws" {
		t.Errorf("beside the workspace: %v %v, want only ws", outside, err)
	}
}

// TestOddFrames: JSON-RPC frames a hostile client might hope the SDK
// reads loosely — nesting past any decoder's depth, an id that is no
// JSON-RPC id, a number no double holds, a method with a NUL, a call of a
// tool with path traversal, in an unexpected argument type too — each
// answered with an error (never a crash, a hang or a host file) and the
// session goes on.
func TestOddFrames(t *testing.T) {
	c, _, _, _ := memRoom(t, testFiles())
	id := c.handshake(t)
	for _, frame := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"ping","params":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call\u0000x"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":["../../etc/passwd"]}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"spec/../../../etc/passwd"}}}`,
	} {
		c.send(t, frame+"\n")
		l := c.recv(t)
		if strings.Contains(string(l), "root:") {
			t.Fatalf("%.80q: the host's /etc/passwd came back", frame)
		}
		var a struct {
			Error  *struct{ Code int } `json:"error"`
			Result *struct {
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		if err := json.Unmarshal(l, &a); err != nil || (a.Error == nil && (a.Result == nil || !a.Result.IsError)) {
			t.Errorf("%.80q answered %.200q, want an error", frame, l)
		}
		expectPing(t, c, id)
		id++
	}
	// list_files takes no argument: one naming the host's root lists the
	// package, as without it.
	c.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_files","arguments":{"dir":"/","path":"../.."}}}`+"\n")
	if l := string(c.recv(t)); !strings.Contains(l, "spec/ADD.md") || strings.Contains(l, "etc/") || strings.Contains(l, `"isError":true`) {
		t.Errorf("list_files with a host path answered %.300q, want the package's list", l)
	}
}
