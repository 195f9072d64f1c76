package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// TestRetryAfter: delay-seconds and an HTTP-date are read; anything else
// is no Retry-After (-1), and the backoff applies.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	cases := []struct {
		header string
		want   time.Duration
	}{
		{"", -1},
		{"7", 7 * time.Second},
		{" 0 ", 0},
		{"-3", -1},
		{"1.5", -1},
		{"soon", -1},
		{"Tue, 01 Dec 2026 18:00:30 GMT", 30 * time.Second},
		{"Tuesday, 01-Dec-26 18:01:00 GMT", time.Minute},
		{"Tue, 01 Dec 2026 17:59:00 GMT", 0}, // in the past: now
	}
	for _, c := range cases {
		if got := retryAfter(c.header, now); got != c.want {
			t.Errorf("Retry-After %q: %v, want %v", c.header, got, c.want)
		}
	}
}

// TestRetryWait: the backoff doubles from Base with jitter over its upper
// half, never past MaxWait; a Retry-After is taken as given up to MaxWait.
func TestRetryWait(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{Max: 8, Base: 100 * time.Millisecond, MaxWait: time.Second}
	for attempt, full := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		full *= time.Millisecond
		if attempt == 4 || attempt == 5 {
			full = time.Second
		}
		for range 50 {
			if w := p.wait(attempt, -1); w < full/2 || w > full {
				t.Fatalf("attempt %d waited %v, want within [%v, %v]", attempt, w, full/2, full)
			}
		}
	}
	if w := p.wait(40, -1); w < p.MaxWait/2 || w > p.MaxWait {
		t.Errorf("attempt 40 waited %v", w)
	}
	if w := p.wait(0, 300*time.Millisecond); w != 300*time.Millisecond {
		t.Errorf("Retry-After 300ms: waited %v", w)
	}
	if w := p.wait(0, time.Hour); w != p.MaxWait {
		t.Errorf("Retry-After 1h: waited %v, want MaxWait", w)
	}
}

// TestRequestProfiles: the default profile sends what the relay always
// sent; the reasoning profile sends max_completion_tokens and no
// temperature; --request-field adds or replaces, never the relay's own.
func TestRequestProfiles(t *testing.T) {
	t.Parallel()
	keys := func(o DriveOptions) map[string]any {
		t.Helper()
		if err := o.defaults(); err != nil {
			t.Fatal(err)
		}
		b, err := o.requestBody([]any{map[string]any{"role": "user", "content": "x"}}, []any{})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	names := func(m map[string]any) string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return strings.Join(ks, ",")
	}
	base := DriveOptions{Model: "m", Seed: 3, MaxTokens: 100}
	if m := keys(base); names(m) != "max_tokens,messages,model,seed,temperature,tools" || m["temperature"] != float64(0) || m["max_tokens"] != float64(100) {
		t.Errorf("default profile: %v", m)
	}
	r := base
	r.Profile = "openai-reasoning"
	if m := keys(r); names(m) != "max_completion_tokens,messages,model,tools" {
		t.Errorf("openai-reasoning: %v", m)
	}
	a := base
	a.Profile = "anthropic-compatible"
	if m := keys(a); names(m) != "max_tokens,messages,model,temperature,tools" {
		t.Errorf("anthropic-compatible: %v", m)
	}
	f := base
	f.RequestFields = map[string]json.RawMessage{"temperature": json.RawMessage(`0.7`), "reasoning_effort": json.RawMessage(`"high"`)}
	if m := keys(f); m["temperature"] != 0.7 || m["reasoning_effort"] != "high" {
		t.Errorf("request fields: %v", m)
	}
	for _, bad := range []DriveOptions{
		{Profile: "gpt"},
		{RequestFields: map[string]json.RawMessage{"messages": json.RawMessage(`[]`)}},
		{RequestFields: map[string]json.RawMessage{"model": json.RawMessage(`"other"`)}},
	} {
		err := bad.defaults()
		if !errors.Is(err, errProfile) && !errors.Is(err, errRequestField) {
			t.Errorf("%+v: %v, want %v or %v", bad, err, errProfile, errRequestField)
		}
	}
}

