package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cleanroom-dev/cleanroom/internal/fault"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manDate is the date printed in the pages' headers: SOURCE_DATE_EPOCH when
// set (reproducible builds), else the commit time stamped into the binary,
// else today.
func manDate() (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fault.AsUnusable(fmt.Errorf("SOURCE_DATE_EPOCH %q is not a number of seconds: %w", s, err))
		}
		return time.Unix(n, 0).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339, readBuildVersion().Time); err == nil {
		return t.UTC(), nil
	}
	return time.Now().UTC(), nil
}

func newManCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:    "man --dir DIR",
		Short:  "Write a man page (section 1) for every command into DIR (make man)",
		Hidden: true,
		Long: `man generates the manual pages from the command tree itself — names,
synopses, descriptions and flags are the ones --help prints — one file per
command (cleanroom.1, cleanroom-run.1, cleanroom-run-report.1, …). DIR is
created if absent; existing pages in it are overwritten. Hidden commands
get no page. The header date is SOURCE_DATE_EPOCH, or the commit time
stamped into the binary, or today.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			date, err := manDate()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true // no generation time in the pages: they depend on the tree only
			// No Title: each page is titled by its command
			// (CLEANROOM-RUN-PIN), so man's header names the page read.
			hdr := &doc.GenManHeader{Section: "1", Date: &date, Source: "cleanroom " + readBuildVersion().Version, Manual: "cleanroom manual"}
			if err := doc.GenManTree(root, hdr, dir); err != nil {
				return fmt.Errorf("writing man pages into %s: %w", dir, err)
			}
			pages, _ := filepath.Glob(filepath.Join(dir, "*.1"))
			return printResult(cmd, map[string]any{"dir": dir, "pages": len(pages)}, func(w io.Writer) {
				fmt.Fprintf(w, "%d man pages in %s (man -l %s)\n", len(pages), dir, filepath.Join(dir, "cleanroom.1"))
			})
		},
	}
	c.Flags().StringVar(&dir, "dir", "", "directory to write the pages into")
	_ = c.MarkFlagRequired("dir")
	return c
}
