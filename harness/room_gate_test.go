package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Attacks on the room's MCP surface by a client that sends what no SDK
// client would: a batch, calls it never reads the answers of, and methods
// other than the room's. Each is sent as raw frames to Room.Serve (the
// transport `room serve` uses), and the server's memory is measured in this
// process.

// liveHeap is the heap the process holds after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// bigFiles is the synthetic package plus one 256 KiB text file: an answer
// of read_file costs the server that much (twice, while it is written).
func bigFiles() map[string][]byte {
	files := testFiles()
	files["spec/big.txt"] = []byte(strings.Repeat("a", 256<<10))
	return files
}

// heldLimit is what a room may hold beyond its package while a hostile
// client waits: a few answers of the 256 KiB file, not hundreds.
const heldLimit = 24 << 20

// TestRoomRefusesBatch: one frame holding a JSON-RPC batch of 400
// read_file calls would make the SDK hold all 400 answers until the last is
// ready (it answers a batch with one array): 30 KB in, 200 MiB held. The
// SDK refuses batches only once a session has negotiated 2025-06-18 or
// later; before initialize, or for a 2024-11-05 client, it took them. The
// room refuses a frame that is an array, naming the rule,
// and answers nothing of it — also when the batch follows another message
// on the same line after a pause (the SDK's own trailing-data check looks
// only at bytes already buffered).
func TestRoomRefusesBatch(t *testing.T) {
	batch := func(firstID int) string {
		var b strings.Builder
		b.WriteString("[")
		for i := range 400 {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(callFrame(firstID+i, "read_file", `{"path":"spec/big.txt"}`))
		}
		b.WriteString("]")
		return b.String()
	}
	init2024 := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"frames","version":"0"}}}`
	cases := []struct {
		name   string
		before func(t *testing.T, c *frameConn)
		frame  string
	}{
		{"first frame", func(*testing.T, *frameConn) {}, `[` + init2024 + `,{"jsonrpc":"2.0","method":"notifications/initialized"},` + batch(2)[1:] + "\n"},
		{"after a 2024-11-05 initialize", func(t *testing.T, c *frameConn) {
			c.send(t, init2024+"\n")
			if l := c.recv(t); !strings.Contains(string(l), `"protocolVersion":"2024-11-05"`) {
				t.Fatalf("initialize answered %q", l)
			}
			c.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
		}, " \t" + batch(2) + "\n"},
		{"on the line of a ping, after a pause", func(t *testing.T, c *frameConn) {
			id := c.handshake(t)
			c.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id+1000))
			if l := c.recv(t); !strings.Contains(string(l), `"result":{}`) {
				t.Fatalf("ping answered %q", l)
			}
		}, " " + batch(2) + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _, done := memRoom(t, bigFiles())
			tc.before(t, c)
			before := liveHeap()
			// The room may stop reading before the frame's end.
			io.WriteString(c.in, tc.frame)
			if l := c.recv(t); l != nil {
				t.Fatalf("the batch was answered: %.200q", l)
			}
			if held := liveHeap() - min(before, liveHeap()); held > heldLimit {
				t.Errorf("the room holds %d MiB after one batch frame, want < %d MiB", held>>20, heldLimit>>20)
			}
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), ErrFrameBatch.Error()) {
					t.Errorf("Serve returned %v, want the rule %q", err, ErrFrameBatch)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Serve did not return after the batch")
			}
		})
	}
}

// TestRoomCallsInFlight: a client that sends 300 read_file calls of the
// 256 KiB file and reads no answer made the SDK run them all at once, each
// holding its encoded answer while the write blocked: 100 MiB and growing
// with every call sent. The room reads no further message while a call is
// unanswered, so it holds one answer; once the client reads, every call is
// answered, in order.
func TestRoomCallsInFlight(t *testing.T) {
	c, _, _, _ := memRoom(t, bigFiles())
	id := c.handshake(t)
	const n = 300
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range n {
			if _, err := c.in.Write([]byte(callFrame(id+i, "read_file", `{"path":"spec/big.txt"}`) + "\n")); err != nil {
				return
			}
		}
	}()
	before := liveHeap()
	time.Sleep(time.Second)
	if held := liveHeap() - min(before, liveHeap()); held > heldLimit {
		t.Errorf("the room holds %d MiB with %d calls unread, want < %d MiB", held>>20, n, heldLimit>>20)
	}
	for i := range n {
		var a struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if l := c.recv(t); json.Unmarshal(l, &a) != nil || a.ID != id+i || a.Result == nil {
			t.Fatalf("answer %d: %.120q, want the result of call %d", i, l, id+i)
		}
	}
	<-sent
}

// TestRoomServesOnlyItsMethods: the SDK answers by default resources/list,
// resources/templates/list, resources/read, logging/setLevel and
// subscriptions/listen (which parks until cancelled, holding its request:
// 300 of them with 256 KiB of _meta held 150 MiB). The room serves the
// handshake, ping, its tools and its prompt; any other request is answered
// with method-not-found naming the rule, and any other notification is
// dropped. A request ID used twice in a row is answered twice.
func TestRoomServesOnlyItsMethods(t *testing.T) {
	c, _, _, _ := memRoom(t, testFiles())
	id := c.handshake(t)
	refused := []string{
		`"resources/list","params":{}`,
		`"resources/templates/list","params":{}`,
		`"resources/read","params":{"uri":"package:///spec/ADD.md"}`,
		`"resources/subscribe","params":{"uri":"package:///spec/ADD.md"}`,
		`"logging/setLevel","params":{"level":"debug"}`,
		`"completion/complete","params":{"ref":{"type":"ref/prompt","name":"clean-room"},"argument":{"name":"x","value":"y"}}`,
		`"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}`,
		`"sampling/createMessage","params":{}`,
		`"roots/list","params":{}`,
		`"tasks/list","params":{}`,
	}
	for _, m := range refused {
		c.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%s}`+"\n", id, m))
		var a struct {
			ID    int `json:"id"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		l := c.recv(t)
		if json.Unmarshal(l, &a) != nil || a.ID != id || a.Error == nil || a.Error.Code != -32601 || !strings.Contains(a.Error.Message, ErrMethodNotServed.Error()) {
			t.Errorf("%s answered %.300q, want method-not-found naming %q", m, l, ErrMethodNotServed)
		}
		id++
	}
	for _, n := range []string{
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`,
		`{"jsonrpc":"2.0","method":"notifications/whatever","params":{"pad":"` + strings.Repeat("x", 1000) + `"}}`,
	} {
		c.send(t, n+"\n")
	}
	served := []string{
		`"ping"`,
		`"tools/list"`,
		`"prompts/list"`,
		`"prompts/get","params":{"name":"clean-room"}`,
		`"tools/call","params":{"name":"list_files","arguments":{}}`,
	}
	for _, m := range served {
		// The same ID twice: each call is answered before the next is read.
		for range 2 {
			c.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%s}`+"\n", id, m))
		}
		for range 2 {
			var a struct {
				ID     int             `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			if l := c.recv(t); json.Unmarshal(l, &a) != nil || a.ID != id || a.Result == nil {
				t.Errorf("%s answered %.300q, want a result for id %d", m, l, id)
			}
		}
		id++
	}
}

// TestMessageScanner: the scanner finds where each top-level value starts
// whatever the read boundaries (each stream is fed whole and byte by byte):
// brackets, braces and quotes inside strings, escaped quotes and
// backslashes do not fool it.
func TestMessageScanner(t *testing.T) {
	cases := []struct {
		stream string
		ok     bool
	}{
		{`{"a":"[{\"]}"}` + "\n" + `{"b":[1,{"c":"\\"}]}` + "\r\n", true},
		{`{"a":"\\\\"} {"b":"x"}`, true},
		{" \t\r\n{}\n", true},
		{`{"a":"]"}` + "\n[{}]\n", false},
		{`{"a":"\"}"} [`, false},
		{`{"a":1}} {}`, true},
		{"1 \"[\" {}", true},
		{`{"a":1}]] [`, false},
		{`"str" [`, false},
	}
	for _, c := range cases {
		for _, step := range []int{len(c.stream), 1} {
			s := &messageScanner{r: io.NopCloser(strings.NewReader(""))}
			var err error
			for i := 0; i < len(c.stream) && err == nil; i += step {
				err = s.scan([]byte(c.stream[i:min(i+step, len(c.stream))]))
			}
			if c.ok && err != nil {
				t.Errorf("%q (chunks of %d): %v, want accepted", c.stream, step, err)
			}
			if !c.ok && !errors.Is(err, ErrFrameBatch) {
				t.Errorf("%q (chunks of %d): %v, want %v", c.stream, step, err, ErrFrameBatch)
			}
		}
	}
}
