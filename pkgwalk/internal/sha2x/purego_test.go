//go:build purego

package sha2x_test

import (
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/pkgwalk/internal/sha2x"
)

// Built with -tags purego, the assembly is not there to use.
func TestPuregoHasNoAssembly(t *testing.T) {
	t.Parallel()
	if sha2x.Available() {
		t.Fatal("Available() under purego")
	}
	if got := sha2x.Implementation(); !strings.Contains(got, "no SHA-NI on this CPU or in this build") {
		t.Errorf("Implementation() = %q", got)
	}
}
