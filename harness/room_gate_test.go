package harness

import (
	"encoding/json"
	"fmt"
	"os"
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

// rpcError is an answer line read as a JSON-RPC error response.
type rpcError struct {
	ID    json.RawMessage `json:"id"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// expectError reads the next answer and checks it is an error response with
// id null, the code given and a message naming want.
func expectError(t *testing.T, c *frameConn, code int, want string) {
	t.Helper()
	l := c.recv(t)
	var a rpcError
	if json.Unmarshal(l, &a) != nil || a.Error == nil || a.Error.Code != code || string(a.ID) != "null" || !strings.Contains(a.Error.Message, want) {
		t.Fatalf("answered %.300q, want error %d with id null naming %q", l, code, want)
	}
}

// expectPing checks the session goes on: a ping is answered.
func expectPing(t *testing.T, c *frameConn, id int) {
	t.Helper()
	c.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`+"\n", id))
	if l := c.recv(t); !strings.Contains(string(l), fmt.Sprintf(`"id":%d,"result":{}`, id)) {
		t.Fatalf("ping answered %.300q, want its result", l)
	}
}

// bigBatch is a batch of n read_file calls of spec/big.txt, ids from first.
func bigBatch(first, n int) string {
	var b strings.Builder
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(callFrame(first+i, "read_file", `{"path":"spec/big.txt"}`))
	}
	b.WriteString("]")
	return b.String()
}

// TestRoomRefusesBatch: one frame holding a JSON-RPC batch of 400
// read_file calls would make the SDK hold all 400 answers until the last is
// ready (it answers a batch with one array): 30 KB in, 200 MiB held. The
// SDK refuses batches only once a session has negotiated 2025-06-18 or
// later, and then ends the session; before initialize, or for a 2024-11-05
// client, it took them. Under any revision but 2025-03-26 (the one that
// requires batches) the room answers the frame with one invalid-request
// error naming the rule, runs none of it, holds nothing of it, and the
// session goes on.
func TestRoomRefusesBatch(t *testing.T) {
	// Not parallel: it measures the process's heap.
	initFrame := func(proto string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + proto + `","capabilities":{},"clientInfo":{"name":"frames","version":"0"}}}`
	}
	initialize := func(proto string) func(t *testing.T, c *frameConn) {
		return func(t *testing.T, c *frameConn) {
			c.send(t, initFrame(proto)+"\n")
			if l := c.recv(t); !strings.Contains(string(l), `"protocolVersion":"`+proto+`"`) {
				t.Fatalf("initialize answered %q", l)
			}
			c.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
		}
	}
	cases := []struct {
		name   string
		before func(t *testing.T, c *frameConn)
		frame  string
	}{
		{"first frame", func(*testing.T, *frameConn) {}, `[` + initFrame("2024-11-05") + `,{"jsonrpc":"2.0","method":"notifications/initialized"},` + bigBatch(2, 400)[1:] + "\n"},
		{"after a 2024-11-05 initialize", initialize("2024-11-05"), " \t" + bigBatch(2, 400) + "\n"},
		{"after a 2025-06-18 initialize", initialize("2025-06-18"), bigBatch(2, 400) + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _, transcript, _ := memRoom(t, bigFiles())
			tc.before(t, c)
			before := liveHeap()
			c.send(t, tc.frame)
			expectError(t, c, -32600, errFrameBatch.Error())
			if held := liveHeap() - min(before, liveHeap()); held > heldLimit {
				t.Errorf("the room holds %d MiB after one batch frame, want < %d MiB", held>>20, heldLimit>>20)
			}
			expectPing(t, c, 5000)
			b, _ := os.ReadFile(transcript)
			if strings.Contains(string(b), `"event":"call"`) {
				t.Errorf("a call of the refused batch was run: %.300s", b)
			}
		})
	}
}

