package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/spf13/cobra"
)

// unreadableInput reports whether err means an input could not be read at
// all — missing (a dangling link included), not a regular file (a FIFO, a
// device, a directory given as a file), not a directory, not permitted, a
// symbolic link where a reader that follows none opened it (ELOOP) — as
// opposed to input that was read and broke a rule. Every command maps
// the first to exit 2 through this one test, so the same fault gets the
// same exit code whichever command meets it.
func unreadableInput(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, evidence.ErrNotRegular) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}

// plainValue renders a decoded JSON value for people: no Go spellings
// ("<nil>", "map[…]", "1e+06") in human output. nil and an absent member are
// "none"; numbers are written in full.
func plainValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "none"
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	default:
		b, err := evidence.Stringify(x, "")
		if err != nil {
			return fmt.Sprintf("%v", x)
		}
		return strings.TrimSpace(string(b))
	}
}

// plainMap renders a map as "k=v, k=v" in key order, or "none".
func plainMap[V any](m map[string]V) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+plainValue(any(m[k])))
	}
	return strings.Join(parts, ", ")
}

// progressLine returns a progress reporter writing one stderr line per call,
// prefixed with the command ("cleanroom: run complete: " and the line), so
// an operator sees each long step start and end; stdout keeps only the
// result (--json stays one document).
func progressLine(cmd *cobra.Command) func(string) {
	w, name := cmd.ErrOrStderr(), cmd.CommandPath()
	return func(line string) { fmt.Fprintf(w, "%s: %s\n", strings.Replace(name, " ", ": ", 1), line) }
}

// inputDir refuses an input that must be a directory and is not one, or
// is not there (exit 2, as every unreadable input): a missing holdout read
// as "absent" would otherwise be checked as no holdout at all.
func inputDir(what, dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		// The path is named once, by what.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return usageErr(fmt.Errorf("%s: %w", what, err))
	}
	if !fi.IsDir() {
		return usageErr(fmt.Errorf("%s: not a directory", what))
	}
	return nil
}

// inputFailure ends a command whose input could not be used: unreadable
// input exits 2, input read and refused exits 1.
func inputFailure(err error) error {
	if unreadableInput(err) {
		return usageErr(err)
	}
	return refusedErr(err)
}

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
