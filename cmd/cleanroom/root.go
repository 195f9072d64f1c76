package main

import (
	"fmt"
	"io"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/spf13/cobra"
)

// commands lists the constructors of the top-level command groups; each
// group's file adds itself in an init function, so groups stay independent.
var commands []func() *cobra.Command

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "cleanroom",
		Short: "Sealed, blind evaluations: releases, packages, clean rooms, runs, holdouts, AMBER cases",
		Long: `cleanroom runs blind-implementation experiments and moves AMBER evaluation cases.

Every document it reads crosses one strict JSON reader; every identity it
computes hashes one canonical encoding. Exit codes: 0 success, 1 refused (the
input broke a rule; each problem is named), 2 unusable arguments or input
that cannot be read, 3 this machine cannot establish the isolation the
command needs (the missing piece is named).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().Bool("json", false, "print results as JSON instead of text")
	for _, c := range commands {
		root.AddCommand(c())
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(flagError{err}) })
	return root
}

// flagError marks a command line whose flags did not parse: what it asked
// for (--json) is then read from the raw arguments.
type flagError struct{ error }

func (e flagError) Unwrap() error { return e.error }

// exitError carries the exit code a command ends with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// refusedErr ends a command with exit 1: the input broke a rule. A nil err
// means the problems were already printed.
func refusedErr(err error) error { return &exitError{code: 1, err: err} }

// usageErr ends a command with exit 2: the arguments or the environment
// cannot do the work.
func usageErr(err error) error { return &exitError{code: 2, err: err} }

// isolationErr ends a command with exit 3: this machine cannot establish
// the isolation the command needs (namespaces, cgroups, nf_tables, root).
// It is not a usage error — the same arguments work where the kernel
// allows — and not a refusal of the input.
func isolationErr(err error) error { return &exitError{code: 3, err: err} }

// jsonOutput reports whether --json was given.
func jsonOutput(cmd *cobra.Command) bool {
	v, _ := cmd.Flags().GetBool("json")
	return v
}

// printResult prints v as indented JSON with --json, and otherwise calls
// human to print text.
func printResult(cmd *cobra.Command, v any, human func(w io.Writer)) error {
	w := cmd.OutOrStdout()
	if jsonOutput(cmd) {
		b, err := evidence.Stringify(v, "  ")
		if err != nil {
			return fmt.Errorf("rendering JSON output: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	human(w)
	return nil
}