// TestRoomServesBatch: under 2025-03-26, whose servers must receive
// batches, the room serves one: every call answered in one array in the
// batch's order, an invalid member answered in its place, notifications
// not answered. A batch whose answers pass the room's budget has its
// remaining calls answered with an error instead of run, so a batch of 256
// reads of a 256 KiB file holds a few answers, not 400.
func TestRoomServesBatch(t *testing.T) {
	// Not parallel: it measures the process's heap.
	c, _, _, _ := memRoom(t, bigFiles())
	c.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"frames","version":"0"}}}`+"\n")
	if l := c.recv(t); !strings.Contains(string(l), `"protocolVersion":"2025-03-26"`) {
		t.Fatalf("initialize answered %q", l)
	}
	c.send(t, `[{"jsonrpc":"2.0","method":"notifications/initialized"},`+callFrame(10, "list_files", `{}`)+`,{"jsonrpc":"2.0","id":11,"method":"ping"},{"a":1},`+callFrame(12, "read_file", `{"path":"spec/ADD.md"}`)+`,{"jsonrpc":"2.0","id":13,"method":"resources/list"}]`+"\n")
	var answers []struct {
		ID     json.RawMessage `json:"id"`
		Result *struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	l := c.recv(t)
	if err := json.Unmarshal(l, &answers); err != nil || len(answers) != 5 {
		t.Fatalf("batch answered %.500q (%v), want an array of 5", l, err)
	}
	want := []struct {
		id   string
		code int
	}{{"10", 0}, {"11", 0}, {"null", -32600}, {"12", 0}, {"13", -32601}}
	for i, w := range want {
		a := answers[i]
		if string(a.ID) != w.id || (w.code == 0) != (a.Result != nil) || (w.code != 0 && (a.Error == nil || a.Error.Code != w.code)) {
			t.Errorf("answer %d: id %s result %v error %v, want id %s code %d", i, a.ID, a.Result != nil, a.Error, w.id, w.code)
		}
	}
	if r := answers[3].Result; r == nil || len(r.Content) != 1 || r.Content[0].Text != string(testFiles()["spec/ADD.md"]) {
		t.Errorf("read_file in the batch answered %+v", r)
	}

	before := liveHeap()
	c.send(t, bigBatch(100, maxBatchMessages)+"\n")
	l = c.recv(t)
	if held := liveHeap() - min(before, liveHeap()); held > heldLimit {
		t.Errorf("the room holds %d MiB after the batch, want < %d MiB", held>>20, heldLimit>>20)
	}
	if err := json.Unmarshal(l, &answers); err != nil || len(answers) != maxBatchMessages {
		t.Fatalf("big batch answered %d bytes (%v), want an array of %d", len(l), err, maxBatchMessages)
	}
	served, over := 0, 0
	for i, a := range answers {
		switch {
		case string(a.ID) != fmt.Sprint(100+i):
			t.Fatalf("answer %d has id %s", i, a.ID)
		case a.Result != nil:
			served++
		case a.Error != nil && a.Error.Code == codeBatchOverBudget:
			over++
		}
	}
	// 256 KiB answers: the budget holds 16 and the one that passes it.
	if served < 1 || served > maxBatchHeld/(256<<10)+1 || served+over != maxBatchMessages {
		t.Errorf("%d calls served, %d refused over the budget", served, over)
	}
	expectPing(t, c, 5000)
}

// TestRoomCallsInFlight: a client that sends 300 read_file calls of the
// 256 KiB file and reads no answer made the SDK run them all at once, each
// holding its encoded answer while the write blocked: 100 MiB and growing
// with every call sent. The room reads no further message while a call is
// unanswered, so it holds one answer; once the client reads, every call is
// answered, in order.
func TestRoomCallsInFlight(t *testing.T) {
	// Not parallel: it measures the process's heap.
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
	t.Parallel()
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
		if json.Unmarshal(l, &a) != nil || a.ID != id || a.Error == nil || a.Error.Code != -32601 || !strings.Contains(a.Error.Message, errMethodNotServed.Error()) {
			t.Errorf("%s answered %.300q, want method-not-found naming %q", m, l, errMethodNotServed)
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

// TestLineFrames: a frame that is not JSON is answered with a parse
// error, JSON that is no JSON-RPC message with an invalid-request error,
// each with id null, and the session goes on; a call is judged by its own
// line, whatever comes before or after it.
func TestLineFrames(t *testing.T) {
	t.Parallel()
	c, _, _, _ := memRoom(t, testFiles())
	id := c.handshake(t)
	for _, f := range []struct {
		frame string
		code  int
	}{
		{`{not json`, -32700},
		{`{"jsonrpc":"2.0","id":2,"method":"ping"} garbage`, -32700},
		{`{"jsonrpc":"2.0","id":2,"method":"ping"}{"jsonrpc":"2.0","id":3,"method":"ping"}`, -32700},
		{`"]" [`, -32700},
		{`{"a":1}`, -32600},
		{`{"jsonrpc":"1.0","id":2,"method":"ping"}`, -32600},
		{`[1,2`, -32600}, // a batch under 2025-06-18: refused before it is parsed
	} {
		c.send(t, f.frame+"\n")
		expectError(t, c, f.code, "")
		expectPing(t, c, id)
		id++
	}
	// Blank lines are no frames; '\r' ends a frame as '\n' does.
	c.send(t, "\n \t\r\n")
	expectPing(t, c, id)
}

// TestRoomCapabilities: the room's lists never change (the prompt file is
// sealed), so neither initialize nor server/discover advertises listChanged;
// server/discover answers the revisions, the capabilities and the SYSTEM
// block as instructions, like initialize.
func TestRoomCapabilities(t *testing.T) {
	t.Parallel()
	c, _, _, _ := memRoom(t, testFiles())
	c.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"frames","version":"0"}}}`+"\n")
	l := c.recv(t)
	if !strings.Contains(string(l), `"capabilities":{"prompts":{},"tools":{}}`) || strings.Contains(string(l), "listChanged") {
		t.Errorf("initialize answered %s, want tools and prompts without listChanged", l)
	}
	c.send(t, `{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"frames","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}}}`+"\n")
	l = c.recv(t)
	var d struct {
		Result struct {
			SupportedVersions []string                   `json:"supportedVersions"`
			Capabilities      map[string]json.RawMessage `json:"capabilities"`
			Instructions      string                     `json:"instructions"`
		} `json:"result"`
	}
	if err := json.Unmarshal(l, &d); err != nil || len(d.Result.SupportedVersions) == 0 || d.Result.Instructions != testSystem ||
		string(d.Result.Capabilities["tools"]) != "{}" || string(d.Result.Capabilities["prompts"]) != "{}" || len(d.Result.Capabilities) != 2 {
		t.Errorf("server/discover answered %s (%v)", l, err)
	}
}
