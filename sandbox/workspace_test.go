package sandbox

import (
	"path/filepath"
	"testing"
)

// A scrub that stops before its walk (here: the workspace cannot be
// opened) saw nothing, so the workspace is refused (RuleUnwalked), never
// passed as if it had been walked clean.
func TestScrubFailsClosedBeforeWalk(t *testing.T) {
	t.Parallel()
	found, err := scrubWorkspace(filepath.Join(t.TempDir(), "gone"), nil)
	if err == nil {
		t.Fatal("scrub of a missing workspace succeeded")
	}
	if !WorkspaceRefused(found) || len(found) != 1 || found[0].Rule != RuleUnwalked {
		t.Errorf("findings %+v, want one %s", found, RuleUnwalked)
	}
}
