package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// bigTurnBytes is the size of the turn line the relay is killed in the
// middle of: large enough that its one write(2) lasts a while.
const bigTurnBytes = 32 << 20

func init() {
	// The relay's record writer, in a process of its own, appending one
	// large turn line (a long reply) to the transcript at a[0].
	childFuncs["append-big-turn"] = func(a []string) error {
		r, err := openRelayRecord(a[0])
		if err != nil {
			return err
		}
		defer r.close()
		return r.line(map[string]any{"event": "turn", "turn": 1, "usage": map[string]any{},
			"messages": []any{map[string]any{"role": "assistant", "content": strings.Repeat("x", bigTurnBytes)}}})
	}
	// room agent's record writer (AppendAgentLine, as agentroom.Run calls
	// it), in a process of its own, appending one large agent line.
	childFuncs["append-big-agent"] = func(a []string) error { return AppendAgentLine(a[0], bigAgentLine()) }
}

// bigAgentBytes is the size of the agent line room agent is killed in the
// middle of: as large as a line the strict reader takes (evidence.MaxSize),
// so that its one write lasts a while.
const bigAgentBytes = evidence.MaxSize - 64<<10

// bigAgentLine is an agent line of bigAgentBytes and more (an agent that
// made very many connections).
func bigAgentLine() map[string]any {
	return map[string]any{"event": "agent", "command": []any{"agent", strings.Repeat("y", bigAgentBytes)}, "room_exit": 0}
}

// killMidLine runs the relay's record writer on path and SIGKILLs it
// while its turn line is being written, and returns the bytes it left
// (the record ends with a line cut short). A write that finished before
// the kill is undone (the record restored) and tried again.
func killMidLine(t *testing.T, path string) []byte {
	t.Helper()
	return killWriterMidLine(t, path, "append-big-turn")
}

