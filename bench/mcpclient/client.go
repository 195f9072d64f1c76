package mcpclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ProtocolVersion is the MCP revision the client offers at initialize.
const ProtocolVersion = "2025-06-18"

// Client drives one MCP server process over stdio.
type Client struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	nextID int64
	lines  chan line
}

type line struct {
	b   []byte
	err error
}

// Start starts cmd (its stdin and stdout become the transport; stderr goes
// to stderr unless set) and returns the client. Call Initialize next.
func Start(cmd *exec.Cmd) (*Client, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("mcpclient: stdin: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("mcpclient: stdout: %w", err)
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("mcpclient: starting %s: %w", cmd.Path, err)
	}
	c := &Client{cmd: cmd, stdin: in, out: bufio.NewReaderSize(out, 1<<20), lines: make(chan line, 1)}
	go c.readLoop()
	return c, nil
}

// readLoop feeds lines to the caller; a reader goroutine lets every call
// honour its context even when the server stops writing.
func (c *Client) readLoop() {
	for {
		b, err := c.out.ReadBytes('\n')
		if err != nil {
			c.lines <- line{err: err}
			close(c.lines)
			return
		}
		c.lines <- line{b: b}
	}
}

// Pid is the server process's id.
func (c *Client) Pid() int { return c.cmd.Process.Pid }

// Error is a JSON-RPC error response.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message) }

// Call sends one request and waits for its response, skipping notifications
// the server sends meanwhile. It returns the raw result.
func (c *Client) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	c.nextID++
	id := c.nextID
	req, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	if _, err := c.stdin.Write(append(req, '\n')); err != nil {
		return nil, fmt.Errorf("mcpclient: %s: writing: %w", method, err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("mcpclient: %s: %w", method, ctx.Err())
		case l, ok := <-c.lines:
			if !ok || l.err != nil {
				return nil, fmt.Errorf("mcpclient: %s: server closed its output: %v", method, l.err)
			}
			var resp struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
				Error  *Error          `json:"error"`
			}
			if err := json.Unmarshal(l.b, &resp); err != nil {
				return nil, fmt.Errorf("mcpclient: %s: unreadable message %q: %w", method, truncate(l.b), err)
			}
			if len(resp.ID) == 0 || string(resp.ID) == "null" {
				continue // a notification or log message
			}
			if string(resp.ID) != strconv.FormatInt(id, 10) {
				return nil, fmt.Errorf("mcpclient: %s: response to id %s, want %d", method, resp.ID, id)
			}
			if resp.Error != nil {
				return nil, fmt.Errorf("mcpclient: %s: %w", method, resp.Error)
			}
			return resp.Result, nil
		}
	}
}

// Notify sends a notification (no response).
func (c *Client) Notify(method string, params any) error {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if err != nil {
		return err
	}
	_, err = c.stdin.Write(append(b, '\n'))
	return err
}

// Initialize performs the MCP handshake: initialize, then
// notifications/initialized.
func (c *Client) Initialize(ctx context.Context) error {
	_, err := c.Call(ctx, "initialize", map[string]any{
		"protocolVersion": ProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "cleanroom-bench", "version": "1"},
	})
	if err != nil {
		return err
	}
	return c.Notify("notifications/initialized", map[string]any{})
}

// ErrTool is wrapped by CallTool when the tool answered with isError.
var ErrTool = errors.New("tool result is an error")

// CallTool calls tools/call and returns the concatenated text content.
func (c *Client) CallTool(ctx context.Context, name string, args map[string]any) (string, error) {
	raw, err := c.Call(ctx, "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return "", err
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", fmt.Errorf("mcpclient: %s: result: %w", name, err)
	}
	var sb strings.Builder
	for _, p := range r.Content {
		sb.WriteString(p.Text)
	}
	if r.IsError {
		return sb.String(), fmt.Errorf("mcpclient: %s: %w: %s", name, ErrTool, truncate([]byte(sb.String())))
	}
	return sb.String(), nil
}

// Close closes the server's stdin (the stdio transport's end of session)
// and waits for it to exit, killing it after grace.
func (c *Client) Close(grace time.Duration) error {
	c.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
		c.cmd.Process.Kill()
		return fmt.Errorf("mcpclient: server %d did not exit within %v of end of input; killed (%v)", c.cmd.Process.Pid, grace, <-done)
	}
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
