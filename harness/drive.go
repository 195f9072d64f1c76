package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Stop reasons recorded in the transcript. Only StopModel is a completed
// session; every other stop is named, and a session that did not complete
// can be continued with Resume.
const (
	StopModel       = "model_stopped" // the model answered without calling a tool
	StopMaxTurns    = "max_turns"
	StopTokenBudget = "token_budget" // the tokens the endpoint counted reached MaxTotalTokens
	StopWallTime    = "wall_time"    // MaxWall passed
	StopToolErrors  = "tool_errors"  // MaxToolErrors calls named no tool or had no JSON arguments
	StopCutOff      = "cut_off"      // MaxCutOffs replies in a row called no tool and were cut short (length, content_filter, …)
	StopInterrupted = "interrupted"  // the relay was asked to stop (a signal: its context ended)
	StopError       = "error"        // the relay ended the session: a reply it refused, a failed request or call
)

// The rules a model reply can break; each ends the session before any of
// the reply's calls reaches the room.
var (
	errReplyRole        = errors.New("model message role is not assistant")
	errReplyToolCalls   = fmt.Errorf("model message tool_calls is not an array of at most %d calls", maxToolCalls)
	errConversationFull = fmt.Errorf("conversation over %d bytes", maxConversation)
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

// The named stops other than the model's own, as errors (errors.Is): a
// budget ended the session before the model stopped, so it is refused as
// a completed session (internal/fault: refused).
var (
	// errMaxTurns: the turn limit ended the session; the model did not
	// stop of its own accord, so the session is not a completed one.
	errMaxTurns    = fault.New(fault.Refused, "turn limit reached before the model stopped")
	errTokenBudget = fault.New(fault.Refused, "token budget reached before the model stopped")
	errWallTime    = fault.New(fault.Refused, "wall-time budget reached before the model stopped")
	// errToolErrors: the model named tools that do not exist, or sent
	// arguments that are not JSON (or none), MaxToolErrors times; each was
	// answered to it as a tool error until then.
	errToolErrors = fault.New(fault.Refused, "tool-error cap reached")
	// errCutOff: MaxCutOffs replies in a row called no tool and their
	// finish_reason is none of stop, tool_calls, function_call (or
	// absent): length and content_filter say the endpoint cut it short,
	// and a value this relay does not know is not taken for the model
	// stopping either. A cut reply is recorded and asked again (it is not
	// added to the conversation) until the cap.
	errCutOff = fault.New(fault.Refused, "reply cut off before the model stopped")
	// errRetriesExhausted: a transient failure (429, 408, 5xx, a reset
	// connection, a timeout) persisted through every retry.
	errRetriesExhausted = errors.New("model request failed after every retry")
	errInterrupted      = errors.New("interrupted")
)

// RetryPolicy bounds the retries of one model request after a transient
// failure: at most Max, waiting Base·2^attempt with jitter (half to all of
// it), or what the endpoint's Retry-After says, never more than MaxWait.
type RetryPolicy struct {
	Max     int           // 0 = 8; negative = no retry
	Base    time.Duration // 0 = 1 s
	MaxWait time.Duration // 0 = 2 minutes
}

// wait is the pause before retry attempt (0-based); retryAfter < 0 when
// the endpoint named none.
func (p RetryPolicy) wait(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter >= 0 {
		return min(retryAfter, p.MaxWait)
	}
	d := p.MaxWait
	if attempt < 30 && p.Base<<attempt < p.MaxWait {
		d = p.Base << attempt
	}
	// Full-range jitter over the upper half: clients that failed together
	// do not retry together.
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// DriveOptions configure the built-in agent loop.
type DriveOptions struct {
	// Server returns the command that runs `room serve` (a fresh one per
	// call). Its environment must not carry the API key. When Resume is
	// set it must run `room serve --resume` on the same workspace and
	// transcript.
	Server     func() *exec.Cmd
	Endpoint   string // base URL; "/chat/completions" is appended
	Model      string
	APIKey     string
	MaxTurns   int
	Seed       int
	MaxTokens  int           // 0 = 8192
	Timeout    time.Duration // per model request; 0 = 5 minutes
	Transcript string        // the server's transcript, appended to while the session runs ("" = none)
	Client     *http.Client

	Profile        string                     // request profile ("" = ProfileOpenAI); see Profiles
	RequestFields  map[string]json.RawMessage // added to every request, replacing the profile's of the same name
	Retry          RetryPolicy
	MaxToolErrors  int           // 0 = 20
	MaxCutOffs     int           // in a row; 0 = 3
	MaxTotalTokens int           // 0 = no budget
	MaxWall        time.Duration // 0 = no budget
	Progress       io.Writer     // one line per turn; nil = none
	// Resume continues the interrupted session read by ReadResumable from
	// Transcript: its conversation is replayed and the session goes on
	// (Server must then run `room serve --resume` on its workspace).
	Resume *PriorSession
}

// DriveResult is what the loop records.
type DriveResult struct {
	Model      string         `json:"model"`
	Seed       int            `json:"seed"`
	Turns      int            `json:"turns"`
	Stop       string         `json:"stop"`
	Usage      map[string]int `json:"usage"`
	Retries    int            `json:"retries"`
	ToolErrors int            `json:"tool_errors"`
	CutOffs    int            `json:"cut_offs"`
	Resumed    bool           `json:"resumed"`
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

func (o *DriveOptions) defaults() error {
	if o.MaxTokens == 0 {
		o.MaxTokens = 8192
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.Retry.Max == 0 {
		o.Retry.Max = 8
	}
	if o.Retry.Base <= 0 {
		o.Retry.Base = time.Second
	}
	if o.Retry.MaxWait <= 0 {
		o.Retry.MaxWait = 2 * time.Minute
	}
	if o.MaxToolErrors == 0 {
		o.MaxToolErrors = 20
	}
	if o.MaxCutOffs == 0 {
		o.MaxCutOffs = 3
	}
	if o.Profile == "" {
		o.Profile = ProfileOpenAI
	}
	if _, ok := Profiles[o.Profile]; !ok {
		return fmt.Errorf("%w: %q (known: %s)", errProfile, o.Profile, strings.Join(ProfileNames(), ", "))
	}
	for k := range o.RequestFields {
		if relayFields[k] {
			return fmt.Errorf("%w: %q is the relay's", errRequestField, k)
		}
	}
	return nil
}

// Drive runs the agent loop: it starts the sealed server, reads its
// instructions, prompt and tools over MCP, and relays the model's tool calls
// to it until the model stops calling tools or a budget ends the session.
// It never reads the package itself. Every call has a deadline. With
// Resume it first reads the interrupted session's transcript and replays
// its conversation.
func Drive(ctx context.Context, o DriveOptions) (*DriveResult, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	prior := o.Resume
	res := &DriveResult{Model: o.Model, Seed: o.Seed, Usage: map[string]int{}, Resumed: prior != nil}
	if prior != nil {
		if prior.Path != o.Transcript {
			return nil, fmt.Errorf("%w: resuming %s into transcript %s", ErrResumeMismatch, prior.Path, o.Transcript)
		}
		res.Turns = prior.turns
		maps.Copy(res.Usage, prior.usage)
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "cleanroom-drive", Version: ServerVersion}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(cctx, &mcp.CommandTransport{Command: o.Server()}, nil)
	if err != nil {
		return nil, fmt.Errorf("starting the sealed room: %w", err)
	}
	var rec *relayRecord
	if o.Transcript != "" {
		if rec, err = openRelayRecord(o.Transcript); err != nil {
			cs.Close()
			return nil, err
		}
		defer rec.close()
	}
	messages, tools, err := opening(cctx, cs)
	if err == nil && prior != nil {
		messages, err = prior.replay(messages)
		if err == nil {
			err = rec.resume(prior, messages, o.Model)
		}
	}
	if err != nil {
		cs.Close()
		return nil, err
	}
	d := &driver{o: &o, cs: cs, rec: rec, res: res, tools: tools, messages: messages, start: time.Now()}
	if prior != nil {
		// The replayed messages are in the earlier turn lines; with none
		// (interrupted before its first turn ended) the opening is
		// recorded again, in this session's first turn line.
		d.recorded = len(prior.messages)
	}
	loopErr := d.loop(ctx)
	if loopErr != nil && res.Stop == "" {
		// The session ended on an error or a signal: the work was not
		// done, whatever the error says of what was refused on the way (a
		// reply the relay refuses), so it is no verdict (internal/fault:
		// unusable). A named stop keeps its sentinel's class.
		res.Stop = StopError
		if ctx.Err() != nil {
			res.Stop, loopErr = StopInterrupted, fmt.Errorf("%w: %w", errInterrupted, loopErr)
		}
		loopErr = fault.AsUnusable(loopErr)
	}
	// What the conversation holds that no turn line has yet (the last
	// reply, or one the relay refused) is recorded before the room's end.
	// A session that could not be recorded is unusable as above.
	if ferr := d.flushTurn(); ferr != nil && loopErr == nil {
		loopErr = fault.AsUnusable(ferr)
	}
	// Closing the session ends the server, which writes its end line.
	if cerr := cs.Close(); cerr != nil && loopErr == nil && !errors.Is(cerr, io.EOF) {
		loopErr = fault.AsUnusable(fmt.Errorf("closing the sealed room: %w", cerr))
	}
	if o.Transcript != "" && res.Stop != "" {
		if err := appendDrive(o.Transcript, res, o.Profile, d.messages, loopErr); err != nil && loopErr == nil {
			loopErr = fault.AsUnusable(err)
		}
	}
	return res, loopErr
}

// driver is one session of the loop.
type driver struct {
	o        *DriveOptions
	cs       *mcp.ClientSession
	rec      *relayRecord // nil: no transcript
	res      *DriveResult
	tools    []any
	messages []any
	recorded int // messages already in turn lines
	start    time.Time
	// per turn, for its line and progress
	turnErrors int
	turnCalls  []string
}

func (d *driver) loop(ctx context.Context) error {
	o, res := d.o, d.res
	// The bytes of the conversation as recorded, and with the usage
	// summed so far (as recorded: its names come from the model).
	held := encodedSize(d.messages)
	over := func(add any) bool {
		held += encodedSize(add)
		return held+encodedSize(res.Usage) > maxConversation
	}
	if o.MaxWall > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.start.Add(o.MaxWall))
		defer cancel()
	}
	cutOffs := 0
	for {
		switch {
		case res.Turns >= o.MaxTurns:
			res.Stop = StopMaxTurns
			return errMaxTurns
		case o.MaxTotalTokens > 0 && totalTokens(res.Usage) >= o.MaxTotalTokens:
			res.Stop = StopTokenBudget
			return fmt.Errorf("%w: %d tokens, budget %d", errTokenBudget, totalTokens(res.Usage), o.MaxTotalTokens)
		case o.MaxWall > 0 && time.Since(d.start) >= o.MaxWall:
			res.Stop = StopWallTime
			return fmt.Errorf("%w: %v", errWallTime, o.MaxWall)
		}
		res.Turns++
		msg, finish, err := d.request(ctx)
		if err != nil {
			return d.failed(ctx, err)
		}
		list, err := replyCalls(msg)
		if err == nil && len(list) == 0 {
			switch finish {
			case "", "stop", "tool_calls", "function_call":
			default:
				// Cut short: recorded, not added, and asked again.
				cutOffs++
				res.CutOffs++
				if cutOffs >= o.MaxCutOffs {
					if !over(msg) {
						d.messages = append(d.messages, msg)
					}
					res.Stop = StopCutOff
					return fmt.Errorf("turn %d: %w (finish_reason %q, %d in a row)", res.Turns, errCutOff, finish, cutOffs)
				}
				if err := d.rec.retry(res.Turns, 0, "cut_off: finish_reason "+finish, 0, msg); err != nil {
					return err
				}
				d.progress("cut off (finish_reason %s), asked again", finish)
				continue
			}
		}
		cutOffs = 0
		if over(msg) {
			return fmt.Errorf("turn %d: %w", res.Turns, errConversationFull)
		}
		// Recorded before it is judged: the transcript says what the
		// model answered, refused or not.
		d.messages = append(d.messages, msg)
		if err != nil {
			return fmt.Errorf("turn %d: %w", res.Turns, err)
		}
		if len(list) == 0 {
			res.Stop = StopModel
			d.progress("model stopped")
			return nil
		}
		for _, c := range list {
			tm, bad, err := d.relay(ctx, c)
			if err != nil {
				return d.failed(ctx, err)
			}
			if over(tm) {
				return fmt.Errorf("turn %d: %w", res.Turns, errConversationFull)
			}
			d.messages = append(d.messages, tm)
			if bad {
				res.ToolErrors++
				d.turnErrors++
				if res.ToolErrors >= o.MaxToolErrors {
					res.Stop = StopToolErrors
					return fmt.Errorf("turn %d: %w: %d", res.Turns, errToolErrors, res.ToolErrors)
				}
			}
		}
		if err := d.flushTurn(); err != nil {
			return err
		}
	}
}

// failed names the turn's failure: the wall-time budget when its deadline
// (not a signal) ended the request, the call or the wait for a retry.
func (d *driver) failed(ctx context.Context, err error) error {
	if d.o.MaxWall > 0 && errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		d.res.Stop = StopWallTime
		return fmt.Errorf("turn %d: %w: %v (%v)", d.res.Turns, errWallTime, d.o.MaxWall, err)
	}
	return fmt.Errorf("turn %d: %w", d.res.Turns, err)
}

// totalTokens is the endpoint's total_tokens, or prompt plus completion
// tokens when it sends no total.
func totalTokens(u map[string]int) int {
	if n, ok := u["total_tokens"]; ok {
		return n
	}
	return u["prompt_tokens"] + u["completion_tokens"]
}

// request sends one chat-completions request, retrying transient failures
// within the policy; every retry is recorded before its wait.
func (d *driver) request(ctx context.Context) (*evidence.Object, string, error) {
	for attempt := 0; ; attempt++ {
		msg, finish, err := d.o.complete(ctx, d.messages, d.tools, d.res.Usage)
		var te *transientError
		if err == nil || !errors.As(err, &te) || ctx.Err() != nil {
			return msg, finish, err
		}
		if attempt >= d.o.Retry.Max {
			return nil, "", fmt.Errorf("%w (%d retries): %w", errRetriesExhausted, attempt, err)
		}
		wait := d.o.Retry.wait(attempt, te.retryAfter)
		d.res.Retries++
		if err := d.rec.retry(d.res.Turns, attempt+1, te.reason, wait, nil); err != nil {
			return nil, "", err
		}
		d.progress("retry %d after %s, waiting %v", attempt+1, te.reason, wait.Round(time.Millisecond))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, "", fmt.Errorf("waiting to retry: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// flushTurn records the messages no turn line holds yet, and prints the
// turn's progress line.
func (d *driver) flushTurn() error {
	if d.recorded == len(d.messages) {
		return nil
	}
	err := d.rec.turn(d.res, d.messages[d.recorded:], d.turnErrors)
	d.recorded = len(d.messages)
	if len(d.turnCalls) > 0 {
		d.progress("%d calls (%s), %d tool errors", len(d.turnCalls), strings.Join(d.turnCalls, ", "), d.turnErrors)
	}
	d.turnCalls, d.turnErrors = nil, 0
	return err
}

// progress writes one line about the current turn.
func (d *driver) progress(format string, a ...any) {
	if d.o.Progress == nil {
		return
	}
	fmt.Fprintf(d.o.Progress, "cleanroom: room drive: turn %d/%d: %s; %d tokens, %d retries, %d tool errors in all, %v\n",
		d.res.Turns, d.o.MaxTurns, fmt.Sprintf(format, a...), totalTokens(d.res.Usage), d.res.Retries, d.res.ToolErrors,
		time.Since(d.start).Round(time.Second))
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
		return nil, fmt.Errorf("%w: role %.40q", errReplyRole, fmt.Sprint(role))
	}
	calls, _ := msg.Get("tool_calls")
	if calls == nil {
		return nil, nil
	}
	list, ok := calls.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: tool_calls is %s", errReplyToolCalls, evidence.TypeName(calls))
	}
	if len(list) > maxToolCalls {
		return nil, fmt.Errorf("%w: %d calls", errReplyToolCalls, len(list))
	}
	return list, nil
}

// Profile is how one kind of endpoint wants the request's parameters.
type Profile struct {
	TokenField  string // the name of the reply's token cap
	Temperature bool   // send temperature 0
	Seed        bool   // send the seed
}

// The request profiles. ProfileOpenAI is the default and sends what the
// relay always sent (max_tokens, temperature 0, seed); OpenAI's reasoning
// models refuse max_tokens and any temperature but the default (and the
// seed is left out with them).
const ProfileOpenAI = "openai"

var Profiles = map[string]Profile{
	ProfileOpenAI:      {TokenField: "max_tokens", Temperature: true, Seed: true},
	"openai-reasoning": {TokenField: "max_completion_tokens"},
	"openrouter":       {TokenField: "max_tokens", Temperature: true, Seed: true},
	// Anthropic's OpenAI-compatible endpoint ignores seed.
	"anthropic-compatible": {TokenField: "max_tokens", Temperature: true},
	// llama.cpp, vLLM, Ollama and the like.
	"local": {TokenField: "max_tokens", Temperature: true, Seed: true},
}

// ProfileNames lists the profiles, sorted.
func ProfileNames() []string { return slices.Sorted(maps.Keys(Profiles)) }

// errProfile and errRequestField refuse a request the relay cannot send.
var (
	errProfile      = errors.New("unknown request profile")
	errRequestField = errors.New("request field not allowed")
)

// relayFields are the request's members that are the relay's to set: the
// conversation and the tools are the room's, the model the operator's flag.
var relayFields = map[string]bool{"model": true, "messages": true, "tools": true}

// requestBody is one chat-completions request in the options' profile.
func (o *DriveOptions) requestBody(messages, tools []any) ([]byte, error) {
	p := Profiles[o.Profile]
	req := map[string]any{"model": o.Model, "messages": plainAll(messages), "tools": tools, p.TokenField: o.MaxTokens}
	if p.Temperature {
		req["temperature"] = 0
	}
	if p.Seed {
		req["seed"] = o.Seed
	}
	for k, v := range o.RequestFields {
		req[k] = v
	}
	return json.Marshal(req)
}

// transientError is a failure worth retrying: the endpoint said so (429,
// 408, 5xx), or the connection failed or timed out.
type transientError struct {
	reason     string
	retryAfter time.Duration // < 0: none given
	err        error
}

func (e *transientError) Error() string { return e.reason + ": " + e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// retryable reports whether an HTTP status is worth retrying.
func retryable(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500 && code <= 599
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP-date;
// -1 when absent or unreadable.
func retryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return -1
	}
	if n, err := strconv.ParseInt(h, 10, 64); err == nil {
		if n < 0 {
			return -1
		}
		return time.Duration(min(n, 1<<20)) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0)
	}
	return -1
}

// transportFailure wraps a failed request or read as transient when the
// connection failed (reset, refused, closed early) or timed out, but not
// when ctx itself ended (the session is stopping).
func transportFailure(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return &transientError{reason: what + " timed out", retryAfter: -1, err: err}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED):
		return &transientError{reason: what + " connection failed", retryAfter: -1, err: err}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// complete sends one chat-completions request and returns the assistant
// message, read through the strict reader. A failure worth retrying is a
// *transientError.
func (o *DriveOptions) complete(ctx context.Context, messages, tools []any, usage map[string]int) (*evidence.Object, string, error) {
	body, err := o.requestBody(messages, tools)
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
		return nil, "", transportFailure(ctx, "model request", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxModelResponse+1))
	if err != nil {
		return nil, "", transportFailure(ctx, "model response", err)
	}
	if len(b) > maxModelResponse {
		return nil, "", fmt.Errorf("model response over %d bytes", maxModelResponse)
	}
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("model endpoint answered %s: %.200s", resp.Status, strings.ToValidUTF8(string(b), "\uFFFD"))
		if retryable(resp.StatusCode) {
			return nil, "", &transientError{reason: "HTTP " + strconv.Itoa(resp.StatusCode), retryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now()), err: err}
		}
		return nil, "", err
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
// A call the room cannot be asked (a tool it does not serve, arguments
// that are not JSON or are empty) is answered to the model as a tool
// error (bad) without reaching the room.
func (d *driver) relay(ctx context.Context, call any) (msg map[string]any, bad bool, err error) {
	co, _ := call.(*evidence.Object)
	idv, _ := co.Get("id")
	id, _ := idv.(string)
	fv, _ := co.Get("function")
	fo, _ := fv.(*evidence.Object)
	nv, _ := fo.Get("name")
	name, _ := nv.(string)
	av, _ := fo.Get("arguments")
	args, _ := av.(string)
	if id == "" {
		// Without an id no answer can be addressed to the call.
		return nil, false, fmt.Errorf("a tool call without id")
	}
	d.turnCalls = append(d.turnCalls, fmt.Sprintf("%.40s", name))
	content := ""
	switch {
	case !d.served(name):
		content = fmt.Sprintf("REFUSED: no tool named %.100q", name)
	case strings.TrimSpace(args) == "":
		content = "REFUSED: arguments are empty"
	case !json.Valid([]byte(args)):
		// The room is never asked; the model is told its arguments did not parse.
		content = "REFUSED: arguments are not JSON"
	default:
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := d.cs.CallTool(cctx, &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
		if err != nil {
			return nil, false, fmt.Errorf("relaying %.100q: %w", name, err)
		}
		return map[string]any{"role": "tool", "tool_call_id": id, "content": resultText(r)}, false, nil
	}
	return map[string]any{"role": "tool", "tool_call_id": id, "content": content}, true, nil
}

// served reports whether the room declared a tool of that name.
func (d *driver) served(name string) bool {
	for _, t := range d.tools {
		if f, _ := t.(map[string]any)["function"].(map[string]any); f != nil && f["name"] == name {
			return true
		}
	}
	return false
}

// plainAll turns read values back into plain Go values for encoding.
func plainAll(ms []any) []any {
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = evidence.Plain(m)
	}
	return out
}
