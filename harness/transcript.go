package harness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"golang.org/x/sys/unix"
)

// TranscriptType names the transcript format (TRVM-FORMATS §11.1).
const TranscriptType = "TRVM-CLEAN-ROOM-TRANSCRIPT-v1"

// Transcript is the room's access log, written outside the sealed view as
// JSON Lines: a header line with the §11.1 identity fields, one line per
// tool call (appended with a single write(2), so a crash loses at most the
// call in flight), and an end line with the §11.1 summaries (files_read,
// refused_reads, files_written). The relay (room drive) appends "turn" and
// "retry" lines while the session runs and a "drive" line with the model,
// usage, turns and stop reason at its end; a resumed session adds a second
// start line and the relay's "resume" line (relayRecord). room agent
// appends an "agent" line instead (the command, its version, every proxied
// connection). Each line is RFC 8785 JSON.
type Transcript struct {
	mu      sync.Mutex
	f       *os.File
	seq     int
	summary summary
	now     func() time.Time
	err     error // the first failed write; the room stops serving on it
	written int64 // bytes written, lines whole
}

// Bytes returns the bytes written to the transcript so far (0 for none).
func (t *Transcript) Bytes() int64 {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.written
}

// summary is the end line's files_read, refused_reads and files_written,
// folded from the call lines: by the writer as it records them, and by
// ReadTranscript, which refuses an end line that disagrees.
type summary struct {
	read    map[string]bool
	refused []any
	written map[string]*evidence.Object
	// refusedBytes is refused as the end line encodes it (the writer's
	// budget, maxRefusedReadBytes).
	refusedBytes int
}

func newSummary() summary {
	return summary{read: map[string]bool{}, refused: []any{}, written: map[string]*evidence.Object{}}
}

// add folds one call line in (bytes and sha256 only for a written file).
func (s *summary) add(tool, outcome any, path string, bytes, sha256 any) {
	switch {
	case tool == "read_file" && outcome == "served":
		s.read[path] = true
	case tool == "read_file" && outcome == "refused":
		s.refused = append(s.refused, path)
	case tool == "write_source" && outcome == "written":
		s.written[path] = evidence.NewObject(evidence.Member{Name: "path", Value: path}, evidence.Member{Name: "size", Value: bytes}, evidence.Member{Name: "sha256", Value: sha256})
	}
}

// lists returns files_read and files_written sorted by path, and
// refused_reads in call order.
func (s *summary) lists() (read, refused, written []any) {
	read, written = []any{}, []any{}
	for _, p := range slices.Sorted(maps.Keys(s.read)) {
		read = append(read, p)
	}
	for _, p := range slices.Sorted(maps.Keys(s.written)) {
		written = append(written, s.written[p])
	}
	return read, s.refused, written
}

// Err returns the first write error, if any: a room whose record cannot be
// written must not go on serving.
func (t *Transcript) Err() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// TranscriptHeader holds the identity fields of the first line.
type TranscriptHeader struct {
	BlindPackageID    string
	SealDigest        string
	ServedFileCount   int
	InstructionPath   string
	InstructionSHA256 string
	Workspace         string
	// ViewMountInfo is the view's /proc/self/mountinfo line as the serving
	// process saw it (ro per mount and at the superblock, no peer group).
	ViewMountInfo string
}

// CreateTranscript creates path exclusively (an existing file is never
// appended to or replaced) and writes the header line. A nil *Transcript
// (no path given) records nothing.
func CreateTranscript(path string, h TranscriptHeader) (*Transcript, error) {
	// Read and write: the end line looks at the record's last byte first
	// (Close).
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating transcript %s: %w", path, err)
	}
	t, err := startTranscript(os.NewFile(uintptr(fd), path), h, false)
	if err != nil {
		// The file is this call's (created exclusively) and holds at most a
		// part of its first line: it goes, so that no record without a
		// start is left and the same path can be used again.
		os.Remove(path)
	}
	return t, err
}

