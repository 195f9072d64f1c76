package report

import (
	"bytes"
	"fmt"
	"io"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
)

// WriteFile renders with render and writes the bytes to path. Without
// replace the file is created exclusively (an existing file is never
// overwritten; durable.CreateFile, the error matches fs.ErrExist); with
// replace it is swapped in whole (durable.ReplaceFile), so a reader sees the
// old page or the new one.
// Nothing is written if rendering fails.
func WriteFile(path string, replace bool, render func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		return fmt.Errorf("rendering %s: %w", path, err)
	}
	if !replace {
		return durable.CreateFile(path, buf.Bytes(), 0o644)
	}
	return durable.ReplaceFile(path, buf.Bytes(), 0o644)
}
