package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// A call the transcript cannot record is not answered — a refusal of bad
// arguments included, not only a served call.
func TestUnrecordedCallNotAnswered(t *testing.T) {
	t.Parallel()
	pkg, id := writePackage(t, testFiles())
	base := t.TempDir()
	room, err := openRoomAt(pkg, RoomConfig{Expect: id, Workspace: filepath.Join(base, "ws"),
		Transcript: filepath.Join(base, "t.jsonl"), Limits: DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = room.Close() }() // fails: the record is broken on purpose
	cs := memSession(t, room)
	room.Transcript.f.Close() // every later write fails
	for _, c := range []struct {
		name string
		tool string
		args map[string]any
	}{
		{"served", "list_files", map[string]any{}},
		{"refused for its arguments", "read_file", map[string]any{"path": 7}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			if err == nil {
				t.Fatalf("%s answered %+v with the transcript broken", c.tool, res)
			}
		})
	}
}

// A write of the transcript that fails midway ends the record there: no
// later call line and no end line (the record must read as incomplete, not
// as a complete one missing a call), and the room acts on no later call
// (a write_source after the failure must not reach the workspace).
func TestTranscriptFailureEndsTheRecord(t *testing.T) {
	t.Parallel()
	pkg, id := writePackage(t, testFiles())
	base := t.TempDir()
	ws, tpath := filepath.Join(base, "ws"), filepath.Join(base, "t.jsonl")
	room, err := openRoomAt(pkg, RoomConfig{Expect: id, Workspace: ws, Transcript: tpath, Limits: DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	cs := memSession(t, room)
	callMem(t, cs, "read_file", map[string]any{"path": "spec/ADD.md"})
	// The next write fails (a descriptor that cannot be written), the
	// one after would succeed again (as when a full disk frees space).
	good := room.Transcript.f
	ro, err := os.Open(tpath)
	if err != nil {
		t.Fatal(err)
	}
	room.Transcript.f = ro
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_files", Arguments: map[string]any{}}); err == nil {
		t.Fatalf("list_files answered %+v with its line unwritten", res)
	}
	room.Transcript.f = good
	ro.Close()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_source", Arguments: map[string]any{"path": "after.go", "content": "x"}}); err == nil {
		t.Errorf("write_source answered %+v after the record broke", res)
	}
	_ = room.Close() // fails: the record broke
	if _, err := os.Stat(filepath.Join(ws, "after.go")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after.go reached the workspace after the record broke: %v", err)
	}
	b, err := os.ReadFile(tpath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ReadTranscript(b)
	if err != nil {
		t.Fatalf("ReadTranscript: %v\n%s", err, b)
	}
	if c, _ := doc.Get("complete"); c != false {
		t.Errorf("a record with a lost line reads as complete:\n%s", b)
	}
	if n := strings.Count(string(b), "\n"); n != 2 {
		t.Errorf("%d lines, want 2 (start, the read):\n%s", n, b)
	}
}

// TestTranscriptLineRemoved: every call line is numbered; a record with a
// line taken out (one that no summary mentions) is refused.
func TestTranscriptLineRemoved(t *testing.T) {
	t.Parallel()
	room, cs, tpath := recordedRoom(t)
	callMem(t, cs, "list_files", map[string]any{})
	callMem(t, cs, "read_file", map[string]any{"path": "spec/ADD.md"})
	callMem(t, cs, "list_files", map[string]any{})
	if err := room.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(tpath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTranscript(b); err != nil {
		t.Fatalf("the honest record: %v", err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	for _, i := range []int{1, 3} { // a list_files line
		cut := strings.Join(append(append([]string{}, lines[:i]...), lines[i+1:]...), "")
		if _, err := ReadTranscript([]byte(cut)); !errors.Is(err, errTranscript) {
			t.Errorf("line %d removed: ReadTranscript = %v, want %v", i+1, err, errTranscript)
		}
	}
	// The last call removed: the numbers left run on, the end line's count
	// disagrees.
	cut := strings.Join(append(append([]string{}, lines[:3]...), lines[4:]...), "")
	if _, err := ReadTranscript([]byte(cut)); !errors.Is(err, errTranscript) {
		t.Errorf("last call removed: ReadTranscript = %v, want %v", err, errTranscript)
	}
}

// TestTranscriptLongKey: a key as long as the room's frame allows, of
// characters that escape to several bytes each, is refused, and the record
// stays readable (the strict reader takes lines of at most 8 MiB): a long
// string is recorded as its beginning, its length and its sha256.
func TestTranscriptLongKey(t *testing.T) {
	t.Parallel()
	room, cs, tpath := recordedRoom(t)
	long := strings.Repeat("\x01", 1<<20)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"write_source", map[string]any{"path": long, "content": "x"}},
		{"read_file", map[string]any{"path": long}},
		{"read_file", map[string]any{long: "x"}},
	} {
		if res := callMem(t, cs, c.tool, c.args); !res.IsError {
			t.Errorf("%s with a 1 MiB key was not refused", c.tool)
		}
	}
	if err := room.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(tpath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ReadTranscript(b)
	if err != nil {
		t.Fatalf("ReadTranscript: %v", err)
	}
	access, _ := doc.Get("access")
	calls := access.([]any)
	if len(calls) != 3 {
		t.Fatalf("%d calls recorded, want 3", len(calls))
	}
	first := calls[0].(interface{ Get(string) (any, bool) })
	n, _ := first.Get("path_bytes")
	digest, _ := first.Get("path_sha256")
	if n != float64(len(long)) || digest != sha([]byte(long)) {
		t.Errorf("long path recorded with path_bytes %v, path_sha256 %v", n, digest)
	}
}

// A transcript whose first line cannot be written (a full disk) is not
// left behind: no record without a start, and the path can be used again.
func TestCreateTranscriptFailureLeavesNoFile(t *testing.T) {
	t.Parallel()
	dir := testshared.FullFS(t)
	fill := filepath.Join(dir, testshared.FillName)
	p := filepath.Join(dir, "t.jsonl")
	if _, err := CreateTranscript(p, TranscriptHeader{BlindPackageID: "bpkg-x"}); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("CreateTranscript on a full disk: %v, want ENOSPC", err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the transcript that could not start is left: %v", err)
	}
	os.Remove(fill)
	tr, err := CreateTranscript(p, TranscriptHeader{BlindPackageID: "bpkg-x"})
	if err != nil {
		t.Fatalf("the same path once there is room: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestTranscriptManyRefusedReads: the end line lists every refused read,
// each as its line records it (up to 4096 bytes, escaped to six times
// that): a few hundred refused reads of long keys must not make the end
// line pass the strict reader's limit, which made room transcript refuse
// the whole record. The room stops serving where the record would become
// unreadable; what was recorded stays readable.
func TestTranscriptManyRefusedReads(t *testing.T) {
	t.Parallel()
	room, cs, tpath := recordedRoom(t)
	long := strings.Repeat("\x01", maxRecordedString-4)
	answered := 0
	for i := range 400 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": fmt.Sprintf("%s%04d", long, i)}})
		cancel()
		if err != nil {
			break
		}
		if !res.IsError {
			t.Fatalf("read_file of a key not in the package answered %+v", res)
		}
		answered++
	}
	// The record stopped at the budget: its end line is refused too.
	if err := room.Close(); !errors.Is(err, errTranscriptFull) {
		t.Fatalf("Close: %v, want %v", err, errTranscriptFull)
	}
	b, err := os.ReadFile(tpath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ReadTranscript(b)
	if err != nil {
		t.Fatalf("after %d refused reads, ReadTranscript: %.300v", answered, err)
	}
	if refused, _ := doc.Get("refused_reads"); len(refused.([]any)) != answered || answered < 100 {
		t.Errorf("%d refused reads recorded, %d answered; want the same, at least 100", len(refused.([]any)), answered)
	}
}

// recordedRoom opens a room on the test package with a transcript and the
// default limits, and an in-memory client session to it.
func recordedRoom(t *testing.T) (*Room, *mcp.ClientSession, string) {
	t.Helper()
	pkg, id := writePackage(t, testFiles())
	base := t.TempDir()
	tpath := filepath.Join(base, "t.jsonl")
	room, err := openRoomAt(pkg, RoomConfig{Expect: id, Workspace: filepath.Join(base, "ws"), Transcript: tpath, Limits: DefaultLimits})
	if err != nil {
		t.Fatal(err)
	}
	return room, memSession(t, room), tpath
}
