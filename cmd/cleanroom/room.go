package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/harness"
	"github.com/cleanroom-dev/cleanroom/harness/roomstage"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newRoomCmd) }

func newRoomCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "room",
		Short: "The clean room: a sealed, kernel-asserted read-only package served over MCP",
		Long: `The clean room serves a blind package to an implementer through three MCP
tools over stdio: list_files, read_file and write_source.

"room serve" starts the room binary built with it (cleanroom-room beside it;
otherwise this binary again) in fresh mount and network namespaces, copies
the package into a new tmpfs, makes it read-only at the superblock and the
mount point, asserts that from the kernel, drops every privilege, measures
the sealed view against the pin and serves the verified bytes from memory.
Names, descriptions and schemas of the tools, the server instructions and the
opening prompt are read from the sealed experiment/CLEAN-ROOM-PROMPT-v1.md.

"room drive" is a built-in agent loop: it starts "room serve" as a child and
relays an OpenAI-compatible chat-completions model's tool calls to it.`,
	}
	c.AddCommand(newRoomServeCmd(), newRoomDriveCmd(), newRoomTranscriptCmd())
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
	_ = c.MarkFlagRequired("workspace")
}

// options resolves the flags into ServeOptions (absolute paths, the pin).
func (f *roomFlags) options() (harness.ServeOptions, error) {
	o := harness.ServeOptions{RootLabel: f.rootLabel}
	switch {
	case f.world != "" && (f.pkg != "" || f.expect != ""):
		return o, usageErr(errors.New("--world excludes --package and --expect"))
	case f.world != "":
		// As every command with --world: no world there is unusable (2);
		// a world without a pinned run is refused (1).
		w, err := experiment.OpenWorld(f.world)
		if err != nil {
			return o, usageErr(err)
		}
		pin, err := worldPin(w)
		if err != nil {
			return o, refusedErr(err)
		}
		o.PackageDir, o.Expect = w.PackageDir(), pin
	case f.pkg != "" && f.expect != "":
		o.PackageDir, o.Expect = f.pkg, f.expect
	default:
		return o, usageErr(errors.New("give --world DIR, or --package DIR with --expect bpkg-…"))
	}
	var err error
	if o.PackageDir, err = filepath.Abs(o.PackageDir); err != nil {
		return o, usageErr(err)
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
// through the strict reader (a regular file of bounded size: a FIFO or a
// huge file planted there is refused, not waited on or read whole).
func worldPin(w *experiment.World) (string, error) {
	p := w.RecordPath()
	b, err := evidence.ReadFileBytes(p)
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
		Use:         "serve (--world DIR | --package DIR --expect bpkg-…) --workspace NEWDIR [--transcript FILE]",
		Annotations: map[string]string{annotationStdout: stdoutStream},
		Short:       "Serve the sealed package over MCP on stdin/stdout",
		Long: `Serve the sealed package over MCP on stdin/stdout until the client closes stdin.

Point any MCP client that speaks stdio at this command. Nothing but MCP is
written to stdout; diagnostics go to stderr. Exit 1: the package, the pin,
the prompt or the workspace was refused; 3: the namespaces, the sealed
read-only view or the privilege drop could not be established here; 2:
anything else (a --world that does not exist, unusable arguments).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.options()
			if err != nil {
				return err
			}
			// The room binary built with this one, or else this binary
			// itself: the same stages either way (OpenStage says why not;
			// `cleanroom version` reports it). This binary is re-executed
			// with roomstage.Args, which roomstage's init function routes
			// before the command tree is built: it is no command of the tree.
			if o.Stage, err = harness.OpenStage(); err == nil {
				defer o.Stage.Close()
			} else {
				o.StageArgs = roomstage.Args
			}
			err = harness.Serve(cmd.Context(), o, os.Stdin, os.Stdout, os.Stderr)
			var ee *harness.ExitError
			if errors.As(err, &ee) {
				// The sealed server already said why on stderr.
				return &exitError{code: ee.Code}
			}
			var re *pkgwalk.RefusalError
			if errors.As(err, &re) {
				return refusedErr(err)
			}
			if errors.Is(err, harness.ErrNoIsolation) {
				return isolationErr(err)
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

func newRoomDriveCmd() *cobra.Command {
	var f roomFlags
	var model, endpoint, keyEnv string
	var maxTurns, seed int
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "drive --model M --endpoint URL --api-key-env VAR (--world DIR | --package DIR --expect bpkg-…) --workspace NEWDIR [--transcript FILE]",
		Short: "Run a chat-completions model through the sealed room (built-in agent loop)",
		Long: `Start "room serve" as a child and relay an OpenAI-compatible chat-completions
model's tool calls to it over MCP (temperature 0). The relay never reads the
package; the system message, opening turn and tool declarations are the
room's. The API key is read from the named environment variable and never
reaches the sealed server, whose environment is empty.

The loop stops when the model answers without calling a tool, at
--max-turns, or when the endpoint cuts a reply short that calls no tool
(any finish_reason but stop and tool_calls: stop cut_off). The model, seed,
turns, stop reason, usage and messages are appended to the transcript.
Exit 0 only if the model stopped of its own accord; 1 if the turn limit
ended it or the reply was cut off; 2 if the session ended on an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := f.options()
			if err != nil {
				return err
			}
			key := os.Getenv(keyEnv)
			if key == "" {
				return usageErr(fmt.Errorf("environment variable %s is empty", keyEnv))
			}
			serveArgs := []string{"room", "serve", "--package", o.PackageDir, "--expect", o.Expect, "--workspace", o.Workspace}
			if o.Transcript != "" {
				serveArgs = append(serveArgs, "--transcript", o.Transcript)
			}
			if f.rootLabel != "" {
				serveArgs = append(serveArgs, "--root-label", f.rootLabel)
			}
			res, err := harness.Drive(cmd.Context(), harness.DriveOptions{
				Server: func() *exec.Cmd {
					c := exec.Command("/proc/self/exe", serveArgs...)
					c.Env = []string{} // the key stays here
					c.Stderr = cmd.ErrOrStderr()
					return c
				},
				Endpoint: endpoint, Model: model, APIKey: key, MaxTurns: maxTurns, Seed: seed,
				Timeout: timeout, Transcript: o.Transcript,
			})
			if res != nil {
				if perr := printResult(cmd, res, func(w io.Writer) {
					fmt.Fprintf(w, "model %s: %d turns, stop %s, usage %v\n", res.Model, res.Turns, res.Stop, res.Usage)
				}); perr != nil {
					return perr
				}
			}
			if errors.Is(err, harness.ErrMaxTurns) || errors.Is(err, harness.ErrCutOff) {
				return refusedErr(err)
			}
			if err != nil {
				return usageErr(err)
			}
			return nil
		},
	}
	f.register(c)
	c.Flags().StringVar(&model, "model", "", "the model name sent to the endpoint")
	c.Flags().StringVar(&endpoint, "endpoint", "", "chat-completions base URL (…/v1); /chat/completions is appended")
	c.Flags().StringVar(&keyEnv, "api-key-env", "", "name of the environment variable holding the API key")
	c.Flags().IntVar(&maxTurns, "max-turns", 80, "stop after this many model turns")
	c.Flags().IntVar(&seed, "seed", 1, "seed sent with every request")
	c.Flags().DurationVar(&timeout, "request-timeout", 5*time.Minute, "deadline for one model request")
	for _, name := range []string{"model", "endpoint", "api-key-env"} {
		_ = c.MarkFlagRequired(name)
	}
	return c
}

func newRoomTranscriptCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "transcript FILE",
		Short: "Check a room transcript and print it as a TRVM-CLEAN-ROOM-TRANSCRIPT-v1 document",
		Long: `Read a transcript written by "room serve --transcript" (JSON Lines: start line,
one line per tool call, end line, and the relay's line from "room drive")
through the strict reader, check that its summaries agree with its calls, and
print the TRVM-CLEAN-ROOM-TRANSCRIPT-v1 document (TRVM-FORMATS §11.1). The text
output is a summary; --json prints the whole document.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := evidence.ReadRegularFile(args[0], harness.MaxTranscriptBytes)
			if err != nil {
				return usageErr(err)
			}
			doc, err := harness.ReadTranscript(b)
			if err != nil {
				return refusedErr(fmt.Errorf("%s: %w", args[0], err))
			}
			return printResult(cmd, doc, func(w io.Writer) {
				get := func(k string) any { v, _ := doc.Get(k); return v }
				count := func(k string) int { a, _ := get(k).([]any); return len(a) }
				fmt.Fprintf(w, "%s\nblind_package_id %v\nseal_digest %v\nserved files %v, read %d, refused reads %d, written %d, calls %d\nmodel %v, turns %v, stop %v, complete %v\n",
					get("type"), get("blind_package_id"), get("seal_digest"), get("served_file_count"), count("files_read"),
					count("refused_reads"), count("files_written"), count("access"), get("model"), get("turns"), get("stop"), get("complete"))
			})
		},
	}
}
