package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/harness"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newRoomCmd) }

// roomStageArgs is the hidden command line the sealed server re-executes
// itself with.
var roomStageArgs = []string{"room", "sealed-stage"}

func newRoomCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "room",
		Short: "The clean room: a sealed, kernel-asserted read-only package served over MCP",
		Long: `The clean room serves a blind package to an implementer through three MCP
tools over stdio: list_files, read_file and write_source.

"room serve" re-executes itself in fresh mount and network namespaces, emits
the pinned package into a new tmpfs, makes it read-only at the superblock and
the mount point, asserts that from the kernel, drops every privilege, verifies
the final view and serves the verified bytes from memory. Names, descriptions
and schemas of the tools, the server instructions and the opening prompt are
read from the sealed experiment/CLEAN-ROOM-PROMPT-v1.md.

"room drive" is a built-in agent loop: it starts "room serve" as a child and
relays an OpenAI-compatible chat-completions model's tool calls to it.`,
	}
	c.AddCommand(newRoomServeCmd(), newRoomStageCmd())
	for _, f := range roomSubcommands {
		c.AddCommand(f())
	}
	return c
}

// roomSubcommands lets the other files of this group add commands.
var roomSubcommands []func() *cobra.Command

// roomFlags are the flags serve and drive share.
type roomFlags struct {
	world, pkg, expect, rootLabel, workspace, transcript string
}

func (f *roomFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.world, "world", "", "a TRVM world: package docs/spec/proof-wire, pin from governance/blind-run.json")
	c.Flags().StringVar(&f.pkg, "package", "", "the package directory (with --expect)")
	c.Flags().StringVar(&f.expect, "expect", "", "the pinned blind_package_id (bpkg-…)")
	c.Flags().StringVar(&f.rootLabel, "root-label", "", "the manifest's root label (default docs/spec/proof-wire)")
	c.Flags().StringVar(&f.workspace, "workspace", "", "the implementer's workspace: created by the room, must not exist")
	c.Flags().StringVar(&f.transcript, "transcript", "", "write the transcript (JSON Lines) here; must not exist")
}

// options resolves the flags into ServeOptions (absolute paths, the pin).
func (f *roomFlags) options() (harness.ServeOptions, error) {
	o := harness.ServeOptions{RootLabel: f.rootLabel, StageArgs: roomStageArgs}
	switch {
	case f.world != "" && (f.pkg != "" || f.expect != ""):
		return o, usageErr(errors.New("--world excludes --package and --expect"))
	case f.world != "":
		pin, err := worldPin(f.world)
		if err != nil {
			return o, refusedErr(err)
		}
		o.PackageDir, o.Expect = filepath.Join(f.world, "docs", "spec", "proof-wire"), pin
	case f.pkg != "" && f.expect != "":
		o.PackageDir, o.Expect = f.pkg, f.expect
	default:
		return o, usageErr(errors.New("give --world DIR, or --package DIR with --expect bpkg-…"))
	}
	if f.workspace == "" {
		return o, usageErr(errors.New("--workspace is required"))
	}
	var err error
	for _, p := range []*string{&o.PackageDir} {
		if *p, err = filepath.Abs(*p); err != nil {
			return o, usageErr(err)
		}
	}
	if o.Workspace, err = filepath.Abs(f.workspace); err != nil {
		return o, usageErr(err)
	}
	if f.transcript != "" {
		if o.Transcript, err = filepath.Abs(f.transcript); err != nil {
			return o, usageErr(err)
		}
	}
	return o, nil
}

// worldPin reads the pinned blind_package_id from a world's run record
// through the strict reader.
func worldPin(world string) (string, error) {
	p := filepath.Join(world, "governance", "blind-run.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("reading the run record: %w", err)
	}
	o, err := evidence.ReadObject(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	v, _ := o.Get("blind_package_id")
	id, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s: blind_package_id is not a string", p)
	}
	return id, nil
}

func newRoomServeCmd() *cobra.Command {
	var f roomFlags
	c := &cobra.Command{
		Use:   "serve (--world DIR | --package DIR --expect bpkg-…) --workspace NEWDIR [--transcript FILE]",
		Short: "Serve the sealed package over MCP on stdin/stdout",
		Long: `Serve the sealed package over MCP on stdin/stdout until the client closes stdin.

Point any MCP client that speaks stdio at this command. Nothing but MCP is
written to stdout; diagnostics go to stderr. Exit 1: the package, the pin or
the prompt was refused; exit 2: the seal could not be established here.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.options()
			if err != nil {
				return err
			}
			err = harness.Serve(cmd.Context(), o, os.Stdin, os.Stdout, os.Stderr)
			var ee *harness.ExitError
			if errors.As(err, &ee) {
				// The sealed server already said why on stderr.
				return &exitError{code: ee.Code}
			}
			if err != nil {
				return usageErr(err)
			}
			return nil
		},
	}
	f.register(c)
	return c
}

func newRoomStageCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "sealed-stage",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			code := harness.RunStage(roomStageArgs, args, os.Stdin, os.Stdout, os.Stderr)
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
}
