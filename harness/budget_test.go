package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionBudget: a client flooding the room with read_file calls is
// stopped by the session's budget — of calls, or of transcript bytes —
// with a refusal naming errSessionBudget; the session ends (no more
// answers, Serve returns the budget's error) and the transcript is whole
// and readable (its end line written, the refusal its last call).
func TestSessionBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		limits func(l *Limits)
		served func(n int) bool // whether n served calls fits the budget
	}{
		{"calls", func(l *Limits) { l.MaxSessionCalls = 25 }, func(n int) bool { return n == 25 }},
		{"transcript bytes", func(l *Limits) { l.MaxSessionBytes = 4000 }, func(n int) bool { return n > 1 && n < 4000/100 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limits := DefaultLimits
			tc.limits(&limits)
			pkg, id := writePackage(t, testFiles())
			base := t.TempDir()
			tpath := filepath.Join(base, "t.jsonl")
			room, err := openRoomAt(pkg, RoomConfig{Expect: id, Workspace: filepath.Join(base, "ws"), Transcript: tpath, Limits: limits})
			if err != nil {
				t.Fatal(err)
			}
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			done := make(chan error, 1)
			go func() {
				err := room.Serve(context.Background(), inR, outW)
				inR.CloseWithError(errors.New("room stopped reading"))
				outW.Close()
				done <- errors.Join(err, room.Close())
			}()
			defer inW.Close()
			c := newFrameConn(inW, outR)
			next := c.handshake(t)
			served := 0
			var refusal []byte
			for i := 0; i < 100_000 && refusal == nil; i++ {
				c.send(t, callFrame(next+i, "read_file", `{"path":"spec/ADD.md"}`)+"\n")
				l := c.recv(t)
				switch {
				case l == nil:
					t.Fatalf("the session ended after %d calls with no refusal", served)
				case bytes.Contains(l, []byte(`"error"`)):
					refusal = l
				default:
					served++
				}
			}
			if !bytes.Contains(refusal, []byte(errSessionBudget.Error())) || !tc.served(served) {
				t.Fatalf("after %d served calls: %s; want a refusal naming %q", served, refusal, errSessionBudget)
			}
			if l := c.recv(t); l != nil {
				t.Errorf("answered after the budget was spent: %s", l)
			}
			if err := <-done; !errors.Is(err, errSessionBudget) {
				t.Errorf("Serve: %v, want %v", err, errSessionBudget)
			}
			b, err := os.ReadFile(tpath)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := ReadTranscript(b)
			if err != nil {
				t.Fatalf("the transcript is not readable: %v", err)
			}
			access, _ := doc.Get("access")
			calls, _ := access.([]any)
			complete, _ := doc.Get("complete")
			if complete != true || len(calls) != served+1 {
				t.Fatalf("complete %v, %d calls recorded, want true and %d", complete, len(calls), served+1)
			}
			last := calls[len(calls)-1].(interface{ Get(string) (any, bool) })
			outcome, _ := last.Get("outcome")
			why, _ := last.Get("refusal")
			if outcome != "session_ended" || !strings.Contains(fmt.Sprint(why), errSessionBudget.Error()) {
				t.Errorf("last call %v %v", outcome, why)
			}
		})
	}
}
