package harness

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call the transcript cannot record is not answered — a refusal of bad
// arguments included, not only a served call.
func TestUnrecordedCallNotAnswered(t *testing.T) {
	pkg, id := writePackage(t, testFiles())
	base := t.TempDir()
	room, err := openRoomAt(pkg, RoomConfig{Expect: id, Workspace: filepath.Join(base, "ws"),
		Transcript: filepath.Join(base, "t.jsonl"), Limits: DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer room.Close()
	cs := memSession(t, room)
	room.Transcript.f.Close() // every later write fails
	for _, c := range []struct {
		name string
		tool string
		args map[string]any
	}{
		{"served", "list_files", map[string]any{}},
		{"refused for its arguments", "read_file", map[string]any{"path": 7}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			if err == nil {
				t.Fatalf("%s answered %+v with the transcript broken", c.tool, res)
			}
		})
	}
}
