package harness

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"golang.org/x/sys/unix"
)

// agentSession returns the record of a real room session that ended (start,
// a write_source call, end): the record room agent appends its line to.
func agentSession(t *testing.T) string {
	t.Helper()
	needSeal(t)
	pkg, id := writePackage(t, testFiles())
	s := startSession(t, pkg, id)
	s.call(t, "write_source", map[string]any{"path": "a.go", "content": "package a\n"})
	_ = s.cs.Close()
	return s.tpath
}

// TestRecoverAgentLineAfterKill: room agent's record writer SIGKILLed in
// the middle of its (large) agent line leaves a record that ends in a cut
// line, which no reader takes, and the line's journal; RecoverAgentLine
// ends the record with the whole agent line naming the cut, and the
// record reads complete, the cut bytes kept and listed.
func TestRecoverAgentLineAfterKill(t *testing.T) {
	path := agentSession(t)
	b := killWriterMidLine(t, path, "append-big-agent")
	cut := b[bytes.LastIndexByte(b, '\n')+1:]
	if _, err := ReadTranscript(b); !errors.Is(err, errTranscript) || !strings.Contains(err.Error(), "no final line feed") {
		t.Fatalf("ReadTranscript of a record ending in a cut agent line = %v, want %v", err, errTranscript)
	}
	j, err := os.ReadFile(path + PendingSuffix)
	if err != nil {
		t.Fatalf("the agent line's journal: %v", err)
	}
	if !bytes.HasPrefix(j, cut) || len(j) <= len(cut) {
		t.Fatalf("the journal (%d bytes) does not begin with the cut line (%d bytes)", len(j), len(cut))
	}
	if did, err := RecoverAgentLine(path); err != nil || !did {
		t.Fatalf("RecoverAgentLine = %v, %v; want true, nil", did, err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(after, b) {
		t.Fatalf("the record before the recovered line changed")
	}
	doc, err := ReadTranscript(after)
	if err != nil {
		t.Fatalf("the recovered record: %v", err)
	}
	wantCut(t, doc, cut)
	if c, _ := doc.Get("complete"); c != true {
		t.Errorf("complete %v, want true (the room's end line)", c)
	}
	av, _ := doc.Get("agent")
	agent, ok := av.(*evidence.Object)
	if !ok {
		t.Fatalf("the recovered record has no agent line")
	}
	cmd, _ := agent.Get("command")
	if l, _ := cmd.([]any); len(l) != 2 || l[1] != strings.Repeat("y", bigAgentBytes) {
		t.Errorf("the recovered agent line's command is not the one written")
	}
	if _, err := os.Lstat(path + PendingSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the journal is left after the recovery: %v", err)
	}
	// Recovered once: a second run finds nothing to do and writes nothing.
	if did, err := RecoverAgentLine(path); err != nil || did {
		t.Errorf("RecoverAgentLine again = %v, %v; want false, nil", did, err)
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, after) {
		t.Errorf("a second recovery changed the record")
	}
	// One byte of the cut line changed: its sha256 no longer matches, and
	// the line is read (and refused) as a whole one.
	at := bytes.LastIndexByte(b, '\n') + 1
	tampered := append(append(append([]byte{}, after[:at]...), 'z'), after[at+1:]...)
	if _, err := ReadTranscript(tampered); !errors.Is(err, errTranscript) {
		t.Errorf("ReadTranscript with the cut line edited = %v, want %v", err, errTranscript)
	}
}

// TestRecoverAgentLineStates: every state a kill can leave between the
// journal and its removal is ended exactly, and anything else is refused
// with the record and the journal left as they were.
func TestRecoverAgentLineStates(t *testing.T) {
	base, err := os.ReadFile(agentSession(t))
	if err != nil {
		t.Fatal(err)
	}
	j, err := evidence.Canonical(map[string]any{"event": "agent", "time": "2026-01-01T00:00:00Z", "command": []any{"agent"}, "room_exit": 0})
	if err != nil {
		t.Fatal(err)
	}
	call, err := evidence.Canonical(map[string]any{"event": "call", "seq": 2, "tool": "list_files", "outcome": "listed"})
	if err != nil {
		t.Fatal(err)
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	nl := []byte{'\n'}
	for name, c := range map[string]struct {
		record, journal []byte // journal nil: none
		did             bool
		cut             []byte // the cut line the recovered record names
		want            string // a refusal's text ("" for none)
	}{
		"killed before the append began":        {record: base, journal: j, did: true},
		"killed before the journal was removed": {record: cat(base, j, nl), journal: j},
		"killed in the middle of the line":      {record: cat(base, j[:len(j)/2]), journal: j, did: true, cut: j[:len(j)/2]},
		"killed before the line feed":           {record: cat(base, j), journal: j, did: true, cut: j},
		"nothing pending":                       {record: base},
		"cut short, no journal":                 {record: cat(base, j[:9]), want: "no journal of it"},
		"cut line not the journal's beginning":  {record: cat(base, []byte(`{"event":"call"`)), journal: j, want: "not the beginning of the journalled agent line"},
		"cut line longer than the journal":      {record: cat(base, j, []byte("x")), journal: j, want: "not the beginning of the journalled agent line"},
		"journal not an agent line":             {record: cat(base, call[:5]), journal: call, want: "not one agent line"},
		"journal of two lines":                  {record: base, journal: cat(j, nl, j), want: "not one agent line"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "transcript.jsonl")
			if err := os.WriteFile(path, c.record, 0o644); err != nil {
				t.Fatal(err)
			}
			if c.journal != nil {
				if err := os.WriteFile(path+PendingSuffix, c.journal, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			did, err := RecoverAgentLine(path)
			after, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if c.want != "" {
				if !errors.Is(err, errTranscript) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("RecoverAgentLine = %v, want %v naming %q", err, errTranscript, c.want)
				}
				if !bytes.Equal(after, c.record) {
					t.Errorf("a refused recovery changed the record")
				}
				if _, err := os.Lstat(path + PendingSuffix); (err == nil) != (c.journal != nil) {
					t.Errorf("a refused recovery changed the journal: %v", err)
				}
				return
			}
			if err != nil || did != c.did {
				t.Fatalf("RecoverAgentLine = %v, %v; want %v, nil", did, err, c.did)
			}
			if _, err := os.Lstat(path + PendingSuffix); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the journal is left: %v", err)
			}
			doc, err := ReadTranscript(after)
			if err != nil {
				t.Fatalf("the recovered record: %v", err)
			}
			agent, _ := doc.Get("agent")
			if (agent != nil) != (c.journal != nil) {
				t.Errorf("agent line %v, want one: %v", agent, c.journal != nil)
			}
			if c.cut == nil {
				if l := cutOf(t, doc); len(l) != 0 {
					t.Errorf("cut_lines %v, want none", l)
				}
				if c.journal != nil && !bytes.Equal(after, cat(base, j, nl)) {
					t.Errorf("the record is not the session and the journalled line:\n%s", after)
				}
				return
			}
			wantCut(t, doc, c.cut)
		})
	}
}

// TestRecoverAgentLineLocked: a record whose lock is held (a room still
// serving, or room agent appending its line) is not written.
func TestRecoverAgentLineLocked(t *testing.T) {
	base, err := os.ReadFile(agentSession(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "transcript.jsonl")
	if err := os.WriteFile(path, append(base, `{"event":"ag`...), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := RecoverAgentLine(path); !errors.Is(err, errTranscriptBusy) {
		t.Errorf("RecoverAgentLine of a held record = %v, want %v", err, errTranscriptBusy)
	}
	if err := AppendAgentLine(path, map[string]any{"event": "agent"}); !errors.Is(err, errTranscriptBusy) {
		t.Errorf("AppendAgentLine to a held record = %v, want %v", err, errTranscriptBusy)
	}
	if _, err := os.Lstat(path + PendingSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a journal was written for a held record: %v", err)
	}
}

// TestReadTranscriptAgentCutIsItsBeginning: an agent line may name as cut
// only the beginning of itself (RecoverAgentLine writes no other): an
// agent line appended by hand naming the session's whole end line as
// "cut" would have the reader skip that line, and is refused.
func TestReadTranscriptAgentCutIsItsBeginning(t *testing.T) {
	base, err := os.ReadFile(agentSession(t))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(base), "\n"), "\n")
	last := lines[len(lines)-1] // the session's end line, whole
	forged, err := evidence.Canonical(map[string]any{"event": "agent", "time": "2026-01-01T00:00:00Z", "command": []any{"agent"}, "room_exit": 0,
		"cut_line": map[string]any{"bytes": len(last), "sha256": pkgwalk.SHA256Hex([]byte(last))}})
	if err != nil {
		t.Fatal(err)
	}
	record := append(append(append([]byte{}, base...), forged...), '\n')
	if _, err := ReadTranscript(record); !errors.Is(err, errTranscript) || !strings.Contains(err.Error(), "cut_line names no cut line before it") {
		t.Fatalf("ReadTranscript of an agent line naming the whole end line as cut = %v, want %v naming %q", err, errTranscript, "cut_line names no cut line before it")
	}
}