// ResumeTranscript opens the transcript of an interrupted session (room
// drive --resume) for appending, never through a link, and writes a start
// line marked resumed: true. A record whose last line was cut short (a
// writer killed in the middle of it) is resumed after it: the start line
// names the cut line (cut_line: its size and sha256) and is written after
// a line feed that ends it, in the same write, so that the cut is never
// hidden and nothing is removed (ReadTranscript skips the line it names).
func ResumeTranscript(path string, h TranscriptHeader) (*Transcript, error) {
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening transcript %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() == 0 {
		f.Close()
		return nil, fmt.Errorf("%w: %s: not a record (%v)", errTranscript, path, err)
	}
	return startTranscript(f, h, true)
}

// cutLine returns the size and sha256 of what follows f's last line feed:
// a line cut short by a writer killed in the middle of its write (0 and
// "" when f ends with a whole line). A record with no line feed at all
// has no whole line, not even its start: errTranscript.
func cutLine(f *os.File) (int64, string, error) {
	st, whole, err := endsWithWholeLine(f)
	if err != nil || whole {
		return 0, "", err
	}
	// Back from the end, a block at a time, to the last line feed.
	buf := make([]byte, 64<<10)
	end := st.Size()
	for end > 0 {
		off := max(0, end-int64(len(buf)))
		if _, err := f.ReadAt(buf[:end-off], off); err != nil {
			return 0, "", err
		}
		if i := bytes.LastIndexByte(buf[:end-off], '\n'); i >= 0 {
			start := off + int64(i) + 1
			h := sha256.New()
			if _, err := io.Copy(h, io.NewSectionReader(f, start, st.Size()-start)); err != nil {
				return 0, "", err
			}
			return st.Size() - start, hex.EncodeToString(h.Sum(nil)), nil
		}
		end = off
	}
	return 0, "", fmt.Errorf("%w: %s: no whole line", errTranscript, f.Name())
}

// endsWithWholeLine stats f and reports whether its last byte is a
// newline (false for an empty file): a line appended after a cut-short
// one would be glued to it and hide the cut.
func endsWithWholeLine(f *os.File) (os.FileInfo, bool, error) {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return st, false, err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, st.Size()-1); err != nil {
		return st, false, err
	}
	return st, last[0] == '\n', nil
}

// errTranscriptBusy: another room holds the transcript (its lock): two
// rooms appending to one record would interleave two sessions.
const errTranscriptBusy pkgwalk.Rule = "transcript is held by a running room"

// startTranscript locks f for the life of the room (released when its
// descriptor closes, however the room ends: a resume can tell a room still
// running from one that died without its end line) and writes the start
// line.
func startTranscript(f *os.File, h TranscriptHeader, resumed bool) (*Transcript, error) {
	if err := lockRecord(f); err != nil {
		f.Close()
		return nil, err
	}
	t := &Transcript{f: f, summary: newSummary(), now: time.Now}
	// A resumed record's earlier sessions count against the byte budget
	// (Limits.MaxSessionBytes): the readers take in the whole file.
	if st, err := f.Stat(); err == nil {
		t.written = st.Size()
	}
	rec := map[string]any{
		"event":              "start",
		"type":               TranscriptType,
		"blind_package_id":   h.BlindPackageID,
		"seal_digest":        h.SealDigest,
		"served_file_count":  h.ServedFileCount,
		"instruction_path":   h.InstructionPath,
		"instruction_sha256": h.InstructionSHA256,
		"workspace":          h.Workspace,
		"view_mountinfo":     h.ViewMountInfo,
		"time":               t.stamp(),
	}
	if resumed {
		rec["resumed"] = true
		// Under the lock: no other room is writing.
		if err := t.lineAfterCut(rec); err != nil {
			t.f.Close()
			return nil, err
		}
		return t, nil
	}
	if err := t.line(rec); err != nil {
		t.f.Close()
		return nil, err
	}
	return t, nil
}

