package harness

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"golang.org/x/sys/unix"
)

// TranscriptType names the transcript format (TRVM-FORMATS §11.1).
const TranscriptType = "TRVM-CLEAN-ROOM-TRANSCRIPT-v1"

// Transcript is the room's access log, written outside the sealed view as
// JSON Lines: a header line with the §11.1 identity fields, one line per
// tool call (appended with a single write(2), so a crash loses at most the
// call in flight), and an end line with the §11.1 summaries (files_read,
// refused_reads, files_written). The relay appends a "drive" line with the
// model, usage, turns and stop reason. Each line is RFC 8785 JSON.
type Transcript struct {
	mu      sync.Mutex
	f       *os.File
	seq     int
	read    map[string]bool
	refused []string
	written map[string]FileWritten
	now     func() time.Time
	err     error // the first failed write; the room stops serving on it
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

// FileWritten is one entry of files_written.
type FileWritten struct {
	Path   string `json:"path"`
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
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
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("creating transcript %s: %w", path, err)
	}
	t := &Transcript{f: os.NewFile(uintptr(fd), path), read: map[string]bool{}, written: map[string]FileWritten{}, now: time.Now}
	err = t.line(map[string]any{
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
	})
	if err != nil {
		t.f.Close()
		return nil, err
	}
	return t, nil
}

func (t *Transcript) stamp() string { return t.now().UTC().Format(time.RFC3339Nano) }

// line appends one record with one write; the caller holds mu or owns t.
func (t *Transcript) line(v map[string]any) error {
	b, err := evidence.Canonical(v)
	if err != nil {
		return fmt.Errorf("transcript line: %w", err)
	}
	if _, err := t.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing transcript: %w", err)
	}
	return nil
}

// call records one tool call. outcome is "listed", "served", "refused" or
// "written"; fields carry path, bytes, sha256 or the refusal.
func (t *Transcript) call(tool, outcome string, fields map[string]any) error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	rec := map[string]any{"event": "call", "seq": t.seq, "time": t.stamp(), "tool": tool, "outcome": outcome}
	for k, v := range fields {
		rec[k] = v
	}
	p, _ := fields["path"].(string)
	switch {
	case tool == "read_file" && outcome == "served":
		t.read[p] = true
	case tool == "read_file" && outcome == "refused":
		t.refused = append(t.refused, p)
	case tool == "write_source" && outcome == "written":
		t.written[p] = FileWritten{Path: p, Size: fields["bytes"].(int), SHA256: fields["sha256"].(string)}
	}
	if err := t.line(rec); err != nil && t.err == nil {
		t.err = err
	}
	return t.err
}

// Close writes the end line with the summaries and closes the file.
func (t *Transcript) Close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	readAny := []any{}
	for _, p := range slices.Sorted(maps.Keys(t.read)) {
		readAny = append(readAny, p)
	}
	written := []any{}
	for _, p := range slices.Sorted(maps.Keys(t.written)) {
		w := t.written[p]
		written = append(written, map[string]any{"path": w.Path, "size": w.Size, "sha256": w.SHA256})
	}
	refused := make([]any, len(t.refused))
	for i, r := range t.refused {
		refused[i] = r
	}
	err := t.line(map[string]any{"event": "end", "time": t.stamp(), "calls": t.seq,
		"files_read": readAny, "refused_reads": refused, "files_written": written})
	if serr := t.f.Sync(); err == nil {
		err = serr
	}
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ErrTranscript is wrapped by every refusal of ReadTranscript.
var ErrTranscript = errors.New("malformed transcript")

// ReadTranscript reads a transcript through the strict reader and returns
// the TRVM-CLEAN-ROOM-TRANSCRIPT-v1 document (TRVM-FORMATS §11.1): type,
// blind_package_id, seal_digest, served_file_count, instruction_path,
// instruction_sha256, model, seed, turns, stop, usage, files_read,
// refused_reads, files_written, access (every call line) and messages.
// files_read, refused_reads and files_written are derived from the call
// lines; an end line that disagrees with them is refused. The model fields
// are null when no relay line was written (an external MCP client);
// view_mountinfo (the kernel's line for the sealed view) and complete
// (whether the room wrote its end line) go beyond the reference's fields.
func ReadTranscript(b []byte) (*evidence.Object, error) {
	bad := func(line int, format string, a ...any) error {
		return fmt.Errorf("%w: line %d: %s", ErrTranscript, line, fmt.Sprintf(format, a...))
	}
	text := string(b)
	if !strings.HasSuffix(text, "\n") {
		return nil, bad(strings.Count(text, "\n")+1, "no final line feed (a write was cut short)")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	var start, end, drive *evidence.Object
	access := []any{}
	read := map[string]bool{}
	refused := []any{}
	written := map[string]*evidence.Object{}
	for i, l := range lines {
		o, err := evidence.ReadObject([]byte(l))
		if err != nil {
			return nil, bad(i+1, "%v", err)
		}
		ev, _ := o.Get("event")
		switch {
		case i == 0:
			if ev != "start" {
				return nil, bad(1, "first line is not the start line")
			}
			if typ, _ := o.Get("type"); typ != TranscriptType {
				return nil, bad(1, "type is not %s", TranscriptType)
			}
			start = o
		case ev == "call" && end == nil:
			access = append(access, o)
			tool, _ := o.Get("tool")
			outcome, _ := o.Get("outcome")
			pv, _ := o.Get("path")
			p, _ := pv.(string)
			switch {
			case tool == "read_file" && outcome == "served":
				read[p] = true
			case tool == "read_file" && outcome == "refused":
				refused = append(refused, p)
			case tool == "write_source" && outcome == "written":
				size, _ := o.Get("bytes")
				sum, _ := o.Get("sha256")
				written[p] = evidence.NewObject(evidence.Member{Name: "path", Value: p}, evidence.Member{Name: "size", Value: size}, evidence.Member{Name: "sha256", Value: sum})
			}
		case ev == "end" && end == nil && drive == nil:
			end = o
		case ev == "drive" && drive == nil:
			drive = o
		default:
			return nil, bad(i+1, "unexpected %v line", ev)
		}
	}
	filesRead := []any{}
	for _, p := range slices.Sorted(maps.Keys(read)) {
		filesRead = append(filesRead, p)
	}
	filesWritten := []any{}
	for _, p := range slices.Sorted(maps.Keys(written)) {
		filesWritten = append(filesWritten, written[p])
	}
	if end != nil {
		for name, derived := range map[string]any{"files_read": filesRead, "refused_reads": refused, "files_written": filesWritten} {
			recorded, _ := end.Get(name)
			a, err1 := evidence.Canonical(recorded)
			c, err2 := evidence.Canonical(derived)
			if err1 != nil || err2 != nil || !bytes.Equal(a, c) {
				return nil, bad(len(lines), "end line's %s disagrees with the calls", name)
			}
		}
	}
	doc := evidence.NewObject()
	for _, k := range []string{"type", "blind_package_id", "seal_digest", "served_file_count", "instruction_path", "instruction_sha256"} {
		v, _ := start.Get(k)
		doc.Set(k, v)
	}
	messages := any([]any{})
	for _, k := range []string{"model", "seed", "turns", "stop", "usage"} {
		var v any
		if drive != nil {
			v, _ = drive.Get(k)
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
	doc.Set("complete", end != nil)
	return doc, nil
}
