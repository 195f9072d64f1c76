package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServerName and ServerVersion identify the room to MCP clients.
const (
	ServerName    = "cleanroom-room"
	ServerVersion = "v1"
	// PromptName is the MCP prompt that carries the USER block.
	PromptName = "clean-room"
)

// Room is everything one sealed session serves: the verified view, the
// prompt read from it, the workspace and the transcript.
type Room struct {
	View       *pkgwalk.View
	Prompt     *Prompt
	Workspace  *Workspace
	Transcript *Transcript // may be nil
	Limits     Limits
	listing    string
}

// LoadPrompt reads the prompt out of the verified view (never from disk).
func LoadPrompt(v *pkgwalk.View) (*Prompt, string, error) {
	f, ok := v.File(PromptPath)
	if !ok {
		return nil, "", &pkgwalk.RefusalError{Path: PromptPath, Rule: ErrPromptAbsent}
	}
	b := f.Data
	p, err := ParsePrompt(b)
	if err != nil {
		return nil, "", err
	}
	return p, pkgwalk.SHA256Hex(b), nil
}

// NewServer builds the MCP server: instructions are the SYSTEM block, the
// three tools carry the declared names, descriptions and input schemas, and
// the USER block is offered as the prompt "clean-room". The server adds no
// natural language of its own: tool results are listings, file bytes, byte
// counts and refusals naming the key.
func NewServer(r *Room) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: ServerVersion}, &mcp.ServerOptions{
		Instructions: r.Prompt.System,
		// No logging capability: nothing but tools and the prompt.
		Capabilities: &mcp.ServerCapabilities{},
	})
	// The listing never changes: the view is sealed and held in memory.
	r.listing = listing(r.View)
	handlers := map[string]func(context.Context, map[string]string) *mcp.CallToolResult{
		"list_files":   r.listFiles,
		"read_file":    r.readFile,
		"write_source": r.writeSource,
	}
	for i := range r.Prompt.Tools {
		spec := &r.Prompt.Tools[i]
		h := handlers[spec.Name]
		s.AddTool(&mcp.Tool{Name: spec.Name, Description: spec.Description, InputSchema: json.RawMessage(spec.SchemaJSON)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				// Once the record is broken the room does nothing more: a
				// write_source would otherwise change the workspace with
				// no line to say so.
				if err := r.Transcript.Err(); err != nil {
					return nil, err
				}
				var res *mcp.CallToolResult
				if args, err := strictArgs(spec, req.Params.Arguments); err != nil {
					r.Transcript.call(spec.Name, "refused", map[string]any{"refusal": err.Error()})
					res = refusal(err.Error())
				} else {
					res = h(ctx, args)
				}
				// A call that cannot be recorded is not answered, a
				// refusal no more than a served call: the transcript is
				// the session's only account of what the model asked.
				if err := r.Transcript.Err(); err != nil {
					return nil, err
				}
				return res, nil
			})
	}
	s.AddPrompt(&mcp.Prompt{Name: PromptName}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: r.Prompt.User}}}}, nil
	})
	return s
}

func refusal(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "REFUSED: " + text}}}
}

func (r *Room) listFiles(context.Context, map[string]string) *mcp.CallToolResult {
	r.Transcript.call("list_files", "listed", map[string]any{"files": len(r.View.Files)})
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.listing}}}
}

// readFile is the exact dictionary lookup. The refusal names the key as
// asked (quoted), nothing else.
func (r *Room) readFile(_ context.Context, args map[string]string) *mcp.CallToolResult {
	p := args["path"]
	f, ok := r.View.File(p)
	b := f.Data
	if !ok {
		r.Transcript.call("read_file", "refused", map[string]any{"path": p})
		return refusal(fmt.Sprintf("%q is not a path in the package", p))
	}
	r.Transcript.call("read_file", "served", map[string]any{"path": p, "bytes": len(b)})
	if utf8.Valid(b) {
		// The text shares the verified bytes instead of copying them (for
		// a large file, one copy fewer at the peak of every answer): the
		// view's bytes are never written after verification, so the
		// string's immutability holds.
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: unsafe.String(unsafe.SliceData(b), len(b))}}}
	}
	// Text content must be UTF-8 on the wire; other bytes go as a base64
	// blob so that nothing is replaced by U+FFFD on the way.
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
		URI: "package:///" + p, MIMEType: "application/octet-stream", Blob: b,
	}}}}
}

func (r *Room) writeSource(_ context.Context, args map[string]string) *mcp.CallToolResult {
	p, content := args["path"], []byte(args["content"])
	if err := r.Workspace.Write(p, content); err != nil {
		var we *pkgwalk.RefusalError
		msg := err.Error()
		if errors.As(err, &we) {
			msg = fmt.Sprintf("%q: %v", p, we.Rule)
			if we.Detail != "" {
				msg += " (" + we.Detail + ")"
			}
		}
		r.Transcript.call("write_source", "refused", map[string]any{"path": p, "bytes": len(content), "refusal": msg})
		return refusal(msg)
	}
	r.Transcript.call("write_source", "written", map[string]any{"path": p, "bytes": len(content), "sha256": pkgwalk.SHA256Hex(content)})
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s  (%d bytes)", p, len(content))}}}
}
