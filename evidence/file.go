package evidence

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ReadFileBytes reads the bytes of the regular file at path for [Read],
// reading at most MaxSize+1 bytes: a larger file is refused as too-large
// without being read. Errors name the file; a refusal is an *Error (so
// [ClassOf] and errors.Is work), anything else is an I/O problem.
func ReadFileBytes(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO for reading would otherwise block until a
	// writer appears, before the fstat below could refuse it. It changes
	// nothing for a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// fstat the descriptor we read, not the path: the file checked is the
	// file read.
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		// A FIFO or device could block forever or never end.
		return nil, fmt.Errorf("%s: not a regular file (%s)", path, fi.Mode().Type())
	}
	if fi.Size() > MaxSize {
		return nil, fmt.Errorf("%s: %w", path, &Error{Class: ClassTooLarge, Offset: MaxSize, Detail: fmt.Sprintf("%d bytes is more than the %d-byte limit", fi.Size(), MaxSize)})
	}
	// Bounded even if the file grows after the fstat.
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
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

// IsRefusal reports whether err is a refusal of the bytes (an *Error or a
// *SchemaError) rather than a problem reading them.
func IsRefusal(err error) bool {
	var se *SchemaError
	return ClassOf(err) != "" || errors.As(err, &se)
}
