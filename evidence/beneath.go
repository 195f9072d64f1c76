package evidence

import (
	"io/fs"

	"github.com/cleanroom-dev/cleanroom/internal/fsx"
	"golang.org/x/sys/unix"
)

// ReadRegularBeneath reads rel (slash-separated) beneath the directory dir
// as [ReadOpenFile] reads an open file: opened with fsx.OpenFile (nothing
// outside dir, no symbolic or magic link, no mount crossed), a regular file
// by fstat of that descriptor, at most MaxSize bytes. It is how a file named
// by something an adversary may have written (a RESULT's archive path, a
// receipt name) is read: a link or ".." would show bytes from outside, a
// FIFO hang the reader, /dev/zero exhaust its memory. Errors name
// dir/rel. It returns the FileInfo of the fstat.
func ReadRegularBeneath(dir, rel string) ([]byte, fs.FileInfo, error) {
	// O_NONBLOCK: a FIFO planted at rel cannot stall the open; the fstat
	// in ReadOpenFile then refuses it.
	f, err := fsx.OpenFile(dir, rel, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	return ReadOpenFile(f)
}