// lineAfterCut appends rec as line does, unless the record's last line
// was cut short by another writer killed in the middle of it (the relay,
// SIGKILLed while it wrote a turn line): then rec names the cut line
// (cut_line) and is written after a line feed that ends it, in one write.
// The record is never glued to the cut line nor cut further: the reader
// skips exactly the line named.
func (t *Transcript) lineAfterCut(rec map[string]any) error {
	if t.err != nil {
		return t.err
	}
	n, sum, err := cutLine(t.f)
	if err != nil {
		t.err = fmt.Errorf("reading the transcript's last line: %w", err)
		return t.err
	}
	if n == 0 {
		return t.line(rec)
	}
	rec["cut_line"] = map[string]any{"bytes": n, "sha256": sum}
	return t.write([]byte{'\n'}, rec)
}

func (t *Transcript) stamp() string { return t.now().UTC().Format(time.RFC3339Nano) }

// line appends one record with one write; the caller holds mu or owns t.
// After a failed write nothing more is written, the end line included: a
// line written after a lost one would make a record that reads as whole
// (or glue itself to a line cut short), so the record ends where it broke
// and reads as incomplete.
func (t *Transcript) line(v map[string]any) error { return t.write(nil, v) }

// write appends lead (the line feed that ends a cut line, or nothing) and
// the line v in one write.
func (t *Transcript) write(lead []byte, v map[string]any) error {
	if t.err != nil {
		return t.err
	}
	b, err := evidence.Canonical(v)
	if err != nil {
		t.err = fmt.Errorf("transcript line: %w", err)
		return t.err
	}
	n, err := t.f.Write(append(append(lead, b...), '\n'))
	t.written += int64(n)
	if err != nil {
		t.err = fmt.Errorf("writing transcript: %w", err)
		return t.err
	}
	return nil
}

// call records one tool call. outcome is "listed", "served", "refused",
// "written" or "session_ended" (Room.spend); fields carry path, bytes,
// sha256 or the refusal. A call that cannot be recorded is kept as the
// first write error, which Err returns: the server consults it after every
// handler, before answering.
func (t *Transcript) call(tool, outcome string, fields map[string]any) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	rec := map[string]any{"event": "call", "seq": t.seq, "time": t.stamp(), "tool": tool, "outcome": outcome}
	for k, v := range fields {
		rec[k] = v
		// A key or refusal is as long as the model makes it (megabytes,
		// escaped to several times that): recorded whole, one line could
		// pass the strict reader's size limit and make the whole record
		// unreadable. A long string is recorded as its beginning, its
		// length and its sha256.
		if s, ok := v.(string); ok && len(s) > maxRecordedString {
			rec[k] = strings.ToValidUTF8(s[:maxRecordedString], "")
			rec[k+"_bytes"] = len(s)
			rec[k+"_sha256"] = pkgwalk.SHA256Hex([]byte(s))
		}
	}
	p, _ := rec["path"].(string)
	if tool == "read_file" && outcome == "refused" && t.err == nil {
		// The end line lists every refused read: past the budget it would
		// pass the strict reader's limit and make the whole record
		// unreadable, so the record (and with it the room) stops here.
		b, _ := evidence.Canonical(p)
		if t.summary.refusedBytes += len(b) + 1; t.summary.refusedBytes > maxRefusedReadBytes {
			t.err = fmt.Errorf("%w: refused reads over %d bytes", errTranscriptFull, maxRefusedReadBytes)
			return
		}
	}
	t.summary.add(tool, outcome, p, fields["bytes"], fields["sha256"])
	_ = t.line(rec) // a failure is t.err, which Err returns
}

// errTranscriptFull: the record cannot take another call and stay
// readable by the strict reader.
var errTranscriptFull = errors.New("transcript full")

// maxRefusedReadBytes bounds the end line's refused_reads as encoded (half
// the strict reader's limit; files_read and files_written are bounded by
// the package and the workspace limits).
const maxRefusedReadBytes = evidence.MaxSize / 2

// maxRecordedString bounds one string of a call line (a path is at most
// Limits.MaxPathBytes when accepted; only refusals are ever cut).
const maxRecordedString = 4096

