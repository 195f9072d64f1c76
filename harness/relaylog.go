package harness

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"golang.org/x/sys/unix"
)

// relayRecord is the relay's end of the transcript: while the session
// runs it appends a "turn" line after each turn (the messages the turn
// added, the usage so far), a "retry" line before each retry of a model
// request (and for each reply cut short and asked again), a "resume" line
// when it continues an interrupted session, and at the end its "drive"
// line. The room appends its call lines to the same file; each line of
// either is one write(2) to a file opened O_APPEND, so lines never
// interleave. The turn lines are what a resumed session replays.
type relayRecord struct {
	f    *os.File
	path string
}

func openRelayRecord(path string) (*relayRecord, error) {
	// O_NOFOLLOW: a link planted at the transcript's path would send the
	// relay's lines into whatever file it names.
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening transcript %s: %w", path, err)
	}
	return &relayRecord{f: os.NewFile(uintptr(fd), path), path: path}, nil
}

func (r *relayRecord) close() {
	if r != nil {
		r.f.Close()
	}
}

// line appends one record and syncs it (a resumed session replays what
// was synced).
func (r *relayRecord) line(rec map[string]any) error {
	if r == nil {
		return nil
	}
	if err := r.check(rec["event"]); err != nil {
		return err
	}
	b, err := encodeLine(rec)
	if err != nil {
		return err
	}
	return r.write(b)
}

// check refuses to append the event line to a record that is empty or
// does not end with a whole line (cut short): a line appended to it would
// be glued to the cut one and hide it.
func (r *relayRecord) check(event any) error {
	st, whole, err := endsWithWholeLine(r.f)
	if err != nil {
		return fmt.Errorf("transcript %s: %w", r.path, err)
	}
	// A record that cannot take the line is no verdict on anyone's input:
	// the session could not be recorded (internal/fault: unusable).
	if st.Size() == 0 {
		return fault.AsUnusable(fmt.Errorf("%w: %s: empty, no start line", errTranscript, r.path))
	}
	if !whole {
		return fault.AsUnusable(fmt.Errorf("%w: %s: the last line was cut short; the %v line is not appended", errTranscript, r.path, event))
	}
	return nil
}

// encodeLine stamps rec with the time and returns its canonical bytes.
func encodeLine(rec map[string]any) ([]byte, error) {
	rec["time"] = time.Now().UTC().Format(time.RFC3339Nano)
	b, err := evidence.Canonical(rec)
	if err != nil {
		return nil, fmt.Errorf("transcript %v line: %w", rec["event"], err)
	}
	return b, nil
}

// write appends the line b (and its line feed) in one write and syncs it.
func (r *relayRecord) write(b []byte) error {
	if _, err := r.f.Write(append(b[:len(b):len(b)], '\n')); err != nil {
		return fmt.Errorf("writing transcript: %w", err)
	}
	return r.f.Sync()
}

// maxRecordedCut bounds a cut-off reply recorded whole in its retry line;
// a longer one is recorded as its size and sha256.
const maxRecordedCut = 64 << 10

// retry records one retry of turn's request: attempt (from 1) of a
// transient failure, or 0 for a reply cut short (cut, recorded).
func (r *relayRecord) retry(turn, attempt int, reason string, wait time.Duration, cut any) error {
	rec := map[string]any{"event": "retry", "turn": turn, "attempt": attempt, "reason": fmt.Sprintf("%.500s", strings.ToValidUTF8(reason, "\uFFFD")),
		"wait_ms": wait.Milliseconds()}
	if cut != nil {
		b, err := evidence.Canonical(evidence.Plain(cut))
		switch {
		case err != nil:
		case len(b) <= maxRecordedCut:
			rec["message"] = evidence.Plain(cut)
		default:
			rec["message_bytes"], rec["message_sha256"] = len(b), pkgwalk.SHA256Hex(b)
		}
	}
	return r.line(rec)
}

// turn records the messages a turn added and the usage so far.
func (r *relayRecord) turn(res *DriveResult, added []any, toolErrors int) error {
	return r.line(map[string]any{"event": "turn", "turn": res.Turns, "messages": plainAll(added), "usage": usageValue(res.Usage),
		"tool_errors": toolErrors})
}

