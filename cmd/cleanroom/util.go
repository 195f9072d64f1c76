package main

import (
	"github.com/cleanroom-dev/cleanroom/evidence"
)

// shortHex abbreviates a digest for one-line output.
func shortHex(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
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
