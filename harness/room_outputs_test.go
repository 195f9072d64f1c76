package harness

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRoomExistingTranscript: a transcript path that already exists (a
// file, a symlink planted there) is refused naming the rule, before the
// room serves, and leaves nothing behind: the workspace the room had
// already created was kept, so the retry with a fresh transcript path was
// refused as "workspace already exists"; and the refusal exited 2 (the
// seal could not be established) without a rule.
func TestRoomExistingTranscript(t *testing.T) {
	t.Parallel()
	plant := map[string]func(t *testing.T, p string){
		"file": func(t *testing.T, p string) {
			if err := os.WriteFile(p, []byte("earlier record\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"symlink": func(t *testing.T, p string) {
			if err := os.Symlink(filepath.Join(t.TempDir(), "elsewhere"), p); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, setup := range plant {
		t.Run("in-process/"+name, func(t *testing.T) {
			pkg, id := writePackage(t, testFiles())
			base := t.TempDir()
			ws, tr := filepath.Join(base, "ws"), filepath.Join(base, "transcript.jsonl")
			setup(t, tr)
			_, err := openRoomAt(pkg, RoomConfig{Expect: id, Workspace: ws, Transcript: tr, Limits: DefaultLimits})
			if !errors.Is(err, errTranscriptExists) {
				t.Fatalf("OpenRoom: %v, want %q", err, errTranscriptExists)
			}
			if _, err := os.Lstat(ws); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused room left its workspace: %v", err)
			}
		})
		t.Run("sealed/"+name, func(t *testing.T) {
			needSeal(t)
			pkg, id := writePackage(t, testFiles())
			base := t.TempDir()
			ws, tr := filepath.Join(base, "ws"), filepath.Join(base, "transcript.jsonl")
			setup(t, tr)
			code, stderr := serveExit(t, ServeOptions{PackageDir: pkg, Expect: id, Workspace: ws, Transcript: tr})
			if code != 1 || !strings.Contains(stderr, errTranscriptExists.Error()) {
				t.Errorf("exit %d, want 1 naming %q; stderr:\n%s", code, errTranscriptExists, stderr)
			}
			if _, err := os.Lstat(ws); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused room left its workspace: %v", err)
			}
		})
	}
}

// TestRoomTranscriptInWorkspace: a transcript inside the workspace (named
// through it, or through a link that resolves into it once it exists)
// could be replaced by write_source: the implementer would write the
// record of its own session. The room refuses it, naming the rule, and
// leaves nothing behind.
func TestRoomTranscriptInWorkspace(t *testing.T) {
	t.Parallel()
	for _, viaLink := range []bool{false, true} {
		t.Run(map[bool]string{false: "named", true: "through a link"}[viaLink], func(t *testing.T) {
			pkg, id := writePackage(t, testFiles())
			base := t.TempDir()
			ws := filepath.Join(base, "ws")
			tr := filepath.Join(ws, "transcript.jsonl")
			if viaLink {
				// A dangling link now, the workspace once it is created.
				link := filepath.Join(base, "records")
				if err := os.Symlink(ws, link); err != nil {
					t.Fatal(err)
				}
				tr = filepath.Join(link, "transcript.jsonl")
			}
			room, err := openRoomAt(pkg, RoomConfig{Expect: id, Workspace: ws, Transcript: tr, Limits: DefaultLimits})
			if err == nil {
				defer func() {
					if err := room.Close(); err != nil {
						t.Error(err)
					}
				}()
				// What the refusal prevents: the record replaced by the
				// implementer.
				forged := `{"event":"start"}`
				if werr := room.Workspace.Write("transcript.jsonl", []byte(forged)); werr == nil {
					if b, _ := os.ReadFile(tr); string(b) == forged {
						t.Errorf("write_source replaced the transcript")
					}
				}
			}
			if !errors.Is(err, errTranscriptInWorkspace) {
				t.Fatalf("OpenRoom: %v, want %q", err, errTranscriptInWorkspace)
			}
			if _, err := os.Lstat(ws); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused room left its workspace: %v", err)
			}
		})
	}
}