// resume records the continuation of an interrupted session: the turns
// done, the conversation replayed (count and sha256 of its canonical
// form; the messages are the earlier turn lines'), and the sha256 of the
// whole transcript as it was read before this session's room started, so
// that an edit of the earlier record is seen.
func (r *relayRecord) resume(p *PriorSession, replayed []any, model string) error {
	b, err := evidence.Canonical(plainAll(replayed))
	if err != nil {
		return err
	}
	return r.line(map[string]any{"event": "resume", "turn": p.turns, "model": model, "replayed_messages": len(replayed),
		"replayed_sha256": pkgwalk.SHA256Hex(b), "prefix_sha256": p.prefixSHA256})
}

func usageValue(u map[string]int) map[string]any {
	out := map[string]any{}
	for k, v := range u {
		out[k] = v
	}
	return out
}

// appendTranscriptLine appends one line that the relay writes once the
// room has ended (its drive line) to the transcript at path: never through
// a link, only after a whole line, one write, synced. (room agent's line
// is journalled too: AppendAgentLine.)
func appendTranscriptLine(path string, rec map[string]any) error {
	r, err := openRelayRecord(path)
	if err != nil {
		return err
	}
	defer r.close()
	return r.line(rec)
}

// appendDrive appends the relay's drive line to the transcript.
func appendDrive(path string, r *DriveResult, profile string, messages []any, loopErr error) error {
	line := map[string]any{
		"event": "drive", "model": r.Model, "seed": r.Seed, "profile": profile,
		"turns": r.Turns, "stop": r.Stop, "usage": usageValue(r.Usage), "messages": plainAll(messages),
		"retries": r.Retries, "tool_errors": r.ToolErrors, "cut_offs": r.CutOffs,
	}
	if r.Stop != StopModel && loopErr != nil {
		// The rule the session ended on, with the messages up to it.
		line["error"] = fmt.Sprintf("%.1000s", strings.ToValidUTF8(loopErr.Error(), "\uFFFD"))
	}
	return appendTranscriptLine(path, line)
}

// The rules a transcript must meet to be resumed.
var (
	// errNotResumable: the session completed (the model stopped), or
	// its room is still running (it holds the transcript's lock).
	errNotResumable = fault.New(fault.Refused, "transcript cannot be resumed")
	// ErrResumeMismatch: the fresh room does not open the conversation
	// as the recorded one did, or the workspace is not what the record
	// says the room wrote.
	ErrResumeMismatch = fault.New(fault.Refused, "resumed session does not match its record")
)

// PriorSession is an interrupted session as its transcript records it.
type PriorSession struct {
	Path           string
	BlindPackageID string
	Workspace      string
	turns          int
	usage          map[string]int
	messages       []any
	prefixSHA256   string
}

// ReadResumable reads a transcript through the strict reader and returns
// the session it records, if it can be continued: its room ended its
// record, or died without its end line (no room holds its lock; a last
// line cut short by a killed writer is left out, and the resumed room
// names it), the
// model did not stop, and the workspace holds exactly the files the record
// says were written (no file more, none changed).
func ReadResumable(path string) (*PriorSession, error) {
	b, err := evidence.ReadRegularFile(path, MaxTranscriptBytes)
	if err != nil {
		return nil, err
	}
	// A last line cut short (the relay killed in the middle of a turn
	// line, the room gone too) is not read: the resumed room's start line
	// will name it and end it with a line feed (ResumeTranscript), so the
	// record before the resumed session is b and that line feed (hashed
	// as it comes: b, up to MaxTranscriptBytes, is not copied for it).
	whole, prefix := b, sha256.New()
	prefix.Write(b)
	if len(b) > 0 && b[len(b)-1] != '\n' {
		whole = b[:bytes.LastIndexByte(b, '\n')+1]
		prefix.Write([]byte{'\n'})
	}
	doc, err := ReadTranscript(whole)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	get := func(k string) any { v, _ := doc.Get(k); return v }
	if get("complete") != true && TranscriptHeld(path) {
		// No end line and a room holds the lock: it is still serving.
		return nil, fmt.Errorf("%w: %s: %s", errNotResumable, path, errTranscriptBusy)
	}
	if get("stop") == StopModel {
		return nil, fmt.Errorf("%w: %s: the model stopped; the session is complete", errNotResumable, path)
	}
	first, err := evidence.ReadObject(b[:bytes.IndexByte(b, '\n')])
	if err != nil {
		return nil, err
	}
	ws, _ := first.Get("workspace")
	p := &PriorSession{Path: path, usage: map[string]int{}, prefixSHA256: hex.EncodeToString(prefix.Sum(nil))}
	p.BlindPackageID, _ = get("blind_package_id").(string)
	p.Workspace, _ = ws.(string)
	if n, ok := get("turns").(float64); ok {
		p.turns = int(n)
	}
	if u, ok := get("usage").(*evidence.Object); ok {
		for _, m := range u.Members {
			if n, ok := m.Value.(float64); ok {
				p.usage[m.Name] = int(n)
			}
		}
	}
	p.messages, _ = get("messages").([]any)
	written, _ := get("files_written").([]any)
	if err := checkWorkspace(p.Workspace, written); err != nil {
		return nil, err
	}
	return p, nil
}

