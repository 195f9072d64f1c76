package adapter

import (
	"context"
	"os"
	"testing"

	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/sandbox"
	"github.com/cleanroom-dev/cleanroom/sandbox/sandboxinit"
)

// The test binary is libcontainer's init when re-executed as `init`, and
// the sandbox's shim when it asks for one (as cmd/cleanroom/init.go).
func init() { sandboxinit.Run() }

// The honest reference adapter, run in the candidate sandbox, measures the
// same 20/20 as unsandboxed. Needs root and the kernel features the sandbox
// uses; skipped (with the reason) otherwise.
func TestSandboxRunnerReference(t *testing.T) {
	t.Parallel()
	needNode(t)
	if os.Geteuid() != 0 {
		t.Skip("the candidate sandbox needs root")
	}
	if _, err := sandbox.CheckKernel(); err != nil {
		t.Skipf("the candidate sandbox is unavailable here: %v", err)
	}
	w, s, chs := world(t)
	cand, err := os.ReadFile(w.Root + "/implementer/tally-candidate")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []experiment.Adapter{reference(t, w), candidate(t, w, "workspace/tally-candidate", string(cand))} {
		m, err := Execute(context.Background(), w, a, Options{Revealed: true, Runner: SandboxRunner{}, Schemas: s,
			Challenges: chs, ExpectRelease: testSrel, ScratchDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if m.State != Measured {
			t.Fatalf("%s: %s: %v (outcome: %+v)", a.Implementation, m.State, m.Err, m.Outcome)
		}
		if !m.Sandboxed || m.Report.Pass != 20 || m.Report.Total != 20 {
			t.Errorf("%s: sandboxed=%v, %d/%d", a.Implementation, m.Sandboxed, m.Report.Pass, m.Report.Total)
		}
	}
}
