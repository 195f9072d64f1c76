package main

import (
	"os"

	"fmt"
	"github.com/cleanroom-dev/cleanroom/adapter"
	"io"

	"github.com/cleanroom-dev/cleanroom/sandbox"
	"github.com/spf13/cobra"
)

func newSandboxGCCmd() *cobra.Command {
	var stateRoot, scratch string
	var dryRun bool
	c := &cobra.Command{
		Use:   "gc [--state-root DIR] [--dry-run]",
		Short: "Remove what killed sandbox runs left behind (their tmpfs, directory and empty cgroups)",
		Long: `gc finds the runs under the state root whose owner is gone (a live run holds
a lock in its directory for its whole life; gc takes it without waiting)
and removes what they left: the run's tmpfs (detached only at the run's own
directory, never through a symlink), the directory and the run's empty
cgroups. A cgroup that still has processes is not touched (nothing is
killed): its run is left whole and named. Live runs are listed, untouched.
It also removes the adapter staging directories (cleanroom-adapter-*, in
--scratch) that a killed measurement left: after a reveal they hold the
revealed challenges. A live measurement holds a lock on its directory;
that one is listed and left alone. With --dry-run it prints what it would remove. Exit 0 when every stale run
was removed, 1 when one could not be (each named with the reason).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A directory given that is not one (a file, a FIFO, a dangling
			// link) is unusable, not "nothing stale there".
			for _, f := range []struct{ flag, dir string }{{"state-root", stateRoot}, {"scratch", scratch}} {
				if cmd.Flags().Changed(f.flag) {
					if err := inputDir("--"+f.flag+" "+f.dir, f.dir); err != nil {
						return err
					}
				}
			}
			rep, err := sandbox.GC(stateRoot, dryRun)
			staging, serr := adapter.GCStaging(scratch, dryRun)
			if rep != nil {
				out := gcOutput{GCReport: rep, Staging: staging}
				if perr := printResult(cmd, out, func(w io.Writer) { printGCReport(w, rep); printStagingGC(w, staging, dryRun) }); perr != nil {
					return perr
				}
			}
			if err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("%w: adapter staging directories: %w", sandbox.ErrGCIncomplete, serr)
			}
			return nil
		},
	}
	c.Flags().StringVar(&stateRoot, "state-root", sandbox.DefaultStateDir, "the sandbox state root the runs were made under")
	c.Flags().StringVar(&scratch, "scratch", os.TempDir(), "the directory measurements stage their adapters in ($TMPDIR)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be removed, remove nothing")
	return c
}

// gcOutput is the --json document: the sandbox runs' report and the
// adapter staging directories'.
type gcOutput struct {
	*sandbox.GCReport
	Staging *adapter.StagingGC `json:"adapter_staging"`
}

func printStagingGC(w io.Writer, s *adapter.StagingGC, dryRun bool) {
	if s == nil {
		return
	}
	verb := "removed"
	if dryRun {
		verb = "would remove"
	}
	for _, d := range s.Removed {
		fmt.Fprintf(w, "orphaned adapter staging directory: %s %s\n", verb, d)
	}
	for _, d := range s.Live {
		fmt.Fprintf(w, "live adapter staging directory %s: untouched\n", d)
	}
}

func printGCReport(w io.Writer, r *sandbox.GCReport) {
	verb := "removed"
	if r.DryRun {
		verb = "would remove"
	}
	for _, s := range r.Stale {
		v := verb
		if len(s.Problems) > 0 {
			v = "NOT removed"
		}
		fmt.Fprintf(w, "stale run %s: %s %s", s.ID, v, s.Dir)
		for _, m := range s.Mounts {
			fmt.Fprintf(w, ", mount %s", m)
		}
		fmt.Fprintf(w, ", %d cgroups\n", len(s.Cgroups))
		for _, cg := range s.Cgroups {
			fmt.Fprintf(w, "  cgroup %s\n", cg)
		}
		if s.Filter != "" {
			fmt.Fprintf(w, "  nftables table inet %s\n", s.Filter)
		}
		for _, p := range s.Problems {
			fmt.Fprintf(w, "  problem: %s\n", p)
		}
	}
	for _, id := range r.Live {
		fmt.Fprintf(w, "live run %s: untouched\n", id)
	}
	if len(r.Stale) == 0 {
		fmt.Fprintf(w, "nothing stale under %s\n", r.StateRoot)
	}
}
