package harness

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
)

// TestRoomKilled: a room ended by SIGKILL, of the sealed server or of the
// process that started it (`room serve`, the relay), leaves no process and
// no mount on the host. The mount point, an empty directory the starting
// process created, is removed by it when it lives (the server killed); a
// SIGKILLed starter cannot remove it (see the note in the test).
func TestRoomKilled(t *testing.T) {
	t.Parallel()
	needSeal(t)
	pkg, id := writePackage(t, testFiles())
	for _, victim := range []string{"server", "starter"} {
		t.Run(victim, func(t *testing.T) {
			s := startSession(t, pkg, id)
			s.call(t, "list_files", nil)
			server := s.serverPID(t)
			mount := viewMount(t, server)
			pid := server
			if victim == "starter" {
				pid = s.cmd.Process.Pid
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			gone := func(pid int) bool {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
				// A zombie (state Z) holds nothing but its exit status.
				return err != nil || strings.Contains(string(b), ") Z ")
			}
			deadline := time.Now().Add(10 * time.Second)
			for !gone(server) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if !gone(server) {
				t.Fatalf("the sealed server %d outlived the SIGKILL of its %s", server, victim)
			}
			s.cs.Close()
			host, err := seal.ReadMountInfo(0)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range host {
				// This room's mount point only: other rooms (parallel
				// tests, other packages) may be serving.
				if m.MountPoint == mount || strings.HasPrefix(m.MountPoint, mount+"/") {
					t.Errorf("host mount table holds %s", m.Line)
				}
			}
			_, err = os.Stat(mount)
			switch {
			case victim == "server" && !errors.Is(err, os.ErrNotExist):
				t.Errorf("mount point %s left behind: %v", mount, err)
			case victim == "starter" && err == nil:
				// NOTE: not defended: the empty directory is the killed
				// starter's to remove. Removed here so the test leaves
				// nothing either.
				t.Logf("SIGKILL of the starter leaves the empty mount point %s", mount)
				os.Remove(mount)
			}
		})
	}
}
