package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// Stop reasons recorded in the transcript.
const (
	StopModel    = "model_stopped" // the model answered without calling a tool
	StopMaxTurns = "max_turns"
	StopCutOff   = "cut_off" // the reply called no tool and its finish_reason is not stop (length, content_filter, …)
	StopError    = "error"   // the relay ended the session: a reply it refused, a failed request or call
)

// The rules a model reply can break; each ends the session before any of
// the reply's calls reaches the room.
var (
	ErrReplyRole        = errors.New("model message role is not assistant")
	ErrReplyToolCalls   = fmt.Errorf("model message tool_calls is not an array of at most %d calls", maxToolCalls)
	ErrConversationFull = fmt.Errorf("conversation over %d bytes", maxConversation)
)

// maxToolCalls caps the calls of one model message, and maxConversation the
// bytes the relay holds and re-sends each turn (the messages and the usage,
// counted as the drive line encodes them): without them one 8 MiB reply of
// read_file calls, or a few turns of them, would grow the relay's memory
// and every request without bound, and a drive line over the strict
// reader's size limit makes the whole transcript unreadable. The rest of
// the drive line (time, model, stop, error) fits in what is left.
const (
	maxToolCalls    = 1000
	maxConversation = evidence.MaxSize - 64<<10
)

// ErrMaxTurns: the turn limit ended the session; the model did not stop of
// its own accord, so the session is not a completed one.
var ErrMaxTurns = errors.New("turn limit reached before the model stopped")

// ErrCutOff: a reply called no tool and its finish_reason is none of stop,
// tool_calls, function_call (or absent): length and content_filter say the
// endpoint cut it short, and a value this relay does not know is not taken
// for the model stopping either. Like the turn limit, the session is not a
// completed one; it was recorded as "model_stopped" before.
var ErrCutOff = errors.New("reply cut off before the model stopped")

// DriveOptions configure the built-in agent loop.
type DriveOptions struct {
	// Server returns the command that runs `room serve` (a fresh one per
	// call). Its environment must not carry the API key.
	Server     func() *exec.Cmd
	Endpoint   string // base URL; "/chat/completions" is appended
	Model      string
	APIKey     string
	MaxTurns   int
	Seed       int
	MaxTokens  int           // 0 = 8192
	Timeout    time.Duration // per model request; 0 = 5 minutes
	Transcript string        // the server's transcript, appended to after it exits ("" = none)
	Client     *http.Client
}

// DriveResult is what the loop records.
type DriveResult struct {
	Model string         `json:"model"`
	Seed  int            `json:"seed"`
	Turns int            `json:"turns"`
	Stop  string         `json:"stop"`
	Usage map[string]int `json:"usage"`
}

// maxModelResponse caps one chat-completions response.
const maxModelResponse = 8 << 20

// maxUsageNames and maxUsageName bound the usage counts the relay sums
// and records: the names are the endpoint's, and one reply naming
// megabytes of them made the drive line pass the strict reader's limit
// (the conversation cap is checked only after the reply's usage is summed).
const (
	maxUsageNames = 64
	maxUsageName  = 64
)

