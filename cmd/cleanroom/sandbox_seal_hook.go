package main

import (
	"github.com/cleanroom-dev/cleanroom/sandbox"
	"github.com/spf13/cobra"
)

// newSandboxSealHookCmd is the bundle's second createRuntime hook: the
// seal probe from the container's network namespace.
func newSandboxSealHookCmd() *cobra.Command {
	var sealed, control, record string
	c := &cobra.Command{
		Use:    "seal-hook --sealed IP:PORT [--control IP:PORT] [--record FILE]",
		Short:  "OCI createRuntime hook: the seal probe from the container's network namespace (state on stdin)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := sandbox.ProbeConfig{}
			s, err := addrPortFlag("--sealed", sealed)
			if err != nil {
				return err
			}
			cfg.Sealed = *s
			if control != "" {
				if cfg.Control, err = addrPortFlag("--control", control); err != nil {
					return err
				}
			}
			res, err := sandbox.RunSealHook(cmd.Context(), cmd.InOrStdin(), cfg, record)
			if res != nil {
				printProbe(cmd.ErrOrStderr(), res)
			}
			return err
		},
	}
	c.Flags().StringVar(&sealed, "sealed", "", "the sealed IP:PORT that must not answer")
	c.Flags().StringVar(&control, "control", "", "positive control IP:PORT that must be reachable")
	c.Flags().StringVar(&record, "record", "", "write the seal_probe record here (create-exclusive)")
	_ = c.MarkFlagRequired("sealed")
	return c
}