// TestDriveBudgets: each budget ends the session with its named stop and
// error, recorded in the drive line.
func TestDriveBudgets(t *testing.T) {
	t.Parallel()
	needSeal(t)
	loop := []string{toolCall("c1", "list_files", `{}`)}
	cases := []struct {
		name    string
		replies []string
		set     func(o *DriveOptions)
		stop    string
		err     error
	}{
		{"tokens", loop, func(o *DriveOptions) { o.MaxTotalTokens = 30 }, StopTokenBudget, errTokenBudget},
		{"wall time", loop, func(o *DriveOptions) { o.MaxWall = time.Nanosecond }, StopWallTime, errWallTime},
		{"tool errors", []string{toolCall("c1", "rm_rf", `{}`)}, func(o *DriveOptions) { o.MaxToolErrors = 3 }, StopToolErrors, errToolErrors},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fm := &fakeModel{replies: c.replies}
			r := driveWith(t, testFiles(), fm, c.set)
			if !errors.Is(r.err, c.err) || r.res == nil || r.res.Stop != c.stop {
				t.Fatalf("Drive: %v, %+v; want stop %s (%v)", r.err, r.res, c.stop, c.err)
			}
			if fault.ClassOf(r.err) != fault.Refused {
				t.Errorf("Drive: %v is %v, want %v (a named stop: exit 1)", r.err, fault.ClassOf(r.err), fault.Refused)
			}
			b, _ := os.ReadFile(r.tpath)
			doc, err := ReadTranscript(b)
			if err != nil {
				t.Fatal(err)
			}
			if s, _ := doc.Get("stop"); s != c.stop {
				t.Errorf("transcript stop %v", s)
			}
		})
	}
}

// TestDriveWallTimeInRequest: the wall-time budget also ends a request in
// flight (an endpoint that never answers), with its named stop, not an
// error.
func TestDriveWallTimeInRequest(t *testing.T) {
	t.Parallel()
	needSeal(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // drained; the request's end is what is awaited
		<-r.Context().Done()
	})
	r := driveWith(t, testFiles(), h, func(o *DriveOptions) { o.MaxWall = 300 * time.Millisecond })
	if !errors.Is(r.err, errWallTime) || r.res.Stop != StopWallTime {
		t.Fatalf("Drive: %v, %+v; want stop %s", r.err, r.res, StopWallTime)
	}
}

// TestDriveInterruptedResumed: a relay whose context ends mid-session
// records stop interrupted; Resume continues it in the same workspace
// against a fresh room, the conversation replayed, and the record
// verifies. A workspace changed between the sessions is refused.
func TestDriveInterruptedResumed(t *testing.T) {
	t.Parallel()
	needSeal(t)
	files := testFiles()
	pkg, id := writePackage(t, files)
	base := t.TempDir()
	ws, tpath := filepath.Join(base, "ws"), filepath.Join(base, "t.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fm := &fakeModel{replies: []string{
		toolCall("c1", "write_source", `{"path":"add.go","content":"package add\n"}`),
		toolCall("c2", "list_files", `{}`),
		`{"role":"assistant","content":"done"}`,
	}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fm.mu.Lock()
		n := len(fm.requests)
		fm.mu.Unlock()
		if n == 1 && ctx.Err() == nil {
			cancel()                           // the operator's Ctrl-C while the model thinks
			_, _ = io.Copy(io.Discard, r.Body) // so that the server sees the client go
			<-r.Context().Done()
			return
		}
		fm.ServeHTTP(w, r)
	})
	r := driveAt(t, ctx, pkg, id, ws, tpath, h, nil)
	if !errors.Is(r.err, errInterrupted) || r.res.Stop != StopInterrupted {
		t.Fatalf("Drive: %v, %+v; want stop %s", r.err, r.res, StopInterrupted)
	}
	prior, err := ReadResumable(tpath)
	if err != nil {
		t.Fatal(err)
	}
	if prior.Workspace != ws || prior.BlindPackageID != id {
		t.Errorf("prior session %+v", prior)
	}
	// A file planted in the workspace between the sessions.
	if err := os.WriteFile(filepath.Join(ws, "planted.go"), []byte("package x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadResumable(tpath); !errors.Is(err, ErrResumeMismatch) {
		t.Errorf("planted file: %v, want %v", err, ErrResumeMismatch)
	}
	os.Remove(filepath.Join(ws, "planted.go"))

	r = driveAt(t, context.Background(), pkg, id, ws, tpath, fm, func(o *DriveOptions) { o.Resume = prior })
	if r.err != nil || r.res.Stop != StopModel || !r.res.Resumed {
		t.Fatalf("resumed Drive: %v, %+v", r.err, r.res)
	}
	last := fm.requests[len(fm.requests)-1]["messages"].([]any)
	if len(last) != 6 || last[3].(map[string]any)["tool_call_id"] != "c1" {
		t.Errorf("the resumed conversation is %d messages: %v", len(last), last)
	}
	b, _ := os.ReadFile(tpath)
	doc, err := ReadTranscript(b)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := doc.Get("resumptions")
	fw, _ := doc.Get("files_written")
	if len(res.([]any)) != 1 || len(fw.([]any)) != 1 {
		t.Errorf("resumptions %v, files_written %v", res, fw)
	}
	if _, err := ReadResumable(tpath); !errors.Is(err, errNotResumable) {
		t.Errorf("a completed session: %v, want %v", err, errNotResumable)
	}
	// Records the reader must refuse: the resume line taken out, a drive
	// line whose messages are not the turn lines'.
	lines := strings.SplitAfter(string(b), "\n")
	var noResume, otherMessages strings.Builder
	for _, l := range lines {
		if !strings.Contains(l, `"event":"resume"`) {
			noResume.WriteString(l)
		}
		if strings.Contains(l, `"event":"drive"`) {
			l = strings.Replace(l, `"content":"done"`, `"content":"DONE"`, 1)
		}
		otherMessages.WriteString(l)
	}
	for name, tb := range map[string]string{"no resume line": noResume.String(), "drive messages edited": otherMessages.String()} {
		if tb == string(b) {
			t.Fatalf("%s: changed nothing", name)
		}
		if _, err := ReadTranscript([]byte(tb)); !errors.Is(err, errTranscript) {
			t.Errorf("%s: %v, want %v", name, err, errTranscript)
		}
	}
}

