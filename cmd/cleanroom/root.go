package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

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
	addCommands(root, commandTable)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fault.AsUnusable(flagError{plainFlagError(err)}) })
	// The completion group is added now, not when the command runs, so
	// the conventions below apply to it as to every other group.
	root.InitDefaultCompletionCmd()
	applyConventions(root)
	return root
}

// applyConventions gives every command of the tree the same argument
// handling. A group refuses a word that names none of its commands, at
// every level, naming the closest ones (cobra does this only at the root
// and otherwise prints the group's help and exits 0, so a typo looks like
// success); a group given nothing prints its help. A command given the
// wrong number of arguments says so with its usage line.
func applyConventions(c *cobra.Command) {
	c.SuggestionsMinimumDistance = 2
	completeDirectories(c.Flags())
	completeDirectories(c.PersistentFlags())
	if c.HasSubCommands() {
		if !c.Runnable() {
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
		c.Args = unknownSubcommand
	} else if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				msg := err.Error()
				if strings.HasPrefix(msg, "unknown command") {
					// cobra.NoArgs calls an argument an unknown command.
					msg = fmt.Sprintf("takes none, got %q", strings.Join(args, " "))
				}
				return fault.AsUnusable(fmt.Errorf("wrong arguments: %s\nusage: %s", msg, cmd.UseLine()))
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		applyConventions(sub)
	}
}

// unknownSubcommand refuses any argument of a command group: a group runs
// only its commands.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if sugg := cmd.SuggestionsFor(args[0]); len(sugg) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", strings.Join(sugg, `" or "`))
	}
	return fault.AsUnusable(fmt.Errorf("%s (%s --help lists its commands)", msg, cmd.CommandPath()))
}

// strconvDetail is the Go parser's wording pflag passes through in a flag
// value error ("strconv.ParseInt: parsing \"abc\": invalid syntax").
var strconvDetail = regexp.MustCompile(`strconv\.Parse(Int|Uint|Float|Bool): parsing "(?:[^"\\]|\\.)*": (invalid syntax|value out of range)$`)

// plainFlagError says what is wrong with a flag value in words instead of
// the parser's ("not an integer", not "strconv.ParseInt: … invalid
// syntax").
func plainFlagError(err error) error {
	m := strconvDetail.FindStringSubmatchIndex(err.Error())
	if m == nil {
		return err
	}
	msg := err.Error()
	kind := map[string]string{"Int": "an integer", "Uint": "a non-negative integer", "Float": "a number", "Bool": "true or false"}[msg[m[2]:m[3]]]
	what := "not " + kind
	if msg[m[4]:m[5]] == "value out of range" {
		what = "out of range"
	}
	return errors.New(msg[:m[0]] + what)
}

// flagError marks a command line whose flags did not parse: what it asked
// for (--json) is then read from the raw arguments.
type flagError struct{ error }

func (e flagError) Unwrap() error { return e.error }

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

// completeDirectories makes the shell complete directory names for every
// string flag whose usage says it takes a directory (and only a directory:
// "a directory or a JSON array" completes files too).
func completeDirectories(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() != "string" || !strings.Contains(f.Usage, "director") || strings.Contains(f.Usage, " or a ") {
			return
		}
		if _, done := f.Annotations[cobra.BashCompSubdirsInDir]; done {
			return
		}
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		// What cobra.Command.MarkFlagDirname records.
		f.Annotations[cobra.BashCompSubdirsInDir] = []string{}
	})
}