// Close writes the end line with the summaries and closes the file.
func (t *Transcript) Close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	read, refused, written := t.summary.lists()
	// The relay may have been killed in the middle of a line (the room's
	// stdin ended with it): the end line names the cut, never glues to it.
	err := t.lineAfterCut(map[string]any{"event": "end", "time": t.stamp(), "calls": t.seq,
		"files_read": read, "refused_reads": refused, "files_written": written})
	if serr := t.f.Sync(); err == nil {
		err = serr
	}
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cutNamed reports whether lines[i] is a cut line: the next line is the
// room's end line, a resumed session's start line or room agent's agent
// line whose cut_line names exactly its size and sha256 (lineAfterCut,
// RecoverAgentLine), the agent line's cut being the beginning of itself.
func cutNamed(l string, lines []string, i int) bool {
	if i+1 >= len(lines) || !strings.Contains(lines[i+1], `"cut_line":`) {
		return false
	}
	next, err := evidence.ReadObject([]byte(lines[i+1]))
	if err != nil {
		return false
	}
	ev, _ := next.Get("event")
	resumed, _ := next.Get("resumed")
	cl, _ := next.Get("cut_line")
	c, ok := cl.(*evidence.Object)
	if !ok || !(ev == "end" || (ev == "start" && resumed == true) || ev == "agent") {
		return false
	}
	n, _ := c.Get("bytes")
	sum, _ := c.Get("sha256")
	if n != float64(len(l)) || sum != pkgwalk.SHA256Hex([]byte(l)) {
		return false
	}
	if ev != "agent" {
		return true
	}
	// The agent line is written again after the beginning of itself only
	// (RecoverAgentLine): one naming any other line (a whole end line, a
	// call) would have the reader skip a line its writer never cut.
	next.Delete("cut_line")
	own, err := evidence.Canonical(next)
	return err == nil && strings.HasPrefix(string(own), l)
}

// errTranscript is wrapped by every refusal of ReadTranscript: the record
// was read and breaks a rule (internal/fault: refused).
var errTranscript = fault.New(fault.Refused, "malformed transcript")

// MaxTranscriptBytes bounds a transcript file its readers take in (`room
// transcript`, the run report): JSON Lines, one line per tool call, each
// line itself bounded by the strict reader.
const MaxTranscriptBytes = 256 << 20

