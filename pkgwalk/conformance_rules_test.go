package pkgwalk_test

import (
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// The refusals TRVM-FORMATS §11.2 quotes from the reference's output, each
// carried (case-insensitively) by the rule cleanroom refuses the same
// attack with, so an operator who searches a refusal for the reference's
// words finds it. The attacks themselves are in walk_test.go and
// emit_test.go; this pins only the words.
func TestConformanceRuleWords(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		attack string
		rule   pkgwalk.Rule
		words  string
	}{
		{"AB1/AB2/AB3 symlink in the spec tree", pkgwalk.ErrSymlink, "symbolic link"},
		{"AB6 mkfifo", pkgwalk.ErrFIFO, "FIFO"},
		{"AB6 mkfifo", pkgwalk.ErrFIFO, "not a regular file"},
		{"AC1/AC2 empty directory", pkgwalk.ErrEmptyDir, "no manifested file lives in"},
		{"AC3 root is a symlink", pkgwalk.ErrRootSymlink, "is itself a symbolic link"},
		{"AC4 hard link", pkgwalk.ErrHardLink, "filesystem links"},
		{"AC6 case-fold collision", pkgwalk.ErrCaseCollision, "case"},
		{"AB7 package is not the pinned one", pkgwalk.ErrNotPinned, "pinned"},
	} {
		if !strings.Contains(strings.ToLower(string(c.rule)), strings.ToLower(c.words)) {
			t.Errorf("%s: rule %q does not carry the reference's %q", c.attack, c.rule, c.words)
		}
	}
}
