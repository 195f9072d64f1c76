package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// fakeModel is a scripted chat-completions server: reply i answers
// request i; it records every request for the test to inspect.
type fakeModel struct {
	mu       sync.Mutex
	replies  []string // message objects (JSON)
	finish   []string // finish_reason of each reply ("" or missing: stop)
	requests []map[string]any
	auth     []string
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var req map[string]any
	b, _ := io.ReadAll(r.Body)
	if r.URL.Path != "/v1/chat/completions" || json.Unmarshal(b, &req) != nil {
		http.Error(w, "bad request", 400)
		return
	}
	f.requests = append(f.requests, req)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	i := len(f.requests) - 1
	if i >= len(f.replies) {
		i = len(f.replies) - 1
	}
	finish := "stop"
	if i < len(f.finish) && f.finish[i] != "" {
		finish = f.finish[i]
	}
	fmt.Fprintf(w, `{"id":"x","choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12,"odd":1e300,"half":2.5}}`, f.replies[i], finish)
}

func toolCall(id, name, args string) string {
	a, _ := json.Marshal(args)
	return fmt.Sprintf(`{"role":"assistant","content":null,"tool_calls":[{"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}]}`, id, name, a)
}

func TestDrive(t *testing.T) {
	t.Parallel()
	needSeal(t)
	files := testFiles()
	cases := []struct {
		name      string
		replies   []string
		finish    []string
		maxTurns  int
		wantStop  string
		wantErr   error
		wantTurns int
	}{
		{"model stops", []string{
			toolCall("c1", "list_files", `{}`),
			toolCall("c2", "read_file", `{"path":"spec/ADD.md"}`),
			toolCall("c3", "write_source", `{"path":"add.go","content":"package add\n"}`),
			`{"role":"assistant","content":"done"}`,
		}, nil, 10, StopModel, nil, 4},
		{"turn limit", []string{toolCall("c1", "list_files", `{}`)}, nil, 3, StopMaxTurns, errMaxTurns, 3},
		// A reply the endpoint cut at its token limit, calling no tool, is
		// not the model stopping: it is asked again, and after three cut
		// replies in a row the session ends, not a completed one.
		{"cut off", []string{
			toolCall("c1", "list_files", `{}`),
			`{"role":"assistant","content":"I will now write the fi"}`,
		}, []string{"tool_calls", "length"}, 10, StopCutOff, errCutOff, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fm := &fakeModel{replies: c.replies, finish: c.finish}
			r := driveHandler(t, files, fm, c.maxTurns, 10*time.Second)
			res, err, ws, tpath, id := r.res, r.err, r.ws, r.tpath, r.bpkg
			if !errors.Is(err, c.wantErr) && !(err == nil && c.wantErr == nil) {
				t.Fatalf("Drive: %v, want %v", err, c.wantErr)
			}
			// A named stop is a refusal (exit 1, docs/exit-codes.md).
			if c.wantErr != nil && fault.ClassOf(err) != fault.Refused {
				t.Errorf("Drive: %v is %v, want %v", err, fault.ClassOf(err), fault.Refused)
			}
			if res.Stop != c.wantStop || res.Turns != c.wantTurns || res.Usage["total_tokens"] != 12*c.wantTurns {
				t.Errorf("result %+v, want stop %s after %d turns", res, c.wantStop, c.wantTurns)
			}
			// Usage counts that are not whole non-negative numbers are not summed.
			if _, ok := res.Usage["odd"]; ok {
				t.Errorf("usage 1e300 summed: %v", res.Usage)
			}
			if _, ok := res.Usage["half"]; ok {
				t.Errorf("usage 2.5 summed: %v", res.Usage)
			}
			// Every request: temperature 0, the model, the seed, the key,
			// and the room's words only.
			for i, req := range fm.requests {
				if req["temperature"] != float64(0) || req["model"] != "test-model" || req["seed"] != float64(7) || fm.auth[i] != "Bearer sk-test" {
					t.Errorf("request %d: temperature %v model %v seed %v auth %q", i, req["temperature"], req["model"], req["seed"], fm.auth[i])
				}
				msgs := req["messages"].([]any)
				if msgs[0].(map[string]any)["content"] != testSystem || msgs[1].(map[string]any)["content"] != testUser {
					t.Errorf("request %d opens with %v %v, want the SYSTEM and USER blocks", i, msgs[0], msgs[1])
				}
				tools := req["tools"].([]any)
				descs := map[string]string{}
				for _, tl := range tools {
					f := tl.(map[string]any)["function"].(map[string]any)
					descs[f["name"].(string)] = f["description"].(string)
				}
				if descs["list_files"] != testListDesc || descs["read_file"] != testReadDesc || descs["write_source"] != testWriteDesc || len(descs) != 3 {
					t.Errorf("request %d tools %v", i, descs)
				}
			}
			if c.wantStop != StopModel {
				return
			}
			// The read_file answer relayed to the model is the file.
			last := fm.requests[len(fm.requests)-1]["messages"].([]any)
			var gotRead string
			for _, m := range last {
				mm := m.(map[string]any)
				if mm["tool_call_id"] == "c2" {
					gotRead, _ = mm["content"].(string)
				}
			}
			if gotRead != string(files["spec/ADD.md"]) {
				t.Errorf("relayed read_file = %q", gotRead)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "add.go")); err != nil || string(b) != "package add\n" {
				t.Errorf("workspace add.go = %q, %v", b, err)
			}
			doc := readTranscript(t, tpath)
			d := doc[len(doc)-1]
			if ev, _ := d.Get("event"); ev != "drive" {
				t.Fatalf("last transcript line %v, want the drive line", ev)
			}
			for k, want := range map[string]any{"model": "test-model", "stop": StopModel, "turns": float64(4), "seed": float64(7)} {
				if got, _ := d.Get(k); got != want {
					t.Errorf("drive %s = %v, want %v", k, got, want)
				}
			}
			checkTranscriptDocument(t, tpath, id, sha([]byte("package add\n")))
		})
	}
}

