package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errFrameTooLarge: one inbound frame passed the room's cap before its end
// was read; the session ends rather than buffer more of it.
var errFrameTooLarge = errors.New("inbound JSON-RPC frame exceeded the configured maximum line length")

// batchRevision is the one protocol revision whose servers must receive
// JSON-RPC batches (2025-03-26 added them, 2025-06-18 removed them).
const batchRevision = "2025-03-26"

// maxBatchMessages bounds the messages of one batch, and maxBatchHeld the
// bytes of answers a batch holds until its last call is answered: a batch
// is answered with one array, so every answer is held until then. Past
// maxBatchHeld the batch's remaining calls are answered with an error
// instead of being run, so a batch never makes the room hold more than
// this plus one answer (the budget serveMemoryLimit gives a call).
const (
	maxBatchMessages = 256
	maxBatchHeld     = 4 << 20
)

// codeBatchOverBudget answers a call of a batch that was not run because
// the batch's answers already held maxBatchHeld bytes (a server error in
// JSON-RPC's implementation-defined range).
const codeBatchOverBudget = -32000

// lineTransport is the room's stdio transport: one JSON-RPC message per
// line ('\n', or '\r', ends a frame: MCP's stdio framing, where a message
// holds no raw newline), each frame at most maxLine bytes. Unlike the
// SDK's stream decoder, which cannot resynchronise after bad input and so
// ends the session, a frame that is not JSON is answered with a parse
// error (-32700) and one that is JSON but no JSON-RPC message with an
// invalid-request error (-32600), and the next line is read. A batch is
// served under the revision that requires it (within maxBatchMessages and
// maxBatchHeld) and answered with an invalid-request error under any other.
type lineTransport struct {
	r       io.ReadCloser
	w       io.Writer
	maxLine int
}

func (t lineTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &lineConn{w: t.w, rc: t.r, frames: make(chan frameOrErr), closed: make(chan struct{})}
	go c.readLoop(t.maxLine)
	return c, nil
}

type frameOrErr struct {
	frame []byte
	err   error
}

// lineConn is lineTransport's connection.
type lineConn struct {
	rc     io.ReadCloser
	frames chan frameOrErr
	queue  []jsonrpc.Message // the rest of a batch being served

	closeOnce sync.Once
	closed    chan struct{}

	mu     sync.Mutex // guards w and everything below
	w      io.Writer
	initID *jsonrpc.ID // the initialize call, until it is answered
	proto  string      // the negotiated revision
	batch  *lineBatch
}

// lineBatch is a batch being served: its answers in the batch's order.
type lineBatch struct {
	answers [][]byte
	slot    map[jsonrpc.ID]int // call id → index in answers
	pending int                // calls not yet answered
	held    int                // bytes of answers held
}

// readLoop reads frames until the input ends or fails; like the SDK's
// reader it runs in a goroutine of its own so that Close unblocks Read.
func (c *lineConn) readLoop(maxLine int) {
	br := bufio.NewReaderSize(c.rc, 64<<10)
	for {
		line, err := readFrameLine(br, maxLine)
		for _, f := range bytes.Split(line, []byte{'\r'}) {
			if f = bytes.TrimSpace(f); len(f) == 0 {
				continue
			}
			select {
			case c.frames <- frameOrErr{frame: f}:
			case <-c.closed:
				return
			}
		}
		if err != nil {
			select {
			case c.frames <- frameOrErr{err: err}:
			case <-c.closed:
			}
			return
		}
	}
}

// readFrameLine reads up to and including the next '\n' (or the input's
// end), refusing a line over maxLine bytes without reading it all.
func readFrameLine(br *bufio.Reader, maxLine int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > maxLine+1 {
			return nil, errFrameTooLarge
		}
		line = append(line, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

func (c *lineConn) SessionID() string { return "" }

func (c *lineConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.rc.Close()
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if len(c.queue) > 0 {
			msg := c.queue[0]
			c.queue = c.queue[1:]
			if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && c.overBudget() {
				// Not run: the batch's answers already hold its budget.
				if err := c.writeMsg(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: codeBatchOverBudget,
					Message: fmt.Sprintf("batch answers over %d bytes: send this call on its own", maxBatchHeld)}}); err != nil {
					return nil, err
				}
				continue
			}
			return msg, nil
		}
		var f frameOrErr
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case f = <-c.frames:
		}
		if f.err != nil {
			return nil, f.err
		}
		if f.frame[0] == '[' {
			if err := c.startBatch(f.frame); err != nil {
				return nil, err
			}
			continue
		}
		msg, err := jsonrpc.DecodeMessage(f.frame)
		if err != nil {
			if werr := c.refuseFrame(f.frame, err); werr != nil {
				return nil, werr
			}
			continue
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Method == "initialize" {
			c.mu.Lock()
			id := req.ID
			c.initID = &id
			c.mu.Unlock()
		}
		return msg, nil
	}
}