// ReadTranscript reads a transcript through the strict reader and returns
// the TRVM-CLEAN-ROOM-TRANSCRIPT-v1 document (TRVM-FORMATS §11.1): type,
// blind_package_id, seal_digest, served_file_count, instruction_path,
// instruction_sha256, model, seed, turns, stop, usage, files_read,
// refused_reads, files_written, access (every call line) and messages.
// files_read, refused_reads and files_written are derived from the call
// lines; an end line that disagrees with them is refused. The model fields
// are null when no relay line was written (an external MCP client);
// view_mountinfo (the kernel's line for the sealed view) and complete
// (whether the room wrote its end line) go beyond the reference's fields,
// as do retries (the relay's retry lines), resumptions (its resume
// lines) and agent, the line room agent appends (package agentroom),
// present only in such a session's record and always its last.
//
// A transcript is one session or more: a session resumed (room drive
// --resume) appends a second start line (resumed: true), at once followed
// by the relay's resume line, whose prefix_sha256 must be the sha256 of
// every byte before that start line and whose replayed_sha256 the
// conversation the turn lines held until then. Each session numbers its
// calls from 1 and its end line sums its own calls; the document's
// summaries are over all of them. The relay's turn lines, folded, must be
// the messages of every drive line that follows them. A session with no
// drive line takes turns, usage and messages from its last turn line.
//
// A line cut short (its writer killed in the middle of its write) is
// skipped only when the line after it is the room's end line, a resumed
// start line or the agent line (written again by RecoverAgentLine, after
// a cut that is the beginning of itself) whose cut_line names its exact
// size and sha256; the document
// lists those as cut_lines. A record that ends with a cut line is refused:
// nothing names it yet (ReadResumable reads the record before it).
func ReadTranscript(b []byte) (*evidence.Object, error) {
	bad := func(line int, format string, a ...any) error {
		return fmt.Errorf("%w: line %d: %s", errTranscript, line, fmt.Sprintf(format, a...))
	}
	text := string(b)
	if !strings.HasSuffix(text, "\n") {
		return nil, bad(strings.Count(text, "\n")+1, "no final line feed (a write was cut short)")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	var start, end, drive, lastTurn, agent *evidence.Object
	access, retries, resumptions, folded := []any{}, []any{}, []any{}, []any{}
	sum, seg := newSummary(), newSummary()
	segCalls, offset, turnLines := 0, 0, 0
	expectResume, prefix := false, ""
	// checkEnd holds a session's end line to its calls.
	checkEnd := func(i int, end *evidence.Object) error {
		if n, _ := end.Get("calls"); n != float64(segCalls) {
			return bad(i, "end line's calls %v, %d call lines", n, segCalls)
		}
		r, ref, w := seg.lists()
		for name, derived := range map[string]any{"files_read": r, "refused_reads": ref, "files_written": w} {
			recorded, _ := end.Get(name)
			a, err1 := evidence.Canonical(recorded)
			c, err2 := evidence.Canonical(derived)
			if err1 != nil || err2 != nil || !bytes.Equal(a, c) {
				return bad(i, "end line's %s disagrees with the calls", name)
			}
		}
		return nil
	}
	cutLines := []any{}
	afterCut := false // the line before this one was cut short (skipped)
	for i, l := range lines {
		lineStart := offset
		offset += len(l) + 1
		if i > 0 && cutNamed(l, lines, i) {
			// A line cut short by a writer killed in the middle of it,
			// named (size and sha256) by the line that follows it, the
			// room's: skipped, whatever it holds.
			afterCut = true
			continue
		}
		o, err := evidence.ReadObject([]byte(l))
		if err != nil {
			return nil, bad(i+1, "%v", err)
		}
		ev, _ := o.Get("event")
		if cl, ok := o.Get("cut_line"); ok {
			if !afterCut {
				return nil, bad(i+1, "cut_line names no cut line before it")
			}
			cutLines = append(cutLines, cl)
		}
		afterCut = false
		if expectResume && ev != "resume" {
			return nil, bad(i+1, "a resumed session's start line is not followed by the relay's resume line")
		}
		switch {
		case agent != nil:
			// room agent's line is the record's last.
			return nil, bad(i+1, "a %v line after the agent line", ev)
		case i == 0:
			if ev != "start" {
				return nil, bad(1, "first line is not the start line")
			}
			if typ, _ := o.Get("type"); typ != TranscriptType {
				return nil, bad(1, "type is not %s", TranscriptType)
			}
			if r, _ := o.Get("resumed"); r != nil {
				return nil, bad(1, "the first session is not a resumed one")
			}
			start = o
		case ev == "start":
			// A resumed session: the same package, after a session that
			// ended its record.
			// (The session before may lack its end line: its room died.)
			if r, _ := o.Get("resumed"); r != true {
				return nil, bad(i+1, "a second start line must be a resumed session's")
			}
			for _, k := range []string{"type", "blind_package_id", "workspace"} {
				a, _ := start.Get(k)
				if v, _ := o.Get(k); v != a {
					return nil, bad(i+1, "resumed session's %s %v, the first session's %v", k, v, a)
				}
			}
			prefix = pkgwalk.SHA256Hex(b[:lineStart]) // the resume line must name it
			start, end, drive = o, nil, nil
			seg, segCalls, expectResume = newSummary(), 0, true
		case ev == "resume":
			if !expectResume {
				return nil, bad(i+1, "a resume line not right after a resumed session's start line")
			}
			expectResume = false
			if got, _ := o.Get("prefix_sha256"); got != prefix {
				return nil, bad(i+1, "resume line's prefix_sha256 is not the sha256 of the record before the session (it was changed)")
			}
			fb, err := evidence.Canonical(folded)
			if n, _ := o.Get("replayed_messages"); turnLines > 0 && (err != nil || n != float64(len(folded))) {
				return nil, bad(i+1, "resume line replays %v messages, the turn lines hold %d", n, len(folded))
			}
			if h, _ := o.Get("replayed_sha256"); turnLines > 0 && h != pkgwalk.SHA256Hex(fb) {
				return nil, bad(i+1, "resume line's replayed_sha256 is not the turn lines' conversation")
			}
			resumptions = append(resumptions, o)
		case ev == "call" && end == nil:
			access = append(access, o)
			segCalls++
			// The calls are numbered from 1 without a gap: a line taken
			// out that no summary mentions (a list_files) is seen.
			if seq, _ := o.Get("seq"); seq != float64(segCalls) {
				return nil, bad(i+1, "call seq %v, want %d", seq, segCalls)
			}
			tool, _ := o.Get("tool")
			outcome, _ := o.Get("outcome")
			pv, _ := o.Get("path")
			p, _ := pv.(string)
			size, _ := o.Get("bytes")
			digest, _ := o.Get("sha256")
			sum.add(tool, outcome, p, size, digest)
			seg.add(tool, outcome, p, size, digest)
		case ev == "turn" && end == nil:
			ms, ok := o.Get("messages")
			list, isList := ms.([]any)
			if !ok || !isList {
				return nil, bad(i+1, "turn line without a messages array")
			}
			folded = append(folded, list...)
			turnLines++
			lastTurn = o
		case ev == "retry" && end == nil:
			retries = append(retries, o)
		case ev == "end" && end == nil && drive == nil:
			if err := checkEnd(i+1, o); err != nil {
				return nil, err
			}
			end = o
		case ev == "agent" && drive == nil && turnLines == 0 && len(retries) == 0 && len(resumptions) == 0:
			// room agent's line (package agentroom): the agent command,
			// its version, the proxied connections; never in a relay's
			// (room drive's) session.
			agent = o
		case ev == "drive" && drive == nil:
			if turnLines > 0 {
				ms, _ := o.Get("messages")
				a, err1 := evidence.Canonical(ms)
				c, err2 := evidence.Canonical(folded)
				if err1 != nil || err2 != nil || !bytes.Equal(a, c) {
					return nil, bad(i+1, "drive line's messages are not the turn lines' conversation")
				}
			}
			drive = o
		default:
			return nil, bad(i+1, "unexpected %v line", ev)
		}
	}
	if expectResume {
		return nil, bad(len(lines), "a resumed session's start line is not followed by the relay's resume line")
	}
	filesRead, refused, filesWritten := sum.lists()
	first, _ := evidence.ReadObject([]byte(lines[0]))
	doc := evidence.NewObject()
	for _, k := range []string{"type", "blind_package_id", "seal_digest", "served_file_count", "instruction_path", "instruction_sha256"} {
		v, _ := first.Get(k)
		doc.Set(k, v)
	}
	messages := any(folded)
	for _, k := range []string{"model", "seed", "turns", "stop", "usage"} {
		var v any
		switch {
		case drive != nil:
			v, _ = drive.Get(k)
		case lastTurn != nil && k == "usage":
			v, _ = lastTurn.Get("usage")
		case lastTurn != nil && k == "turns":
			v, _ = lastTurn.Get("turn")
		}
		doc.Set(k, v)
	}
	if drive != nil {
		messages, _ = drive.Get("messages")
	}
	doc.Set("files_read", filesRead)
	doc.Set("refused_reads", refused)
	doc.Set("files_written", filesWritten)
	doc.Set("access", access)
	doc.Set("messages", messages)
	mi, _ := start.Get("view_mountinfo")
	doc.Set("view_mountinfo", mi)
	if agent != nil {
		// Only in the record of a room agent session (beyond §11.1).
		doc.Set("agent", agent)
	}
	if len(cutLines) > 0 {
		// Only in a record with lines cut short (beyond §11.1).
		doc.Set("cut_lines", cutLines)
	}
	doc.Set("complete", end != nil)
	doc.Set("retries", retries)
	doc.Set("resumptions", resumptions)
	return doc, nil
}
