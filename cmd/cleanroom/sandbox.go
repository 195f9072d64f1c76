package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/sandbox"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newSandboxCmd) }

func newSandboxCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "sandbox",
		Short: "The candidate sandbox: kernel check, isolated exec, network mechanism check, seal probe",
	}
	c.AddCommand(newSandboxCheckCmd())
	for _, f := range sandboxSubcommands {
		c.AddCommand(f())
	}
	return c
}

// sandboxSubcommands lets the other files of this group add commands.
var sandboxSubcommands []func() *cobra.Command

func newSandboxCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Report what the kernel offers for the candidate sandbox (namespaces, cgroups) and what is missing",
		Long: `check reports the namespaces, user namespaces, cgroup version and cgroup
controllers of this machine, so an operator knows before a run whether the
candidate sandbox can be established. It exits 2 and names every missing
piece when it cannot.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, err := sandbox.CheckKernel()
			if perr := printSandboxResult(cmd, rep, func(w io.Writer) { printKernelReport(w, rep) }); perr != nil {
				return perr
			}
			if err != nil {
				return usageErr(err)
			}
			return nil
		},
	}
}

func printKernelReport(w io.Writer, r *sandbox.KernelReport) {
	var ns []string
	for _, n := range []string{"mnt", "pid", "ipc", "uts", "net", "user", "cgroup", "time"} {
		mark := "yes"
		if !r.Namespaces[n] {
			mark = "no"
		}
		ns = append(ns, n+"="+mark)
	}
	fmt.Fprintf(w, "root:            %v\n", r.Root)
	fmt.Fprintf(w, "namespaces:      %s\n", strings.Join(ns, " "))
	fmt.Fprintf(w, "user namespaces: %v\n", r.UserNamespaces)
	fmt.Fprintf(w, "cgroup version:  %d\n", r.CgroupVersion)
	fmt.Fprintf(w, "controllers:     %s\n", strings.Join(r.Controllers, " "))
	if len(r.Missing) == 0 {
		fmt.Fprintln(w, "sandbox:         can run here")
		return
	}
	for _, m := range r.Missing {
		fmt.Fprintf(w, "missing:         %s\n", m)
	}
}

// printSandboxResult prints a sandbox record (a Go struct with json tags,
// since package sandbox does not depend on evidence) through printResult:
// the struct is marshalled and read back through the strict reader, which
// keeps the field order.
func printSandboxResult(cmd *cobra.Command, v any, human func(w io.Writer)) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("rendering JSON output: %w", err)
	}
	ev, err := evidence.Read(b)
	if err != nil {
		return fmt.Errorf("rendering JSON output: %w", err)
	}
	return printResult(cmd, ev, human)
}