// refuseFrame answers a frame that is no JSON-RPC message: -32700 when it
// is not JSON at all, -32600 when it is JSON of another shape (the id is
// null: it cannot be trusted from a frame that did not decode).
func (c *lineConn) refuseFrame(frame []byte, err error) error {
	code, what := int64(jsonrpc.CodeInvalidRequest), "invalid request"
	if !json.Valid(frame) {
		code, what = jsonrpc.CodeParseError, "parse error"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLine(errorLine(code, fmt.Sprintf("%s: %v", what, err)))
}

// errorLine is an error response with a null id.
func errorLine(code int64, msg string) []byte {
	b, _ := json.Marshal(struct {
		V     string        `json:"jsonrpc"`
		ID    any           `json:"id"`
		Error jsonrpc.Error `json:"error"`
	}{"2.0", nil, jsonrpc.Error{Code: code, Message: msg}})
	return b
}

// startBatch serves or refuses one batch frame.
func (c *lineConn) startBatch(frame []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proto != batchRevision {
		proto := c.proto
		if proto == "" {
			proto = "none yet"
		}
		return c.writeLine(errorLine(jsonrpc.CodeInvalidRequest, fmt.Sprintf("%v: batches are served only under protocol revision %s (negotiated: %s)", errFrameBatch, batchRevision, proto)))
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(frame, &raws); err != nil {
		return c.writeLine(errorLine(jsonrpc.CodeParseError, fmt.Sprintf("parse error: %v", err)))
	}
	if len(raws) == 0 || len(raws) > maxBatchMessages {
		return c.writeLine(errorLine(jsonrpc.CodeInvalidRequest, fmt.Sprintf("batch of %d messages, allowed 1..%d", len(raws), maxBatchMessages)))
	}
	b := &lineBatch{slot: map[jsonrpc.ID]int{}}
	var msgs []jsonrpc.Message
	for _, raw := range raws {
		msg, err := jsonrpc.DecodeMessage(raw)
		if err != nil {
			// Each invalid member has its own answer, in its place.
			b.answers = append(b.answers, errorLine(jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: %v", err)))
			continue
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			// Two calls of one id could not be told apart in the answer.
			if _, dup := b.slot[req.ID]; dup {
				return c.writeLine(errorLine(jsonrpc.CodeInvalidRequest, fmt.Sprintf("batch repeats request id %v", req.ID.Raw())))
			}
			b.slot[req.ID] = len(b.answers)
			b.answers = append(b.answers, nil)
			b.pending++
		}
		msgs = append(msgs, msg)
	}
	c.queue = msgs
	if b.pending == 0 {
		// Notifications (and invalid members) only: nothing to wait for.
		return c.flushBatch(b)
	}
	c.batch = b
	return nil
}

func (c *lineConn) overBudget() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.batch != nil && c.batch.held > maxBatchHeld
}

// flushBatch writes a batch's answers as one array (nothing when the
// batch held no call and no invalid member); the caller holds mu.
func (c *lineConn) flushBatch(b *lineBatch) error {
	c.batch = nil
	if len(b.answers) == 0 {
		return nil
	}
	return c.writeLine(append(append([]byte{'['}, bytes.Join(b.answers, []byte{','})...), ']'))
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	default:
	}
	return c.writeMsg(msg)
}

func (c *lineConn) writeMsg(msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, isResp := msg.(*jsonrpc.Response)
	if isResp && c.initID != nil && resp.ID == *c.initID {
		c.initID = nil
		var r struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if resp.Error == nil && json.Unmarshal(resp.Result, &r) == nil {
			c.proto = r.ProtocolVersion
		}
	}
	if b := c.batch; isResp && b != nil {
		if i, ok := b.slot[resp.ID]; ok {
			delete(b.slot, resp.ID)
			b.answers[i] = data
			b.held += len(data)
			if b.pending--; b.pending == 0 {
				return c.flushBatch(b)
			}
			return nil
		}
	}
	return c.writeLine(data)
}

// writeLine writes one frame and its newline; the caller holds mu.
func (c *lineConn) writeLine(b []byte) error {
	_, err := c.w.Write(append(b, '\n'))
	return err
}