// TestReopenWorkspace: a resumed workspace is taken back as written
// (its caps count what it holds), and one holding a link is refused.
func TestReopenWorkspace(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ws")
	lim := DefaultLimits
	lim.MaxFiles = 2
	w, err := CreateWorkspace(dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write("a/b.go", []byte("package a\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err = ReopenWorkspace(dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	// A/x.go: case-folds onto the directory a; two more files pass MaxFiles.
	if err := w.Write("A/x.go", nil); err == nil || !strings.Contains(err.Error(), string(errWriteCase)) {
		t.Errorf("A/x.go after reopening: %v, want %q", err, errWriteCase)
	}
	if err := w.Write("c.go", nil); err != nil {
		t.Errorf("c.go: %v", err)
	}
	if err := w.Write("d.go", nil); err == nil || !strings.Contains(err.Error(), string(errWorkspaceFull)) {
		t.Errorf("a third file: %v, want %q", err, errWorkspaceFull)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "a", "out")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReopenWorkspace(dir, lim); err == nil || !strings.Contains(err.Error(), string(errWorkspaceEntry)) {
		t.Errorf("a workspace holding a link: %v, want %q", err, errWorkspaceEntry)
	}
}

// TestTransientFailures: which failures are retried — 429, 408 and 5xx
// from the endpoint, a connection that failed or timed out — and which
// are not (another status, a failure once the session is stopping).
func TestTransientFailures(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]bool{429: true, 408: true, 500: true, 502: true, 503: true, 529: true, 599: true,
		400: false, 401: false, 403: false, 404: false, 409: false, 422: false, 600: false} {
		if retryable(code) != want {
			t.Errorf("HTTP %d retryable %v, want %v", code, !want, want)
		}
	}
	live, stopped := context.Background(), func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}()
	var te *transientError
	for _, c := range []struct {
		ctx  context.Context
		err  error
		want bool
	}{
		{live, io.EOF, true},
		{live, io.ErrUnexpectedEOF, true},
		{live, fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{live, fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{live, context.DeadlineExceeded, true},
		{live, errors.New("unsupported protocol scheme"), false},
		{stopped, io.EOF, false},
		{stopped, context.Canceled, false},
	} {
		if got := errors.As(transportFailure(c.ctx, "model request", c.err), &te); got != c.want {
			t.Errorf("%v (session stopping: %v): transient %v, want %v", c.err, c.ctx.Err() != nil, got, c.want)
		}
	}
}

// TestResumeAfterRoomDied: a transcript without its end line is resumed
// only once no room holds it (the room died, SIGKILL or a crash); while
// one does, resuming it, or a second room appending to it, is refused.
func TestResumeAfterRoomDied(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws, p := filepath.Join(dir, "ws"), filepath.Join(dir, "t.jsonl")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	h := TranscriptHeader{BlindPackageID: "bpkg-x", Workspace: ws}
	tr, err := CreateTranscript(p, h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadResumable(p); !errors.Is(err, errNotResumable) || !strings.Contains(err.Error(), string(errTranscriptBusy)) {
		t.Errorf("resuming a transcript a room holds: %v, want %v naming %q", err, errNotResumable, errTranscriptBusy)
	}
	if _, err := ResumeTranscript(p, h); err == nil || !strings.Contains(err.Error(), string(errTranscriptBusy)) {
		t.Errorf("a second room on a held transcript: %v, want %q", err, errTranscriptBusy)
	}
	tr.f.Close() // the room dies without its end line
	prior, err := ReadResumable(p)
	if err != nil || prior.Workspace != ws || prior.BlindPackageID != "bpkg-x" {
		t.Fatalf("resuming after the room died: %+v, %v", prior, err)
	}
	t2, err := ResumeTranscript(p, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := t2.Close(); err != nil {
		t.Fatal(err)
	}
}
