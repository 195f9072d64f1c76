package harness

import (
	"fmt"
	"strings"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// listing is list_files' answer: one "path  (N bytes)" line per manifested
// file, in manifest order. A listing is the package describing itself.
func listing(v *pkgwalk.View) string {
	var b strings.Builder
	for i, f := range v.Files {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s  (%d bytes)", f.Path, len(f.Data))
	}
	return b.String()
}