// Drive runs the agent loop: it starts the sealed server, reads its
// instructions, prompt and tools over MCP, and relays the model's tool calls
// to it until the model stops calling tools or MaxTurns is reached. It
// never reads the package itself. Every call has a deadline.
func Drive(ctx context.Context, o DriveOptions) (*DriveResult, error) {
	if o.MaxTokens == 0 {
		o.MaxTokens = 8192
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "cleanroom-drive", Version: ServerVersion}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(cctx, &mcp.CommandTransport{Command: o.Server()}, nil)
	if err != nil {
		return nil, fmt.Errorf("starting the sealed room: %w", err)
	}
	res := &DriveResult{Model: o.Model, Seed: o.Seed, Usage: map[string]int{}}
	messages, tools, err := opening(cctx, cs)
	if err != nil {
		cs.Close()
		return nil, err
	}
	loopErr := func() error {
		// The bytes of the conversation as recorded, and with the usage
		// summed so far (as recorded: its names come from the model).
		held := encodedSize(messages)
		over := func(add any) bool {
			held += encodedSize(add)
			return held+encodedSize(res.Usage) > maxConversation
		}
		for res.Turns < o.MaxTurns {
			res.Turns++
			msg, finish, err := o.complete(ctx, messages, tools, res.Usage)
			if err != nil {
				return fmt.Errorf("turn %d: %w", res.Turns, err)
			}
			if over(msg) {
				return fmt.Errorf("turn %d: %w", res.Turns, ErrConversationFull)
			}
			// Recorded before it is judged: the transcript says what the
			// model answered, refused or not.
			messages = append(messages, msg)
			list, err := replyCalls(msg)
			if err != nil {
				return fmt.Errorf("turn %d: %w", res.Turns, err)
			}
			if len(list) == 0 {
				switch finish {
				case "", "stop", "tool_calls", "function_call":
					res.Stop = StopModel
					return nil
				}
				res.Stop = StopCutOff
				return fmt.Errorf("turn %d: %w (finish_reason %q)", res.Turns, ErrCutOff, finish)
			}
			for _, c := range list {
				tm, err := relay(ctx, cs, c)
				if err != nil {
					return fmt.Errorf("turn %d: %w", res.Turns, err)
				}
				if over(tm) {
					return fmt.Errorf("turn %d: %w", res.Turns, ErrConversationFull)
				}
				messages = append(messages, tm)
			}
		}
		res.Stop = StopMaxTurns
		return ErrMaxTurns
	}()
	if loopErr != nil && res.Stop == "" {
		res.Stop = StopError
	}
	// Closing the session ends the server, which writes its end line.
	if cerr := cs.Close(); cerr != nil && loopErr == nil && !errors.Is(cerr, io.EOF) {
		loopErr = fmt.Errorf("closing the sealed room: %w", cerr)
	}
	if o.Transcript != "" && res.Stop != "" {
		if err := appendDrive(o.Transcript, res, messages, loopErr); err != nil && loopErr == nil {
			loopErr = err
		}
	}
	return res, loopErr
}

// opening reads the SYSTEM (instructions), USER (prompt) and tools from the
// room: every word the model gets comes from the sealed package.
func opening(ctx context.Context, cs *mcp.ClientSession) ([]any, []any, error) {
	gp, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: PromptName})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the room's prompt: %w", err)
	}
	var user strings.Builder
	for _, m := range gp.Messages {
		if tc, ok := m.Content.(*mcp.TextContent); ok {
			user.WriteString(tc.Text)
		}
	}
	lt, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the room's tools: %w", err)
	}
	var tools []any
	for _, t := range lt.Tools {
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
			"name": t.Name, "description": t.Description, "parameters": t.InputSchema,
		}})
	}
	messages := []any{
		map[string]any{"role": "system", "content": cs.InitializeResult().Instructions},
		map[string]any{"role": "user", "content": user.String()},
	}
	return messages, tools, nil
}

// encodedSize is v's size in the drive line (RFC 8785, and a separator);
// a value that cannot be encoded counts as over any cap.
func encodedSize(v any) int {
	b, err := evidence.Canonical(evidence.Plain(v))
	if err != nil {
		return maxConversation + 1
	}
	return len(b) + 1
}

// replyCalls returns the tool calls of a model message. The message is sent
// back with every later request as it was read, so it must be the
// assistant's (another role would put words the package did not author in
// the system's or the user's mouth), and tool_calls must be absent, null or
// an array within the cap (anything else is not "the model stopped").
func replyCalls(msg *evidence.Object) ([]any, error) {
	if role, _ := msg.Get("role"); role != "assistant" {
		return nil, fmt.Errorf("%w: role %.40q", ErrReplyRole, fmt.Sprint(role))
	}
	calls, _ := msg.Get("tool_calls")
	if calls == nil {
		return nil, nil
	}
	list, ok := calls.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: tool_calls is %s", ErrReplyToolCalls, evidence.TypeName(calls))
	}
	if len(list) > maxToolCalls {
		return nil, fmt.Errorf("%w: %d calls", ErrReplyToolCalls, len(list))
	}
	return list, nil
}

