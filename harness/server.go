package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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

	budgetMu sync.Mutex
	calls    int   // tool calls of this session
	spent    error // the budget's refusal, once spent (the session ends)
}

// errSessionBudget: the session made as many tool calls, or wrote as many
// transcript bytes, as one session may (Limits.MaxSessionCalls,
// MaxSessionBytes). A client that floods the room would otherwise grow the
// transcript past what its readers take in. The call is refused by name,
// recorded, and the session ends with a whole transcript. Classed Refused
// where it is made (internal/fault): the room exits 1 on it.
var errSessionBudget = fault.New(fault.Refused, "session budget spent")

// spend counts one tool call against the session's budget. Past it, the
// call is recorded as refused and the budget's error returned; the
// connection closes once that refusal is answered (gatedConn).
func (r *Room) spend(tool string) error {
	r.budgetMu.Lock()
	defer r.budgetMu.Unlock()
	if r.spent != nil {
		return r.spent
	}
	maxCalls, maxBytes := r.Limits.session()
	switch written := r.Transcript.Bytes(); {
	case r.calls >= maxCalls:
		r.spent = fmt.Errorf("%w: %d tool calls, the session's limit", errSessionBudget, maxCalls)
	case written >= int64(maxBytes):
		r.spent = fmt.Errorf("%w: transcript of %d bytes, the session's limit %d", errSessionBudget, written, maxBytes)
	default:
		r.calls++
		return nil
	}
	r.Transcript.call(tool, "session_ended", map[string]any{"refusal": r.spent.Error()})
	return r.spent
}

// ended returns the budget's refusal once the session's budget is spent.
func (r *Room) ended() error {
	r.budgetMu.Lock()
	defer r.budgetMu.Unlock()
	return r.spent
}

// LoadPrompt reads the prompt out of the verified view (never from disk).
func LoadPrompt(v *pkgwalk.View) (*Prompt, string, error) {
	f, ok := v.File(PromptPath)
	if !ok {
		return nil, "", &pkgwalk.RefusalError{Path: PromptPath, Rule: errPromptAbsent}
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
		// No logging capability: nothing but tools and the prompt. Neither
		// list ever changes (the prompt file is sealed), so no listChanged
		// is advertised: a client would wait for notifications that never
		// come, or re-list for nothing.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Prompts: &mcp.PromptCapabilities{}},
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
				if err := r.spend(spec.Name); err != nil {
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

// The rules the room holds the client's messages to, beyond the SDK's.
var (
	// errFrameBatch: a JSON-RPC batch is answered with one array once its
	// last call is done, so every answer of the batch is held until then:
	// one frame of small read_file calls could make the room hold the
	// package thousands of times over. The room serves batches only under
	// the revision that requires them (2025-03-26), within maxBatchHeld;
	// under any other it answers the frame with an invalid-request error
	// naming this rule, and the session goes on (lineTransport).
	errFrameBatch = errors.New("frame is a JSON-RPC batch, not one message")
	// errMethodNotServed: the room serves the handshake, ping, its three
	// tools and its prompt. The SDK answers more by default (resources,
	// logging/setLevel, subscriptions/listen, which parks with its request
	// until cancelled); none of it is the room's to serve.
	errMethodNotServed = errors.New("method not served by the clean room")
)

// servedCalls and servedNotifications are the only messages of the client
// the room passes to the SDK's server; any other call is answered with
// errMethodNotServed, any other notification dropped.
var (
	servedCalls = map[string]bool{
		"initialize": true, "server/discover": true, "ping": true,
		"tools/list": true, "tools/call": true, "prompts/list": true, "prompts/get": true,
	}
	servedNotifications = map[string]bool{"notifications/initialized": true, "notifications/cancelled": true}
)

// gatedTransport is the room's transport: lineTransport with its
// connection gated. ended (may be nil) reports the room's end of the
// session: once it does, the connection closes after the answer it is
// writing.
type gatedTransport struct {
	mcp.Transport
	ended func() error
}

func (t gatedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Connection: c, slot: make(chan struct{}, 1), closed: make(chan struct{}), ended: t.ended}, nil
}

// gatedConn reads no message while a call of the client is unanswered:
// the SDK runs each call in a goroutine of its own and reads on, so a
// client that sends calls and reads no answer made the room hold an
// answer per call (300 read_file calls of a 256 KiB file: 100 MiB, and
// growing with each call), and the SDK's queue of messages has no bound.
// One call at a time bounds what a session holds to one answer, the
// budget serveMemoryLimit gives it. Every served call is answered promptly
// (none parks), so the gate never waits on the client but for the answer.
type gatedConn struct {
	mcp.Connection
	slot      chan struct{} // holds a token while a call is unanswered
	closed    chan struct{}
	closeOnce sync.Once
	ended     func() error
}

func (c *gatedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		select {
		case c.slot <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		}
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			<-c.slot
			return nil, err
		}
		req, ok := msg.(*jsonrpc.Request)
		switch {
		case !ok: // a response: the server asked nothing, the SDK drops it
			<-c.slot
			return msg, nil
		case !req.IsCall():
			<-c.slot
			if servedNotifications[req.Method] {
				return msg, nil
			}
		case !servedCalls[req.Method]:
			err := c.Connection.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{
				Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%v: %q", errMethodNotServed, req.Method)}})
			<-c.slot
			if err != nil {
				return nil, err
			}
		default:
			return msg, nil // the token is returned when the answer is written
		}
	}
}

func (c *gatedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if _, ok := msg.(*jsonrpc.Response); ok {
		if c.ended != nil && c.ended() != nil {
			// The refusal that spent the budget is written: nothing more
			// is read, and the session ends; the answer's write error
			// is the one reported.
			_ = c.Close()
			return err
		}
		select {
		case <-c.slot:
		default:
		}
	}
	return err
}

func (c *gatedConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}
