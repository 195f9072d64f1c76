package fsx

import (
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// TestUnderGVisor runs this package's tests again inside gVisor, where
// Debian's runsc 20221219 answers ENOSYS to openat2: there the walk is
// what Open uses, on gVisor's own file systems (its overlay reports a
// file's layer device, not the overlay's), and every case must hold as it
// does here. (gVisor 20221219 has no RENAME_EXCHANGE: the race test skips
// there; it runs here.)
func TestUnderGVisor(t *testing.T) {
	t.Parallel()
	for mode, out := range testshared.UnderGVisor(t, "^(TestOpen|TestCrossed)") {
		for _, want := range []string{"--- PASS: TestOpen/walk", "--- PASS: TestOpenLands/walk", "--- PASS: TestOpenFile/walk", "--- PASS: TestOpenFollowInside/walk", "--- PASS: TestOpenDir", "--- PASS: TestOpenDirAt", "\nPASS\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("the tests under runsc (%s) did not say %q:\n%s", mode, strings.TrimSpace(want), out)
			}
		}
		// Say which path ran inside: Debian's runsc has no openat2.
		if strings.Contains(out, "openat2 answers ENOSYS") {
			t.Logf("runsc (%s) answered ENOSYS to openat2: the walk alone ran inside it", mode)
		}
	}
}
