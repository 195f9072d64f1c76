package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"golang.org/x/sys/unix"
)

// PendingSuffix ends the name of the journal of an agent line being
// appended (the transcript's path and this): the whole line, written
// durably before the append starts and removed once it is synced.
const PendingSuffix = ".pending"

// AppendAgentLine appends room agent's "agent" line (package agentroom) to
// the transcript at path once the room has ended, as the relay appends its
// own lines (never through a link, only after a whole line, one write,
// synced), and journals it first: the line is published whole at
// path+PendingSuffix before the append starts and removed after it. A
// room agent killed in the middle of the append leaves a record ending in
// a line cut short and the journal of that line, from which
// RecoverAgentLine ends the record as a resumed session ends a cut relay
// line: the line written again after the cut, naming it (cut_line).
// The transcript is locked throughout, so that no recovery runs while the
// line is being appended.
func AppendAgentLine(path string, rec map[string]any) error {
	if rec["event"] != "agent" {
		return fmt.Errorf("%w: %v line appended as the agent line", errTranscript, rec["event"])
	}
	r, err := openRelayRecord(path)
	if err != nil {
		return err
	}
	defer r.close()
	if err := lockRecord(r.f); err != nil {
		return err
	}
	if err := r.check(rec["event"]); err != nil {
		return err
	}
	b, err := encodeLine(rec)
	if err != nil {
		return err
	}
	// Create-exclusive: a journal already there (planted, or a link) is
	// never overwritten nor followed.
	if err := durable.CreateFile(path+PendingSuffix, b, 0o644); err != nil {
		return fmt.Errorf("journalling the agent line: %w", err)
	}
	if err := r.write(b); err != nil {
		return err
	}
	return removeJournal(path)
}

// RecoverAgentLine ends a transcript whose writer was killed while it
// appended the agent line (AppendAgentLine), from the line's journal, and
// reports whether it wrote anything. A record that ends with the agent
// line cut short gets, after a line feed that ends the cut, the journalled
// line with cut_line naming the cut (its size and sha256), in one write:
// the cut is never hidden nor removed, and ReadTranscript skips exactly
// the line named. The cut must be the beginning of the journalled line: a
// cut line that is anything else (the record edited, another writer cut
// short) is refused, as is a journal that is not one agent line. A record
// that ends whole gets the journalled line appended (killed before the
// append began), or nothing when that line is already its last (killed
// before the journal was removed). The journal is removed after. Nothing
// to recover (no journal): false, nil, or errTranscript for a record cut
// short, which nothing can end. Refusals of the record or the journal wrap
// errTranscript (refused); a record held is errTranscriptBusy.
func RecoverAgentLine(path string) (bool, error) {
	// O_NOFOLLOW: a transcript path planted as a link does not have the
	// line appended to the file it points at.
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_APPEND|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("opening transcript %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	// Under the lock: no room and no AppendAgentLine is writing (the
	// journal of a line being appended is not a line left pending).
	if err := lockRecord(f); err != nil {
		return false, err
	}
	// O_NOFOLLOW: a journal planted as a link does not have another
	// file's bytes taken for the agent line; O_NONBLOCK: a FIFO planted
	// there does not hang the recovery before ReadOpenRegularFile refuses it.
	jf, err := os.OpenFile(path+PendingSuffix, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		if _, whole, err := endsWithWholeLine(f); err != nil || whole {
			return false, err
		}
		return false, fmt.Errorf("%w: %s: the last line was cut short and no journal of it (%s) exists", errTranscript, path, filepath.Base(path)+PendingSuffix)
	}
	if err != nil {
		return false, fmt.Errorf("the agent line's journal: %w", err)
	}
	j, err := evidence.ReadOpenRegularFile(jf, evidence.MaxSize)
	jf.Close()
	if err != nil {
		return false, fmt.Errorf("the agent line's journal: %w", err)
	}
	line, err := evidence.ReadObject(j)
	if ev, _ := line.Get("event"); err != nil || ev != "agent" || bytes.IndexByte(j, '\n') >= 0 {
		return false, fmt.Errorf("%w: %s%s: not one agent line (%v)", errTranscript, path, PendingSuffix, err)
	}
	st, whole, err := endsWithWholeLine(f)
	if err != nil {
		return false, err
	}
	if st.Size() == 0 {
		return false, fmt.Errorf("%w: %s: empty, no start line", errTranscript, path)
	}
	var out []byte
	if whole {
		// The journalled line is the record's last already: only the
		// journal is left to remove.
		last := make([]byte, min(st.Size(), int64(len(j))+2))
		if _, err := f.ReadAt(last, st.Size()-int64(len(last))); err != nil {
			return false, err
		}
		if bytes.Equal(last, append(append([]byte{'\n'}, j...), '\n')) {
			return false, removeJournal(path)
		}
		out = append(j, '\n')
	} else {
		n, sum, err := cutLine(f)
		if err != nil {
			return false, err
		}
		// Only the beginning of the journalled line is ended this way:
		// any other cut line (an edit, another writer's) stays refused.
		// cutLine hashed the cut already: the journal's first n bytes are
		// compared by that hash, the cut not read a second time.
		if n > int64(len(j)) || pkgwalk.SHA256Hex(j[:n]) != sum {
			return false, fmt.Errorf("%w: %s: the line cut short (%d bytes, sha256 %s) is not the beginning of the journalled agent line", errTranscript, path, n, sum)
		}
		line.Set("cut_line", map[string]any{"bytes": n, "sha256": sum})
		b, err := evidence.Canonical(line)
		if err != nil {
			return false, fmt.Errorf("transcript agent line: %w", err)
		}
		out = append(append([]byte{'\n'}, b...), '\n')
	}
	if _, err := f.Write(out); err != nil {
		return false, fmt.Errorf("writing transcript: %w", err)
	}
	if err := f.Sync(); err != nil {
		return false, err
	}
	return true, removeJournal(path)
}

// lockRecord takes the transcript's lock (the room's, startTranscript)
// without waiting: a record a room or another writer holds is not written.
func lockRecord(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return &pkgwalk.RefusalError{Path: f.Name(), Rule: errTranscriptBusy}
		}
		return fmt.Errorf("locking transcript %s: %w", f.Name(), err)
	}
	return nil
}

// removeJournal removes the agent line's journal once the line it holds
// is synced in the record, durably.
func removeJournal(path string) error {
	if err := os.Remove(path + PendingSuffix); err != nil {
		return fmt.Errorf("removing the agent line's journal: %w", err)
	}
	return durable.SyncDir(filepath.Dir(path))
}
