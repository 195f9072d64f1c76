package harness

import (
	"bytes"
	"encoding/json"
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

// TestSDKResponseEncoding: a response frame is the wire struct's encoding
// without HTML escaping, its result compacted; an invalid result is still
// refused.
func TestSDKResponseEncoding(t *testing.T) {
	want := func(id jsonrpc.ID, result json.RawMessage) []byte {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err := enc.Encode(struct {
			Version string          `json:"jsonrpc"`
			ID      any             `json:"id,omitempty"`
			Result  json.RawMessage `json:"result,omitempty"`
		}{"2.0", id.Raw(), result})
		if err != nil {
			t.Fatal(err)
		}
		return bytes.TrimRight(buf.Bytes(), "\n")
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
		if _, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: json.RawMessage(`{"a":`)}); err == nil {
			t.Errorf("an invalid result was framed for id %v", v)
		}
	}
}
