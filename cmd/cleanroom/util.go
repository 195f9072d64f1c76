package main

import (
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

// shortHex abbreviates a digest for one-line output.
func shortHex(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}

// maxTranscriptBytes bounds `room transcript`'s input: JSON Lines, one line
// per tool call, each line itself bounded by the strict reader.
const maxTranscriptBytes = 256 << 20

// readInputFile reads the input file an argument or flag names: a regular
// file (decided by fstat of the descriptor read) of at most max bytes. A
// FIFO, a device, a socket or a directory is refused at once
// (evidence.ErrNotRegular, naming the file): opened O_NONBLOCK and checked
// before any read, so a FIFO no writer opens is not waited on forever and
// /dev/zero is not read until memory runs out.
func readInputFile(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, evidence.ErrNotRegular, fi.Mode().Type())
	}
	// Bounded even if the file grows after the fstat.
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: more than the %d-byte limit of this input", path, max)
	}
	return b, nil
}

// readJSONInput reads an input file that holds one JSON document: a regular
// file of at most evidence.MaxSize bytes (evidence.ReadFileBytes). A file
// too large for the strict reader is refused (exit 1, its class named);
// anything else that stops the reading is unusable input (exit 2).
func readJSONInput(path string) ([]byte, error) {
	b, err := evidence.ReadFileBytes(path)
	if err != nil {
		if evidence.IsRefusal(err) {
			return nil, refusedErr(err)
		}
		return nil, usageErr(err)
	}
	return b, nil
}
