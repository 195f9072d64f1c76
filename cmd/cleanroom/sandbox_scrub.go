package main

import (
	"fmt"
	"io"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/sandbox"
	"github.com/spf13/cobra"
)

// newSandboxScrubCmd is the post-run scrub of a workspace another runtime
// ran a candidate in (the bundle's poststop hook, or by hand).
func newSandboxScrubCmd() *cobra.Command {
	var record, stateRoot string
	c := &cobra.Command{
		Use:   "scrub [--record FILE] WORKSPACE",
		Short: "After a bundle's run under runc, crun or runsc: strip set-id bits in the workspace, refuse FIFOs, sockets and devices",
		Long: `scrub gives a workspace that another OCI runtime ran a candidate in (a bundle
from "cleanroom sandbox bundle") the treatment "sandbox exec" gives its own after
the run: set-uid and set-gid bits are stripped and named (rule workspace_setid);
a FIFO, socket or device left there, or a tree it could not walk whole, exits 1
(rules workspace_special_file, workspace_unwalked): do not read the workspace
then. Run it once the runtime has exited and before anything reads the
workspace; the bundle's poststop hook runs it and writes --record
(workspace_scrub.json in the bundle directory). The workspace must pass the
same path rules as --workspace (no system tree, not the state root).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rep, err := sandbox.ScrubWorkspace(args[0], stateRoot)
			if rep == nil {
				return err
			}
			if record != "" {
				if werr := sandbox.WriteScrubRecord(record, rep); werr != nil {
					return werr
				}
			}
			if perr := printResult(cmd, rep, func(w io.Writer) {
				for _, f := range rep.Findings {
					fmt.Fprintf(w, "workspace %s (mode %s): rule %s %s\n", f.Path, f.Mode, f.Rule, f.Detail)
				}
				if !rep.Refused {
					fmt.Fprintf(w, "workspace %s scrubbed: %d set-id bits stripped, nothing refused\n", rep.Workspace, len(rep.Findings))
				}
			}); perr != nil {
				return perr
			}
			if rep.Refused {
				return fault.AsRefused(fmt.Errorf("workspace %s holds a FIFO, socket or device, or could not be walked whole (rules %s, %s): do not read it", rep.Workspace, sandbox.RuleSpecialFile, sandbox.RuleUnwalked))
			}
			return nil
		},
	}
	c.Flags().StringVar(&record, "record", "", "also write the report here (create-exclusive)")
	c.Flags().StringVar(&stateRoot, "state-root", sandbox.DefaultStateDir, "the sandbox state root (refused as a workspace)")
	return c
}
