package harness

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A negative view size is refused before anything starts: it would make
// the stages' memory limit negative, that is no limit with the collector off.
func TestServeRefusesNegativeViewSize(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := ServeOptions{PackageDir: dir, Workspace: dir + "/ws", Expect: "bpkg-" + strings.Repeat("0", 64), ViewBytes: -1}
	err := Serve(context.Background(), o, strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "view size -1 is negative") {
		t.Fatalf("Serve with ViewBytes -1: %v, want the negative-size refusal", err)
	}
}

// A session byte budget over the default's is refused by name, by Serve
// before anything starts and by OpenRoom before the workspace is made:
// the transcript would outgrow its readers, and quietly lowering it would
// end the session sooner than asked. The default's own value is accepted.
func TestSessionBytesOverDefaultRefused(t *testing.T) {
	t.Parallel()
	over := DefaultLimits
	over.MaxSessionBytes = MaxTranscriptBytes/2 + 1
	dir := t.TempDir()
	o := ServeOptions{PackageDir: dir, Workspace: dir + "/ws", Expect: "bpkg-" + strings.Repeat("0", 64), Limits: over}
	if err := Serve(context.Background(), o, strings.NewReader(""), io.Discard, io.Discard); !errors.Is(err, errSessionBytes) {
		t.Errorf("Serve: %v, want %v", err, errSessionBytes)
	}
	pkg, id := writePackage(t, testFiles())
	ws := filepath.Join(t.TempDir(), "ws")
	if _, err := openRoomAt(pkg, RoomConfig{Expect: id, Workspace: ws, Limits: over}); !errors.Is(err, errSessionBytes) {
		t.Errorf("OpenRoom: %v, want %v", err, errSessionBytes)
	}
	if _, err := os.Lstat(ws); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused room left its workspace: %v", err)
	}
	at := DefaultLimits
	at.MaxSessionBytes = MaxTranscriptBytes / 2
	room := openRoomClosed(t, pkg, RoomConfig{Expect: id, Workspace: ws, Limits: at})
	if _, bytes := room.Limits.session(); bytes != MaxTranscriptBytes/2 {
		t.Errorf("session byte budget %d, want %d", bytes, MaxTranscriptBytes/2)
	}
}
