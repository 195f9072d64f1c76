package evidence

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// ErrNotRegular: the file to read is not a regular file (a FIFO, device,
// directory or socket). It is an I/O problem, not a refusal of bytes: its
// class is unusable input (internal/fault, exit 2).
var ErrNotRegular = fault.New(fault.Unusable, "not a regular file")

// ReadFileBytes reads the bytes of the regular file at path for [Read],
// reading at most MaxSize+1 bytes: a larger file is refused as too-large
// without being read. Errors name the file; a refusal is an *Error (so
// [ClassOf] and errors.Is work), anything else is an I/O problem.
func ReadFileBytes(path string) ([]byte, error) {
	f, err := openInput(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, _, err := ReadOpenFile(f)
	return b, err
}

// ErrFileTooLarge: a file is longer than the limit its reader was given
// ([ReadRegularFile]).
var ErrFileTooLarge = fault.New(fault.Refused, "file larger than the limit of this input")

// ReadRegularFile reads the whole regular file at path, of at most max
// bytes, for inputs that are not one JSON document (keys, transcripts,
// lists). A FIFO, a device, a socket or a directory is refused
// (ErrNotRegular) before any read, decided by fstat of the descriptor read:
// it is opened O_NONBLOCK, so a FIFO no writer opens is not waited on
// forever, and /dev/zero is not read until memory runs out. A longer file
// is refused (ErrFileTooLarge), also one that grows while it is read.
// Errors name the file.
func ReadRegularFile(path string, max int64) ([]byte, error) {
	f, err := openInput(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadOpenRegularFile(f, max)
}

// ReadOpenRegularFile is [ReadRegularFile] of the already-open file f, for
// callers that open with rules of their own (no final symbolic link
// followed, say); open a FIFO with O_NONBLOCK. Errors name f.Name().
func ReadOpenRegularFile(f *os.File, max int64) ([]byte, error) {
	b, _, err := readRegular(f, max, func(size int64) error {
		return fmt.Errorf("%w (%d bytes, limit %d)", ErrFileTooLarge, size, max)
	})
	if err == nil && int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w (grew past %d bytes)", f.Name(), ErrFileTooLarge, max)
	}
	return b, err
}

// ReadOpenFile reads the bytes of the already-open file f for [Read], with
// the same rules as [ReadFileBytes]: f must be a regular file (checked by
// fstat on the descriptor, not by path) of at most MaxSize bytes. It returns
// the FileInfo of that fstat. Errors name f.Name(). Callers that open with
// their own rules (openat2 beneath a root, no symlinks) read through this so
// the bytes are bounded the same way everywhere; open FIFOs with O_NONBLOCK.
func ReadOpenFile(f *os.File) ([]byte, fs.FileInfo, error) {
	return readRegular(f, MaxSize, func(size int64) error {
		return &Error{Class: ClassTooLarge, Offset: MaxSize, Detail: fmt.Sprintf("%d bytes is more than the %d-byte limit", size, MaxSize)}
	})
}

// openInput opens path for reading. O_NONBLOCK: opening a FIFO for reading
// would otherwise block until a writer appears, before readRegular's fstat
// could refuse it. It changes nothing for a regular file.
func openInput(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// readRegular reads at most max+1 bytes of f, which must be a regular file
// whose size is at most max; tooLarge makes the refusal of a larger size.
// A longer read (the file grew after the fstat) is the caller's to judge.
func readRegular(f *os.File, max int64, tooLarge func(size int64) error) ([]byte, fs.FileInfo, error) {
	// fstat the descriptor we read, not the path: the file checked is the
	// file read.
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		// A FIFO or device could block forever or never end.
		return nil, nil, fmt.Errorf("%s: %w (%s)", f.Name(), ErrNotRegular, fi.Mode().Type())
	}
	if fi.Size() > max {
		// Refused before reading: a huge file costs no memory.
		return nil, nil, fmt.Errorf("%s: %w", f.Name(), tooLarge(fi.Size()))
	}
	// Bounded even if the file grows after the fstat.
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	return b, fi, nil
}

// ReadFile is [Read] of the file at path (see [ReadFileBytes]); every error
// names the file.
func ReadFile(path string) (any, error) {
	b, err := ReadFileBytes(path)
	if err != nil {
		return nil, err
	}
	v, err := Read(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
