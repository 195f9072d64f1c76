package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/cleanroom-dev/cleanroom/sandbox"
	"github.com/spf13/cobra"
)

func init() { sandboxSubcommands = append(sandboxSubcommands, newSandboxGCCmd) }

func newSandboxGCCmd() *cobra.Command {
	var stateRoot string
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
With --dry-run it prints what it would remove. Exit 0 when every stale run
was removed, 1 when one could not be (each named with the reason).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := sandbox.GC(stateRoot, dryRun)
			if rep != nil {
				if perr := printResult(cmd, rep, func(w io.Writer) { printGCReport(w, rep) }); perr != nil {
					return perr
				}
			}
			switch {
			case errors.Is(err, sandbox.ErrGCIncomplete):
				return refusedErr(err)
			case err != nil:
				return usageErr(err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&stateRoot, "state-root", sandbox.DefaultStateDir, "the sandbox state root the runs were made under")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be removed, remove nothing")
	return c
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