// checkTranscriptDocument folds the transcript into the §11.1 document and
// checks its fields, then that tampering with it is refused.
func checkTranscriptDocument(t *testing.T, tpath, id, addSHA string) {
	t.Helper()
	b, err := os.ReadFile(tpath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ReadTranscript(b)
	if err != nil {
		t.Fatalf("ReadTranscript: %v", err)
	}
	want := []string{"type", "blind_package_id", "seal_digest", "served_file_count", "instruction_path", "instruction_sha256",
		"model", "seed", "turns", "stop", "usage", "files_read", "refused_reads", "files_written", "access", "messages", "view_mountinfo", "complete",
		"retries", "resumptions"}
	if got := doc.Names(); !slices.Equal(got, want) {
		t.Errorf("document members %v, want %v", got, want)
	}
	fr, _ := doc.Get("files_read")
	fw, _ := doc.Get("files_written")
	bpkg, _ := doc.Get("blind_package_id")
	model, _ := doc.Get("model")
	complete, _ := doc.Get("complete")
	fwJSON, _ := evidence.Canonical(fw)
	if fmt.Sprint(fr) != "[spec/ADD.md]" || bpkg != id || model != "test-model" || complete != true ||
		string(fwJSON) != `[{"path":"add.go","sha256":"`+addSHA+`","size":12}]` {
		t.Errorf("document: files_read %v, files_written %s, bpkg %v, model %v, complete %v", fr, fwJSON, bpkg, model, complete)
	}
	tampered := map[string][]byte{
		"cut short":            b[:len(b)-1],
		"read list edited":     bytes.Replace(b, []byte(`"files_read":["spec/ADD.md"]`), []byte(`"files_read":[]`), 1),
		"duplicate member":     bytes.Replace(b, []byte(`"event":"end"`), []byte(`"event":"end","event":"end"`), 1),
		"line after the drive": append(append([]byte{}, b...), []byte(`{"event":"call"}`+"\n")...),
	}
	for name, tb := range tampered {
		if bytes.Equal(tb, b) {
			t.Fatalf("%s: tampering changed nothing", name)
		}
		if _, err := ReadTranscript(tb); !errors.Is(err, errTranscript) {
			t.Errorf("%s: ReadTranscript = %v, want %v", name, err, errTranscript)
		}
	}
}
