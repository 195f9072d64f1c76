package harness

import (
	"context"
	"io"
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
