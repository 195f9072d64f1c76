package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/harness"
	"github.com/spf13/cobra"
)

// roomSession is one launch of `room serve --sessions DIR`: DIR/NAME,
// holding workspace/ (created by the room) and transcript.jsonl.
type roomSession struct{ dir string }

// sessionName is a session directory's name: the UTC time of the launch
// to the nanosecond (fixed width: names sort as the launches) and eight
// random hex digits.
var sessionName = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}\.[0-9]{9}Z-[0-9a-f]{8}$`)

// newRoomSession creates a fresh session directory under dir (dir itself
// is created if absent). The directory is created exclusively: a name
// that exists (a clash of the random suffix, or anything planted there) is
// never reused, and another is drawn.
func newRoomSession(dir string) (*roomSession, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("creating the sessions directory: %w", err)
	}
	for range 8 {
		var r [4]byte
		if _, err := rand.Read(r[:]); err != nil {
			return nil, err
		}
		p := filepath.Join(abs, time.Now().UTC().Format("20060102T150405.000000000Z")+"-"+hex.EncodeToString(r[:]))
		err := os.Mkdir(p, 0o755)
		if err == nil {
			return &roomSession{dir: p}, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("creating a session: %w", err)
		}
	}
	return nil, fmt.Errorf("creating a session under %s: every name drawn exists", abs)
}

func (s *roomSession) workspace() string  { return filepath.Join(s.dir, "workspace") }
func (s *roomSession) transcript() string { return filepath.Join(s.dir, "transcript.jsonl") }

// dropIfEmpty removes a session whose room created nothing in it.
func (s *roomSession) dropIfEmpty() { _ = os.Remove(s.dir) }

// sessionEntry is one session as `room sessions` lists it.
type sessionEntry struct {
	Session      string `json:"session"`
	Dir          string `json:"dir"`
	Workspace    string `json:"workspace"`
	Transcript   string `json:"transcript"`
	State        string `json:"state"` // complete, running, incomplete (its room died), no transcript, unreadable
	Error        string `json:"error,omitempty"`
	Calls        int    `json:"calls"`
	FilesRead    int    `json:"files_read"`
	FilesWritten int    `json:"files_written"`
	Model        any    `json:"model"`
	Stop         any    `json:"stop"`
}

func newRoomSessionsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "sessions DIR",
		Short: "List the sessions `room serve --sessions DIR` created",
		Long: `List the sessions under DIR, oldest first: each one's directory, workspace
and transcript, and what its transcript says (read through the strict
reader: complete, running (its room holds it), incomplete (its room died
without its end line), or unreadable with the reason), with its
calls, files read and written, and the model and stop when a relay wrote
them. Entries of DIR that are not session directories are not listed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				return err
			}
			list := []sessionEntry{}
			for _, e := range entries {
				if !e.IsDir() || !sessionName.MatchString(e.Name()) {
					continue
				}
				s := &roomSession{dir: filepath.Join(dir, e.Name())}
				list = append(list, describeSession(e.Name(), s))
			}
			slices.SortFunc(list, func(a, b sessionEntry) int { return strings.Compare(a.Session, b.Session) })
			return printResult(cmd, list, func(w io.Writer) {
				fmt.Fprintf(w, "%d sessions in %s\n", len(list), dir)
				for _, s := range list {
					fmt.Fprintf(w, "%s  %s  calls %d, read %d, written %d", s.Session, s.State, s.Calls, s.FilesRead, s.FilesWritten)
					if s.Model != nil {
						fmt.Fprintf(w, ", model %v, stop %v", s.Model, s.Stop)
					}
					if s.Error != "" {
						fmt.Fprintf(w, ": %s", s.Error)
					}
					fmt.Fprintln(w)
				}
			})
		},
	}
}

// describeSession reads one session's transcript.
func describeSession(name string, s *roomSession) sessionEntry {
	e := sessionEntry{Session: name, Dir: s.dir, Workspace: s.workspace(), Transcript: s.transcript()}
	b, err := evidence.ReadRegularFile(e.Transcript, harness.MaxTranscriptBytes)
	if errors.Is(err, os.ErrNotExist) {
		e.State = "no transcript"
		return e
	}
	var doc *evidence.Object
	if err == nil {
		doc, err = harness.ReadTranscript(b)
	}
	if err != nil {
		e.State, e.Error = "unreadable", err.Error()
		return e
	}
	get := func(k string) any { v, _ := doc.Get(k); return v }
	count := func(k string) int { a, _ := get(k).([]any); return len(a) }
	switch {
	case get("complete") == true:
		e.State = "complete"
	case harness.TranscriptHeld(e.Transcript):
		e.State = "running"
	default:
		e.State = "incomplete"
	}
	e.Calls, e.FilesRead, e.FilesWritten = count("access"), count("files_read"), count("files_written")
	e.Model, e.Stop = get("model"), get("stop")
	return e
}