// complete sends one chat-completions request and returns the assistant
// message, read through the strict reader.
func (o *DriveOptions) complete(ctx context.Context, messages, tools []any, usage map[string]int) (*evidence.Object, string, error) {
	body, err := json.Marshal(map[string]any{
		"model": o.Model, "messages": plainAll(messages), "tools": tools, "temperature": 0,
		"seed": o.Seed, "max_tokens": o.MaxTokens,
	})
	if err != nil {
		return nil, "", err
	}
	rctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, strings.TrimRight(o.Endpoint, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("model request: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxModelResponse+1))
	if err != nil {
		return nil, "", fmt.Errorf("model response: %w", err)
	}
	if len(b) > maxModelResponse {
		return nil, "", fmt.Errorf("model response over %d bytes", maxModelResponse)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("model endpoint answered %s: %.200s", resp.Status, b)
	}
	doc, err := evidence.ReadObject(b)
	if err != nil {
		return nil, "", fmt.Errorf("model response: %w", err)
	}
	if u, ok := doc.Get("usage"); ok {
		if uo, ok := u.(*evidence.Object); ok {
			for _, m := range uo.Members {
				// Whole, non-negative counts only: a count the endpoint
				// sends as 1e300 or 2.5 is not summed into garbage.
				_, known := usage[m.Name]
				fits := known || len(usage) < maxUsageNames && len(m.Name) <= maxUsageName
				if n, ok := m.Value.(float64); ok && fits && n >= 0 && n <= 1<<53 && n == math.Trunc(n) {
					usage[m.Name] += int(n)
				}
			}
		}
	}
	ch, _ := doc.Get("choices")
	choices, _ := ch.([]any)
	if len(choices) == 0 {
		return nil, "", fmt.Errorf("model response has no choices")
	}
	c0, _ := choices[0].(*evidence.Object)
	mv, _ := c0.Get("message")
	msg, ok := mv.(*evidence.Object)
	if !ok {
		return nil, "", fmt.Errorf("model response has no message")
	}
	fv, _ := c0.Get("finish_reason")
	finish, _ := fv.(string)
	return msg, finish, nil
}

// relay forwards one tool call to the room and returns the tool message.
func relay(ctx context.Context, cs *mcp.ClientSession, call any) (map[string]any, error) {
	co, _ := call.(*evidence.Object)
	idv, _ := co.Get("id")
	id, _ := idv.(string)
	fv, _ := co.Get("function")
	fo, _ := fv.(*evidence.Object)
	nv, _ := fo.Get("name")
	name, _ := nv.(string)
	av, _ := fo.Get("arguments")
	args, _ := av.(string)
	if id == "" || name == "" {
		return nil, fmt.Errorf("a tool call without id or function name")
	}
	content := ""
	if !json.Valid([]byte(args)) {
		// The room is never asked; the model is told its arguments did not parse.
		content = "REFUSED: arguments are not JSON"
	} else {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		if err != nil {
			return nil, fmt.Errorf("relaying %.100q: %w", name, err)
		}
		content = resultText(r)
	}
	return map[string]any{"role": "tool", "tool_call_id": id, "content": content}, nil
}

// plainAll turns read values back into plain Go values for encoding.
func plainAll(ms []any) []any {
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = evidence.Plain(m)
	}
	return out
}

// appendDrive appends the relay's line to the server's transcript.
func appendDrive(path string, r *DriveResult, messages []any, loopErr error) error {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening transcript %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	// A record that does not end with a whole line was cut short: a line
	// appended to it would be glued to the cut one and hide it.
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("transcript %s: %w", path, err)
	}
	last := make([]byte, 1)
	if st.Size() == 0 {
		return fmt.Errorf("%w: %s: empty, no start line", ErrTranscript, path)
	}
	if _, err := f.ReadAt(last, st.Size()-1); err != nil {
		return fmt.Errorf("transcript %s: %w", path, err)
	}
	if last[0] != '\n' {
		return fmt.Errorf("%w: %s: the last line was cut short; the drive line is not appended", ErrTranscript, path)
	}
	usage := map[string]any{}
	for k, v := range r.Usage {
		usage[k] = v
	}
	rec := map[string]any{
		"event": "drive", "time": time.Now().UTC().Format(time.RFC3339Nano), "model": r.Model, "seed": r.Seed,
		"turns": r.Turns, "stop": r.Stop, "usage": usage, "messages": plainAll(messages),
	}
	if r.Stop == StopError && loopErr != nil {
		// The rule the session ended on, with the messages up to it.
		rec["error"] = fmt.Sprintf("%.1000s", strings.ToValidUTF8(loopErr.Error(), "\uFFFD"))
	}
	line, err := evidence.Canonical(rec)
	if err != nil {
		return fmt.Errorf("transcript drive line: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("writing transcript: %w", err)
	}
	return f.Sync()
}
