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

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/spf13/cobra"
)

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

// expectFlag checks the pinned blind_package_id an --expect flag gives: a
// value that is not one is an unusable argument (2), where the same form in
// a record read is a refusal (pkgwalk.CheckID's rule).
func expectFlag(id string) error {
	if err := pkgwalk.CheckID(id); err != nil {
		return fault.AsUnusable(fmt.Errorf("--expect %w", err))
	}
	return nil
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
		return fmt.Errorf("%s: %w", what, err) // unreadable: unusable (internal/fault)
	}
	if !fi.IsDir() {
		return fault.AsUnusable(fmt.Errorf("%s: not a directory", what))
	}
	return nil
}

// shortHex abbreviates a digest for one-line output.
func shortHex(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}
