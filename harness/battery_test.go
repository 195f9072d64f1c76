package harness

import (
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
	room, err := openRoomAt(pkg, RoomConfig{Expect: id, Workspace: ws, Limits: DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer room.Close()
	cs := memSession(t, room)
	deep := strings.Repeat("d/", DefaultLimits.MaxDepth) + "f.go"
	for _, c := range []struct {
		path string
		rule error // nil: written
	}{
		{strings.Repeat("a", 300) + ".go", ErrWritePath}, // longer than a file name may be
		{strings.Repeat("a/", DefaultLimits.MaxPathBytes/2) + "x", ErrWritePath},
		{deep, ErrWritePath},
		{"a\u202eog.txt", ErrWritePath}, // right-to-left override
		{"a\u200b.go", ErrWritePath},    // zero-width space
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
