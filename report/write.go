package report

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// WriteFile renders with render and writes the bytes to path. Without
// replace the file is created exclusively (an existing file is never
// overwritten; pkgwalk.WriteFileExclusive); with replace it is written
// beside path, synced and renamed over it, so a reader sees the old page or
// the new one. Nothing is written if rendering fails.
func WriteFile(path string, replace bool, render func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		return fmt.Errorf("rendering %s: %w", path, err)
	}
	if !replace {
		return pkgwalk.WriteFileExclusive(path, buf.Bytes())
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename this is a no-op
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("fsync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