// killWriterMidLine is killMidLine of the writer child (a childFuncs
// name) appending a line of bigAgentBytes and more.
func killWriterMidLine(t *testing.T, path, child string) []byte {
	t.Helper()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		cmd := exec.Command(os.Args[0], childMarker, child, path)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
	poll:
		for {
			select {
			case err := <-waited:
				t.Logf("the writer ended before a kill: %v", err)
				break poll
			default:
			}
			// The write has begun: SIGKILL, as an operator's kill -9 or
			// the OOM killer would.
			if st, err := os.Stat(path); err == nil && st.Size() > int64(len(before))+1<<20 {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				t.Logf("the writer killed: %v", <-waited)
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		after, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(after, before) {
			t.Fatalf("the record before the cut line changed")
		}
		if n := len(after) - len(before); n > 0 && n < bigAgentBytes && after[len(after)-1] != '\n' {
			return after
		}
		// Written whole before the kill (or not begun): again, without the
		// agent line's journal (AppendAgentLine) if there is one.
		if err := os.WriteFile(path, before, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(path + PendingSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
	t.Fatalf("the writer was never killed in the middle of its line")
	return nil
}

// cutOf returns the record's cut_lines entries (size, sha256).
func cutOf(t *testing.T, doc *evidence.Object) []any {
	t.Helper()
	cl, _ := doc.Get("cut_lines")
	l, _ := cl.([]any)
	return l
}

func wantCut(t *testing.T, doc *evidence.Object, cut []byte) {
	t.Helper()
	l := cutOf(t, doc)
	if len(l) != 1 {
		t.Fatalf("cut_lines %v, want one", l)
	}
	o := l[0].(*evidence.Object)
	n, _ := o.Get("bytes")
	s, _ := o.Get("sha256")
	if n != float64(len(cut)) || s != sha(cut) {
		t.Errorf("cut_line %v bytes %v, want %d bytes %s", n, s, len(cut), sha(cut))
	}
}

// resumeDone resumes the session recorded at s.tpath (ReadResumable, then
// Drive with Resume) with a model that stops at once, and returns the
// record as it is then.
func resumeDone(t *testing.T, pkg, id string, s *session) []byte {
	t.Helper()
	prior, err := ReadResumable(s.tpath)
	if err != nil {
		t.Fatal(err)
	}
	done := &fakeModel{replies: []string{`{"role":"assistant","content":"done"}`}}
	r := driveAt(t, context.Background(), pkg, id, s.workspace, s.tpath, done, func(o *DriveOptions) { o.Resume = prior })
	if r.err != nil || r.res.Stop != StopModel {
		t.Fatalf("resumed Drive: %v, %+v", r.err, r.res)
	}
	b, err := os.ReadFile(s.tpath)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestResumeAfterCutLine: the relay SIGKILLed in the middle of a large
// turn line leaves a resumable record, whether the room outlives it (its
// end line names the cut line) or is gone too (the resumed start line
// names it); the cut bytes stay, the record verifies, the resumed
// session completes.
func TestResumeAfterCutLine(t *testing.T) {
	needSeal(t)
	pkg, id := writePackage(t, testFiles())

	t.Run("the room ends its record after the cut", func(t *testing.T) {
		s := startSession(t, pkg, id)
		s.call(t, "write_source", map[string]any{"path": "a.go", "content": "package a\n"})
		b := killMidLine(t, s.tpath)
		cut := b[bytes.LastIndexByte(b, '\n')+1:]
		// The relay is gone: the room's stdin ends, and it ends its record.
		_ = s.cs.Close()
		b, err := os.ReadFile(s.tpath)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := ReadTranscript(b)
		if err != nil {
			t.Fatalf("the record after the cut: %v", err)
		}
		if c, _ := doc.Get("complete"); c != true {
			t.Errorf("the room's end line is missing")
		}
		wantCut(t, doc, cut)
		b = resumeDone(t, pkg, id, s)
		doc, err = ReadTranscript(b)
		if err != nil {
			t.Fatalf("the resumed record: %v", err)
		}
		wantCut(t, doc, cut)
		if res, _ := doc.Get("resumptions"); len(res.([]any)) != 1 {
			t.Errorf("resumptions %v", res)
		}
		if !bytes.Contains(b, cut) {
			t.Errorf("the cut line's bytes are gone")
		}
	})

	t.Run("the room is gone too", func(t *testing.T) {
		s := startSession(t, pkg, id)
		s.call(t, "write_source", map[string]any{"path": "a.go", "content": "package a\n"})
		_ = s.cs.Close()
		b := killMidLine(t, s.tpath)
		cut := b[bytes.LastIndexByte(b, '\n')+1:]
		// Nothing names the cut yet: the reader refuses the record as it is.
		if _, err := ReadTranscript(b); !errors.Is(err, errTranscript) || !strings.Contains(err.Error(), "no final line feed") {
			t.Errorf("ReadTranscript of a record ending in a cut line = %v, want %v", err, errTranscript)
		}
		after := resumeDone(t, pkg, id, s)
		if !bytes.HasPrefix(after, b) {
			t.Fatalf("the record before the resumed session changed")
		}
		doc, err := ReadTranscript(after)
		if err != nil {
			t.Fatalf("the resumed record: %v", err)
		}
		wantCut(t, doc, cut)
		starts := 0
		for _, l := range strings.Split(string(after[len(b):]), "\n") {
			if strings.Contains(l, `"event":"start"`) && strings.Contains(l, `"cut_line":`) {
				starts++
			}
		}
		if starts != 1 {
			t.Errorf("%d resumed start lines naming the cut, want 1", starts)
		}
		fw, _ := doc.Get("files_written")
		if len(fw.([]any)) != 1 {
			t.Errorf("files_written %v, want a.go", fw)
		}
	})
}

// TestCutLineNamedExactly: a cut line is skipped only where the line
// after it names its exact size and sha256; any other unreadable line,
// or a cut_line that names nothing, is refused.
func TestCutLineNamedExactly(t *testing.T) {
	needSeal(t)
	pkg, id := writePackage(t, testFiles())
	s := startSession(t, pkg, id)
	s.call(t, "write_source", map[string]any{"path": "a.go", "content": "package a\n"})
	b := killMidLine(t, s.tpath)
	_ = s.cs.Close()
	good, err := os.ReadFile(s.tpath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTranscript(good); err != nil {
		t.Fatal(err)
	}
	cutAt := bytes.LastIndexByte(b, '\n') + 1
	// The cut line's number, and the end line's once the cut line is gone.
	at := fmt.Sprintf("line %d: ", bytes.Count(good[:cutAt], []byte("\n"))+1)
	for name, c := range map[string]struct {
		tampered []byte
		want     string // the refusal's line and rule
	}{
		// One byte of the cut line changed: its sha256 no longer matches,
		// and the line is read (and refused) as a whole one.
		"cut line edited": {append(append(append([]byte{}, good[:cutAt]...), 'y'), good[cutAt+1:]...), at},
		// The cut line taken out: the end line's cut_line names nothing.
		"cut line removed": {append(append([]byte{}, good[:cutAt]...), good[len(b)+1:]...), at + "cut_line names no cut line before it"},
	} {
		if bytes.Equal(c.tampered, good) {
			t.Fatalf("%s: changed nothing", name)
		}
		if _, err := ReadTranscript(c.tampered); !errors.Is(err, errTranscript) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: ReadTranscript = %v, want %v naming %q", name, err, errTranscript, c.want)
		}
	}
}
