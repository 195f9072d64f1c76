package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom/harness"
)

// TestRoomRelayModes: the real `room relay` hands pipes on both sides to
// the room, and copies when its stdout is not one (/dev/null); the agent
// line records which.
func TestRoomRelayModes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("room agent needs root")
	}
	if err := exec.Command("unshare", "-m", "-n", "true").Run(); err != nil {
		t.Skipf("cannot create mount+network namespaces here: %v", err)
	}
	bin := roomBinary(t)
	pkg, _ := filepath.Abs(filepath.Join("..", "..", "harness", "testdata", "room-package"))
	for _, c := range []struct{ script, want string }{
		{"true | /opt/cleanroom/cleanroom room relay | cat", "handed"},
		{"true | /opt/cleanroom/cleanroom room relay > /dev/null", "copied"},
	} {
		t.Run(c.want, func(t *testing.T) {
			base := t.TempDir()
			tpath := filepath.Join(base, "t.jsonl")
			out, err := exec.Command(bin, "room", "agent", "--package", pkg, "--expect", roomPackagePin,
				"--workspace", filepath.Join(base, "ws"), "--transcript", tpath, "--", "/bin/sh", "-c", c.script).CombinedOutput()
			if err != nil {
				t.Fatalf("room agent: %v\n%s", err, out)
			}
			b, err := os.ReadFile(tpath)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := harness.ReadTranscript(b)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := doc.Get("agent")
			line := a.(interface{ Get(string) (any, bool) })
			mode, _ := line.Get("relay_mode")
			n, _ := line.Get("relay_connections")
			refused, _ := line.Get("relay_refused")
			if mode != c.want || n != float64(1) || refused != float64(0) {
				t.Errorf("relay_mode %v, relay_connections %v, relay_refused %v; want %s, 1, 0\n%s", mode, n, refused, c.want, out)
			}
		})
	}
}