// TranscriptHeld reports whether a running room holds the transcript's
// lock (or it cannot be opened to tell).
func TranscriptHeld(path string) bool {
	// O_NOFOLLOW and O_NONBLOCK: a link or FIFO planted at the path can
	// neither point the check at another file's lock nor hang it.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil
}

// replay returns the conversation to continue: the recorded one, once the
// fresh room's opening (SYSTEM and USER) is found to be the recorded
// opening.
func (p *PriorSession) replay(opening []any) ([]any, error) {
	if len(p.messages) == 0 {
		return opening, nil
	}
	if len(p.messages) < len(opening) {
		return nil, fmt.Errorf("%w: %d messages recorded, fewer than the opening", ErrResumeMismatch, len(p.messages))
	}
	for i, m := range opening {
		a, err1 := evidence.Canonical(evidence.Plain(m))
		b, err2 := evidence.Canonical(evidence.Plain(p.messages[i]))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			return nil, fmt.Errorf("%w: the room's opening message %d differs from the recorded one", ErrResumeMismatch, i)
		}
	}
	return p.messages, nil
}

// checkWorkspace holds the workspace to the record: exactly the files
// written (path, size, sha256), only directories and regular files, no
// link. A file planted, changed or removed between the sessions would be
// frozen as the implementer's, or the implementer would build on bytes it
// did not write.
func checkWorkspace(dir string, written []any) error {
	want := map[string]string{}
	for _, w := range written {
		o, _ := w.(*evidence.Object)
		p, _ := o.Get("path")
		h, _ := o.Get("sha256")
		ps, _ := p.(string)
		hs, _ := h.(string)
		want[ps] = hs
	}
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%w: workspace %q is not absolute", ErrResumeMismatch, dir)
	}
	seen := 0
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			// A workspace gone or unreadable is not the one recorded.
			return fmt.Errorf("%w: %w", ErrResumeMismatch, err)
		}
		rel, _ := filepath.Rel(dir, path)
		switch {
		case e.IsDir():
			return nil
		case !e.Type().IsRegular():
			return fmt.Errorf("%w: workspace %s holds %s, which is not a regular file", ErrResumeMismatch, dir, rel)
		}
		h, ok := want[filepath.ToSlash(rel)]
		if !ok {
			return fmt.Errorf("%w: workspace %s holds %s, which the record does not say was written", ErrResumeMismatch, dir, rel)
		}
		b, err := evidence.ReadRegularFile(path, int64(DefaultLimits.MaxTotalBytes))
		if err != nil {
			return fmt.Errorf("%w: %w", ErrResumeMismatch, err)
		}
		if pkgwalk.SHA256Hex(b) != h {
			return fmt.Errorf("%w: workspace file %s is not the bytes the record says were written", ErrResumeMismatch, rel)
		}
		seen++
		return nil
	})
	if err != nil {
		return err
	}
	if seen != len(want) {
		return fmt.Errorf("%w: workspace %s holds %d of the %d files written", ErrResumeMismatch, dir, seen, len(want))
	}
	return nil
}
