package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The vendored SDK writes a text content and a response frame in one
// buffer of their final size (third_party/go-sdk/PATCHES.md). These tests
// hold those writers to the bytes the unpatched code gives, computed here
// with encoding/json the way the SDK did.

// wantTextContent is the unpatched TextContent.MarshalJSON: json.Marshal
// of its wire struct.
func wantTextContent(t testing.TB, c *mcp.TextContent) []byte {
	t.Helper()
	b, err := json.Marshal(struct {
		Type        string           `json:"type"`
		Text        string           `json:"text"`
		Meta        mcp.Meta         `json:"_meta,omitempty"`
		Annotations *mcp.Annotations `json:"annotations,omitempty"`
	}{"text", c.Text, c.Meta, c.Annotations})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkTextContent(t testing.TB, c *mcp.TextContent) {
	t.Helper()
	got, err := c.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if want := wantTextContent(t, c); !bytes.Equal(got, want) {
		t.Fatalf("TextContent{%q}.MarshalJSON() = %s, encoding/json gives %s", c.Text, got, want)
	}
}

func TestSDKTextContentEncoding(t *testing.T) {
	t.Parallel()
	var every strings.Builder
	for b := range 256 {
		every.WriteByte(byte(b))
	}
	for _, s := range []string{"", "plain", every.String(), `<a href="x">&amp;</a>`, "line\u2028sep\u2029",
		"\xff\xfe", "é\x80ü", "\U0001F600", "\xe2\x80", strings.Repeat("x\n", 1000)} {
		checkTextContent(t, &mcp.TextContent{Text: s})
	}
	// With _meta or annotations the SDK's own path is taken.
	checkTextContent(t, &mcp.TextContent{Text: "x<", Meta: mcp.Meta{"k": "v"}})
	checkTextContent(t, &mcp.TextContent{Text: "y>", Annotations: &mcp.Annotations{Priority: 0.5}})
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", `"`, `\`, "\n", "\x00", "\x1f", "\x7f", "<", ">", "&", "é", "\u2028", "\u2029", "\xff", "\xe2\x80", "\U0001F600", "\b", "\f", "\t", "\r"}
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		checkTextContent(t, &mcp.TextContent{Text: b.String()})
	}
}

func FuzzSDKTextContentEncoding(f *testing.F) {
	f.Add("<\u2028\xff\"\\\n\x00")
	f.Fuzz(func(t *testing.T, s string) { checkTextContent(t, &mcp.TextContent{Text: s}) })
}

// wantResponse is the unpatched EncodeMessage of a successful response:
// the wire struct through an Encoder without HTML escaping, and its error
// wrapped the same way.
func wantResponse(id jsonrpc.ID, result json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		Version string          `json:"jsonrpc"`
		ID      any             `json:"id,omitempty"`
		Result  json.RawMessage `json:"result,omitempty"`
	}{"2.0", id.Raw(), result})
	if err != nil {
		return nil, fmt.Errorf("marshaling jsonrpc message: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// TestSDKResponseEncoding: a response frame is the wire struct's encoding
// without HTML escaping, its result compacted; an invalid result is still
// refused, with the unpatched error.
func TestSDKResponseEncoding(t *testing.T) {
	t.Parallel()
	want := func(id jsonrpc.ID, result json.RawMessage) []byte {
		b, err := wantResponse(id, result)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	result, err := json.Marshal(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a<b>&\u2028\n"}}})
	if err != nil {
		t.Fatal(err)
	}
	ids := []any{"req-<1>", float64(7), float64(0)}
	results := []json.RawMessage{result, json.RawMessage(`{ "a" : [ 1, 2 ],  "b":"<" }`), json.RawMessage(`"s"`), json.RawMessage(`null`)}
	for _, v := range ids {
		id, err := jsonrpc.MakeID(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			got, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: r})
			if err != nil {
				t.Fatalf("EncodeMessage(%v, %s): %v", v, r, err)
			}
			if w := want(id, r); !bytes.Equal(got, w) {
				t.Errorf("EncodeMessage(%v, %s) = %s, want %s", v, r, got, w)
			}
		}
		for _, bad := range []string{`{"a":`, " ", "1 2", "x"} {
			_, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: json.RawMessage(bad)})
			_, werr := wantResponse(id, json.RawMessage(bad))
			if err == nil {
				t.Errorf("an invalid result %q was framed for id %v", bad, v)
			} else if err.Error() != werr.Error() {
				t.Errorf("EncodeMessage(%v, %q): %v, want %v", v, bad, err, werr)
			}
		}
	}
}

// internalErrors is a slog.Handler that passes on the "error" of each
// record the SDK logs for a jsonrpc2 internal error.
type internalErrors chan string

func (h internalErrors) Enabled(context.Context, slog.Level) bool { return true }
func (h internalErrors) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h internalErrors) WithGroup(string) slog.Handler            { return h }
func (h internalErrors) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "jsonrpc2 internal error" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "error" {
				select {
				case h <- a.Value.String():
				default: // only the first is awaited
				}
			}
			return true
		})
	}
	return nil
}

// TestSDKResultMarshalError: a tool result that cannot be marshaled is
// reported (the SDK logs it and sends no response) with the error the
// unpatched jsonMarshal gave, a *json.MarshalerError naming the result's
// type, not the bare reason.
func TestSDKResultMarshalError(t *testing.T) {
	t.Parallel()
	logged := make(internalErrors, 1)
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"}, &mcp.ServerOptions{Logger: slog.New(logged)})
	res := &mcp.CallToolResult{StructuredContent: math.Inf(1)}
	srv.AddTool(&mcp.Tool{Name: "inf", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return res, nil })
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = srv.Run(ctx, st) }() // ends with the cancelled ctx
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	callCtx, stop := context.WithCancel(ctx)
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "inf", Arguments: map[string]any{}})
		called <- err
	}()
	var got string
	select {
	case got = <-logged:
	case err := <-called:
		t.Fatalf("the call returned (%v) before the marshal error was logged", err)
	}
	stop()
	if err := <-called; err == nil {
		t.Error("the cancelled call returned no error")
	}
	_, reason := json.Marshal(res)
	var me *json.MarshalerError
	if !errors.As(reason, &me) {
		t.Fatalf("json.Marshal of the result: %v, want a *json.MarshalerError", reason)
	}
	if !strings.HasSuffix(got, ": "+reason.Error()) {
		t.Errorf("logged %q, want it to end with %q", got, reason)
	}
}
