package amber

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"golang.org/x/mod/sumdb/note"
	"golang.org/x/sys/unix"
)

// An append interrupted after (part of) its write and before its checkpoint
// leaves bytes the checkpoint does not sign. A reader refuses them by name;
// the key holder's next write discards them and the index is whole again.
func TestIndexUncommittedTail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tail func(t *testing.T) []byte
	}{
		{"torn line", func(t *testing.T) []byte {
			l, err := testEntry(7).Canonical()
			if err != nil {
				t.Fatal(err)
			}
			return l[:len(l)/2] // the write stopped mid-line
		}},
		{"whole line never signed", func(t *testing.T) []byte {
			l, err := testEntry(7).Canonical()
			if err != nil {
				t.Fatal(err)
			}
			return append(l, '\n')
		}},
		{"two lines never signed", func(t *testing.T) []byte {
			a, _ := testEntry(7).Canonical()
			b, _ := testEntry(8).Canonical()
			return append(append(append(a, '\n'), b...), '\n')
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, key := newTestIndex(t, 5)
			p := filepath.Join(dir, IndexEntriesFile)
			committed, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(tc.tail(t)); err != nil {
				t.Fatal(err)
			}
			f.Close()

			_, err = LoadIndex(dir, "")
			var ce *CheckError
			if !errors.As(err, &ce) || ce.Check != CheckEntryCount || !errors.Is(err, errUncommitted) {
				t.Fatalf("LoadIndex with an uncommitted tail: %v, want %s / errUncommitted", err, CheckEntryCount)
			}

			// The key holder appends: the tail is gone, the new entry is
			// the sixth, and the index verifies.
			ix, err := AppendCaseFile(dir, key, testEntry(9))
			if err != nil {
				t.Fatalf("append after an interrupted one: %v", err)
			}
			if ix.Checkpoint.Size != 6 {
				t.Errorf("checkpoint size %d, want 6", ix.Checkpoint.Size)
			}
			got, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := testEntry(9).Canonical()
			if !bytes.Equal(got, append(append(committed, want...), '\n')) {
				t.Errorf("entries after recovery:\n%s\nwant the 5 committed lines and the new one", got)
			}
			re, err := LoadIndex(dir, "")
			if err != nil {
				t.Fatalf("reload: %v", err)
			}
			if _, _, ok := re.Latest("A-000007"); ok {
				t.Error("an entry that was never signed is in the index")
			}
		})
	}
}

// A committed line must end with its newline: the last signed line torn
// short (the file cut inside it) is an entry-form refusal, not a tail.
func TestIndexTornCommittedLine(t *testing.T) {
	t.Parallel()
	dir, _ := newTestIndex(t, 3)
	p := filepath.Join(dir, IndexEntriesFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b[:len(b)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadIndex(dir, "")
	var ce *CheckError
	if !errors.As(err, &ce) || ce.Check != CheckEntryForm || !errors.Is(err, errEntryForm) {
		t.Fatalf("LoadIndex with the last signed line cut: %v, want %s / errEntryForm", err, CheckEntryForm)
	}
}

// A write with a key that is not the index's is refused before anything
// changes: the uncommitted tail is discarded only by the key holder (so a
// refused append or retirement leaves the entries file byte for byte).
func TestIndexTailKeptOnWrongKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		write func(dir, key string) error
	}{
		{"append", func(dir, key string) error { _, err := AppendCaseFile(dir, key, testEntry(9)); return err }},
		{"retire", func(dir, key string) error {
			_, err := RetireCaseFile(dir, key, testEntry(1).CaseID, "2026-01-02")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, _ := newTestIndex(t, 3)
			p := filepath.Join(dir, IndexEntriesFile)
			l, err := testEntry(7).Canonical()
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(append(l, '\n')); err != nil {
				t.Fatal(err)
			}
			f.Close()
			before, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			other, _, err := note.GenerateKey(nil, "cases.example.org/index")
			if err != nil {
				t.Fatal(err)
			}
			otherPath := filepath.Join(t.TempDir(), "other.key")
			if err := os.WriteFile(otherPath, []byte(other), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := tc.write(dir, otherPath); !errors.Is(err, errIndexKey) {
				t.Fatalf("%s with another key: %v, want errIndexKey", tc.name, err)
			}
			after, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(after, before) {
				t.Errorf("a write refused for its key changed %s: %d bytes, were %d", IndexEntriesFile, len(after), len(before))
			}
		})
	}
}

// The tail is cut only from the entries file that was verified: a file
// swapped in at its path after the verification is refused and left as
// it is, FIFO or regular.
func TestTruncateEntriesOnlyTheVerifiedFile(t *testing.T) {
	t.Parallel()
	dir, _ := newTestIndex(t, 3)
	p := filepath.Join(dir, IndexEntriesFile)
	verified, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	swapped := append([]byte("not the verified log\n"), make([]byte, 4096)...)
	tmp := filepath.Join(dir, "swap")
	if err := os.WriteFile(tmp, swapped, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	err = truncateEntries(p, 10, verified)
	var ce *CheckError
	if !errors.As(err, &ce) || !errors.Is(err, errRewritten) {
		t.Fatalf("truncating a swapped entries file: %v, want a CheckError / errRewritten", err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, swapped) {
		t.Errorf("the swapped file was changed: %d bytes, were %d", len(got), len(swapped))
	}

	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := truncateEntries(p, 10, verified); !errors.Is(err, errNotRegular) && !errors.Is(err, unix.ENXIO) {
		t.Fatalf("truncating a FIFO swapped in: %v, want errNotRegular or ENXIO (never a hang)", err)
	}
}

// An append killed after its entry line and its temporary checkpoint were
// written, before the checkpoint's rename, leaves both in the published
// index. The retry (the key holder's next append) works, and leaves no
// temporary file behind: only the index's own files remain.
func TestIndexAppendAfterKilledWrite(t *testing.T) {
	t.Parallel()
	dir, key := newTestIndex(t, 3)
	line, err := testEntry(3).Canonical()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, IndexEntriesFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	cp, _ := os.ReadFile(filepath.Join(dir, IndexCheckpointFile))
	temp := filepath.Join(dir, durable.TempPrefix+IndexCheckpointFile+".0123456789abcdef")
	if err := os.WriteFile(temp, cp[:len(cp)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := AppendCaseFile(dir, key, testEntry(3)); err != nil {
		t.Fatalf("the retried append: %v", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if want := []string{IndexCheckpointFile, IndexEntriesFile, IndexPubFile}; !slices.Equal(names, want) {
		t.Errorf("index holds %v, want %v", names, want)
	}
	ix, err := LoadIndex(dir, "")
	if err != nil || len(ix.Entries) != 4 {
		t.Fatalf("index after the retry: %v entries, %v", ix, err)
	}
}
