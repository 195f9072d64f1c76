package harness

import (
	"context"
	"encoding/base64"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ScriptCall is one tool call of a scripted implementer.
type ScriptCall struct {
	Tool string
	Args map[string]any
}

// ScriptResult is the room's answer to one ScriptCall: the text (a blob
// comes back base64-encoded) and whether it was a refusal.
type ScriptResult struct {
	Tool    string
	Args    map[string]any
	IsError bool
	Text    string
}

// RunScript is a scripted implementer: it starts the room with server (a
// `room serve` command line), connects over MCP on stdio, makes calls in
// order — each with a deadline — and closes the session, which ends the
// server and completes its transcript. Like any implementer it sees only
// what the three tools answer.
func RunScript(ctx context.Context, server *exec.Cmd, calls []ScriptCall) ([]ScriptResult, error) {
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "cleanroom-script", Version: ServerVersion}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(cctx, &mcp.CommandTransport{Command: server}, nil)
	if err != nil {
		return nil, fmt.Errorf("starting the sealed room: %w", err)
	}
	var out []ScriptResult
	for i, c := range calls {
		callCtx, cancelCall := context.WithTimeout(ctx, 30*time.Second)
		r, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: c.Tool, Arguments: c.Args})
		cancelCall()
		if err != nil {
			cs.Close()
			return out, fmt.Errorf("call %d (%s): %w", i, c.Tool, err)
		}
		out = append(out, ScriptResult{Tool: c.Tool, Args: c.Args, IsError: r.IsError, Text: resultText(r)})
	}
	if err := cs.Close(); err != nil {
		return out, fmt.Errorf("closing the sealed room: %w", err)
	}
	return out, nil
}

// resultText flattens a tool result as an implementer receives it: text
// parts as they are, a blob (a non-UTF-8 file) base64-encoded, one part a
// line.
func resultText(r *mcp.CallToolResult) string {
	var parts []string
	for _, item := range r.Content {
		switch item := item.(type) {
		case *mcp.TextContent:
			parts = append(parts, item.Text)
		case *mcp.EmbeddedResource:
			parts = append(parts, base64.StdEncoding.EncodeToString(item.Resource.Blob))
		}
	}
	return strings.Join(parts, "\n")
}
