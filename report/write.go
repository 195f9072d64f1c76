package report

import (
	"bytes"
	"fmt"
	"io"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// WriteFile renders with render and writes the bytes to path. Without
// replace the file is created exclusively (an existing file is never
// overwritten; pkgwalk.WriteFileExclusive); with replace it is swapped in
// whole (durable.ReplaceFile), so a reader sees the old page or the new one.
// Nothing is written if rendering fails.
func WriteFile(path string, replace bool, render func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		return fmt.Errorf("rendering %s: %w", path, err)
	}
	if !replace {
		return pkgwalk.WriteFileExclusive(path, buf.Bytes())
	}
	return durable.ReplaceFile(path, buf.Bytes(), 0o644)
}
