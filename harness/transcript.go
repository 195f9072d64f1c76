package harness

import (
	"fmt"
	"os"
	"slices"
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
	read := slices.Sorted(func(yield func(string) bool) {
		for p := range t.read {
			if !yield(p) {
				return
			}
		}
	})
	var written []any
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range t.written {
			if !yield(p) {
				return
			}
		}
	}) {
		w := t.written[p]
		written = append(written, map[string]any{"path": w.Path, "size": w.Size, "sha256": w.SHA256})
	}
	refused := make([]any, len(t.refused))
	for i, r := range t.refused {
		refused[i] = r
	}
	readAny := make([]any, len(read))
	for i, r := range read {
		readAny[i] = r
	}
	if written == nil {
		written = []any{}
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
