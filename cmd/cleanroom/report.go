package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/internal/report"
	"github.com/spf13/cobra"
)

func newRunReportCmd() *cobra.Command {
	var htmlFile, mdFile, transcript string
	var replace bool
	c := &cobra.Command{
		Use:   "report [--html FILE] [--md FILE] [--transcript FILE]",
		Short: "Render the run as a self-contained HTML page and a Markdown twin",
		Long: `report reads the world's run — the record and its verification, the receipt
timeline, the RESULT, every archived observation re-scored by the frozen
scorer, the interop differences, the findings register and, with
--transcript, the clean-room transcript — and renders it for people.
--run reports an earlier run (cleanroom run list) instead of the current one.

--html FILE writes one self-contained page (inline CSS, no script, a
Content-Security-Policy that forbids every fetch); --md FILE writes the
Markdown twin. Without either, the Markdown is printed on stdout (--json
prints the gathered report as JSON). Output files are created exclusively
and never overwritten, unless --replace (then atomically renamed into
place). Nothing is written into the world.

A part of the run that cannot be read is named in the report's notes; the
rest is still rendered. Exit status: 0 rendered (whatever the run's state),
1 the world has no readable run record, 2 unusable arguments or an output
file that exists.`,
		Args: cobra.NoArgs,
	}
	c.Flags().StringVar(&htmlFile, "html", "", "write the HTML page here (must not exist unless --replace)")
	c.Flags().StringVar(&mdFile, "md", "", "write the Markdown twin here (must not exist unless --replace)")
	c.Flags().StringVar(&transcript, "transcript", "", "a clean-room transcript (room serve --transcript) to summarise")
	c.Flags().BoolVar(&replace, "replace", false, "replace existing output files atomically")
	runFlag(c)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		w, _, sel, err := selectRun(cmd, experiment.VerifyOptions{})
		if err != nil {
			return err
		}
		rep, err := report.Gather(cmd.Context(), w, report.Options{Transcript: transcript, Run: sel})
		if err != nil {
			return err
		}
		outs := []struct {
			file   string
			render func(io.Writer) error
		}{{htmlFile, rep.HTML}, {mdFile, rep.Markdown}}
		// An output that exists is unusable (fs.ErrExist, internal/fault).
		exists := func(err error) error {
			return fmt.Errorf("%w (give --replace to overwrite it)", err)
		}
		if !replace {
			// Both files or neither: an existing second output is refused
			// before the first is written.
			for _, out := range outs {
				if _, err := os.Lstat(out.file); out.file != "" && err == nil {
					return exists(&fs.PathError{Op: "create", Path: out.file, Err: fs.ErrExist})
				}
			}
		}
		written := []string{}
		for _, out := range outs {
			if out.file == "" {
				continue
			}
			if err := report.WriteFile(out.file, replace, out.render); err != nil {
				if !replace {
					// The files this run created go again, so the same
					// command can be run once the cause is fixed.
					for _, f := range written {
						_ = os.Remove(f)
					}
				}
				if errors.Is(err, fs.ErrExist) {
					return exists(err)
				}
				return err
			}
			written = append(written, out.file)
		}
		if len(written) == 0 && !jsonOutput(cmd) {
			return rep.Markdown(cmd.OutOrStdout())
		}
		v := map[string]any{"run_id": rep.RunID, "status": rep.Status, "verified": rep.Verified, "written": written, "notes": orEmpty(rep.Notes)}
		if len(written) == 0 {
			v["report"] = rep
		}
		return printResult(cmd, v, func(o io.Writer) {
			for _, f := range written {
				fmt.Fprintf(o, "wrote %s\n", f)
			}
			for _, n := range rep.Notes {
				fmt.Fprintf(o, "note: %s\n", n)
			}
		})
	}
	return c
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// demoReport renders the run of the world at worldDir into
// outDir/report.html and outDir/report.md (created exclusively) and returns
// the demo's one-line result. The demo calls it after `run complete`; a
// clean-room transcript, when given, is summarised in the report.
func demoReport(ctx context.Context, worldDir, outDir string, transcript ...string) (string, error) {
	w, err := experiment.OpenWorld(worldDir)
	if err != nil {
		return "", err
	}
	opt := report.Options{}
	if len(transcript) > 0 {
		opt.Transcript = transcript[0]
	}
	rep, err := report.Gather(ctx, w, opt)
	if err != nil {
		return "", err
	}
	html, md := filepath.Join(outDir, "report.html"), filepath.Join(outDir, "report.md")
	if err := report.WriteFile(html, false, rep.HTML); err != nil {
		return "", err
	}
	if err := report.WriteFile(md, false, rep.Markdown); err != nil {
		return "", err
	}
	line := fmt.Sprintf("%s %s: %s and %s", rep.Status, shortHex(rep.RunID), html, md)
	if rep.Interop != nil {
		line += fmt.Sprintf(" (interop %s, %d finding(s) in the register)", rep.Interop.Verdict, len(rep.Findings))
	}
	return line, nil
}
