package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/harness"
	"github.com/cleanroom-dev/cleanroom/harness/roomstage"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/internal/textsafe"
	"github.com/spf13/cobra"
)

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
	return c
}

// roomFlags are the flags serve and drive share.
type roomFlags struct {
	world, pkg, expect, rootLabel, workspace, transcript string
}

func (f *roomFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.world, "world", "", "a TRVM world: package docs/spec/proof-wire, pin from its run record, which must verify")
	c.Flags().StringVar(&f.pkg, "package", "", "the package directory (with --expect)")
	c.Flags().StringVar(&f.expect, "expect", "", "the pinned blind_package_id (bpkg-…)")
	c.Flags().StringVar(&f.rootLabel, "root-label", "", "the manifest's root label (default: the --world's package label, else docs/spec/proof-wire)")
	c.Flags().StringVar(&f.workspace, "workspace", "", "the implementer's workspace: created by the room, must not exist")
	c.Flags().StringVar(&f.transcript, "transcript", "", "write the transcript (JSON Lines) here; must not exist")
}

// options resolves the flags into ServeOptions (absolute paths, the pin).
func (f *roomFlags) options(ctx context.Context) (harness.ServeOptions, error) {
	o, err := f.source(ctx)
	if err != nil {
		return o, err
	}
	if f.workspace == "" {
		return o, fault.AsUnusable(errors.New("give --workspace NEWDIR"))
	}
	if o.Workspace, err = filepath.Abs(f.workspace); err != nil {
		return o, err
	}
	if f.transcript != "" {
		if o.Transcript, err = filepath.Abs(f.transcript); err != nil {
			return o, err
		}
	}
	return o, nil
}

// source resolves the package and its pin.
func (f *roomFlags) source(ctx context.Context) (harness.ServeOptions, error) {
	o := harness.ServeOptions{RootLabel: f.rootLabel}
	switch {
	case f.world != "" && (f.pkg != "" || f.expect != ""):
		return o, fault.AsUnusable(errors.New("--world excludes --package and --expect"))
	case f.world != "":
		// As every command with --world: no world there is unusable (2);
		// a world without a pinned run is refused (1).
		w, err := experiment.OpenWorld(f.world)
		if err != nil {
			return o, err
		}
		pin, err := worldPin(ctx, w)
		if err != nil {
			return o, err
		}
		o.PackageDir, o.Expect = w.PackageDir(), pin
		// The world's package label is the root label its pin was
		// measured under; another would name other bytes.
		if o.RootLabel == "" {
			o.RootLabel = w.PackageLabel()
		}
	case f.pkg != "" && f.expect != "":
		// Arguments that cannot be used (2), checked before a room starts:
		// a pin that is not an id, a package that is not a directory.
		if err := expectFlag(f.expect); err != nil {
			return o, err
		}
		if err := inputDir("--package "+f.pkg, f.pkg); err != nil {
			return o, err
		}
		o.PackageDir, o.Expect = f.pkg, f.expect
	default:
		return o, fault.AsUnusable(errors.New("give --world DIR, or --package DIR with --expect bpkg-…"))
	}
	var err error
	if o.PackageDir, err = filepath.Abs(o.PackageDir); err != nil {
		return o, err
	}
	return o, nil
}

// errRoomUnverified: `room serve --world` and `room drive --world` serve
// only a run that verifies as `run verify` verifies it; an edited record
// would otherwise choose the package the implementer is shown.
var errRoomUnverified = errors.New("the room serves only a verified run")

// worldPin verifies the world's run as `run verify` does (the record
// through the strict reader, run_id, the receipt chain back to PINNED, the
// blind package measured) and returns the pinned blind_package_id of the
// record it verified.
func worldPin(ctx context.Context, w *experiment.World) (string, error) {
	rep, err := experiment.Verify(ctx, w, experiment.VerifyOptions{})
	if err != nil {
		return "", err
	}
	if err := rep.Err(); err != nil {
		return "", fmt.Errorf("%w: %w", errRoomUnverified, err)
	}
	return rep.Record.BlindPackageID, nil
}

func newRoomServeCmd() *cobra.Command {
	var f roomFlags
	var sessions string
	var resume bool
	c := &cobra.Command{
		Use:         "serve (--world DIR | --package DIR --expect bpkg-…) (--workspace NEWDIR [--transcript FILE] | --sessions DIR)",
		Annotations: map[string]string{annotationStdout: stdoutStream},
		Short:       "Serve the sealed package over MCP on stdin/stdout",
		Long: `Serve the sealed package over MCP on stdin/stdout until the client closes stdin.

Point any MCP client that speaks stdio at this command. Nothing but MCP is
written to stdout; diagnostics go to stderr. With --sessions DIR every
launch creates a fresh session under DIR (created if absent): a directory
named by the UTC time and a random suffix, created exclusively, holding the
workspace (workspace/) and the transcript (transcript.jsonl), so that one
fixed mcpServers entry works on every start (an agent's health check
included); "room sessions DIR" lists them. Exit 1: the package, the pin,
the prompt or the workspace was refused; 3: the namespaces, the sealed
read-only view or the privilege drop could not be established here; 2:
anything else (a --world that does not exist, unusable arguments).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var o harness.ServeOptions
			var err error
			var session *roomSession
			if sessions != "" {
				if f.workspace != "" || f.transcript != "" {
					return fault.AsUnusable(errors.New("--sessions excludes --workspace and --transcript"))
				}
				if o, err = f.source(cmd.Context()); err != nil {
					return err
				}
				if session, err = newRoomSession(sessions); err != nil {
					return err
				}
				o.Workspace, o.Transcript = session.workspace(), session.transcript()
				fmt.Fprintf(cmd.ErrOrStderr(), "cleanroom: room serve: session %s\n", session.dir)
			} else if o, err = f.options(cmd.Context()); err != nil {
				return err
			}
			o.Resume = resume
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
			// Not cancelled by a signal: Serve passes SIGINT, SIGTERM and
			// SIGHUP on to the sealed server, which ends its session
			// cleanly (the transcript's end line) and exits; cancelling
			// would kill it before that line is written. Serve removes
			// the view's mount point once it has exited.
			err = harness.Serve(context.WithoutCancel(cmd.Context()), o, os.Stdin, os.Stdout, os.Stderr)
			if session != nil {
				// A room that refused to start leaves an empty session:
				// it goes (rmdir removes only an empty directory).
				session.dropIfEmpty()
			}
			var ee *harness.ExitError
			if errors.As(err, &ee) {
				// The sealed server already said why on stderr.
				return fault.Status(ee.Code)
			}
			// Every other error carries its class from where it was made.
			return err
		},
	}
	f.register(c)
	c.Flags().StringVar(&sessions, "sessions", "", "create a fresh session (workspace and transcript) under this directory for this launch")
	c.Flags().BoolVar(&resume, "resume", false, "continue an interrupted session: reopen --workspace and append to --transcript (room drive --resume runs this)")
	_ = c.Flags().MarkHidden("resume")
	return c
}

func newRoomDriveCmd() *cobra.Command {
	var f roomFlags
	var model, endpoint, keyEnv, profile, resume string
	var fields []string
	var maxTurns, seed, maxTokens, maxToolErrors, maxCutOffs, retries, maxTotalTokens int
	var timeout, maxWall, retryBase, retryMaxWait time.Duration
	c := &cobra.Command{
		Use:   "drive --model M --endpoint URL --api-key-env VAR (--world DIR | --package DIR --expect bpkg-…) (--workspace NEWDIR [--transcript FILE] | --resume TRANSCRIPT)",
		Short: "Run a chat-completions model through the sealed room (built-in agent loop)",
		Long: `Start "room serve" as a child and relay an OpenAI-compatible chat-completions
model's tool calls to it over MCP. The relay never reads the package; the
system message, opening turn and tool declarations are the room's. The API
key is read from the named environment variable and never reaches the sealed
server, whose environment is empty.

Requests follow --profile: openai (the default: max_tokens, temperature 0,
seed), openai-reasoning (max_completion_tokens, no temperature, no seed),
openrouter, anthropic-compatible (no seed) or local; --request-field
NAME=JSON adds or replaces a member of every request (not model, messages
or tools). A transient failure (HTTP 429 honouring Retry-After, 408, 5xx, a
reset connection, a timeout) is retried up to --retries times with
exponential backoff and jitter, each retry recorded in the transcript. A
call of a tool the room does not serve, or with arguments that are empty or
not JSON, is answered to the model as a tool error; a reply cut short
(finish_reason length, content_filter) that calls no tool is recorded and
asked again. One progress line per turn goes to stderr.

The session stops when the model answers without calling a tool (stop
model_stopped), or at a named stop: max_turns, token_budget
(--max-total-tokens), wall_time (--max-wall), tool_errors
(--max-tool-errors), cut_off (--max-cut-offs in a row), interrupted (a
signal), error. The messages are appended to the transcript turn by turn;
the model, seed, turns, stop, usage and messages as a last line.

--resume TRANSCRIPT continues a session that did not complete, in the same
workspace, against a freshly sealed and re-verified room: the transcript
must read whole, no room may still hold it (a room locks its transcript
while it runs; one that died without its end line does not), the workspace must
hold exactly the files it records, and the fresh room must open the
conversation as recorded; the conversation is replayed and the resumption
recorded (the sha256 of the record before it, of the replayed messages).
Give the same package (--world, or --package and --expect) and model flags.

Exit 0 only if the model stopped of its own accord; 1 for max_turns,
token_budget, wall_time, tool_errors or cut_off; 2 if the session ended
on an error or was interrupted, or the room did not start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var o harness.ServeOptions
			var err error
			var prior *harness.PriorSession
			if resume != "" {
				if f.workspace != "" || f.transcript != "" {
					return fault.AsUnusable(errors.New("--resume excludes --workspace and --transcript (both are the recorded session's)"))
				}
				if o, err = f.source(cmd.Context()); err != nil {
					return err
				}
				path, err := filepath.Abs(resume)
				if err != nil {
					return err
				}
				if prior, err = harness.ReadResumable(path); err != nil {
					return err
				}
				if prior.BlindPackageID != o.Expect {
					return fmt.Errorf("%w: the transcript records %s, the pin is %s", harness.ErrResumeMismatch, prior.BlindPackageID, o.Expect)
				}
				o.Workspace, o.Transcript, o.Resume = prior.Workspace, path, true
			} else if o, err = f.options(cmd.Context()); err != nil {
				return err
			}
			key := os.Getenv(keyEnv)
			if key == "" {
				return fault.AsUnusable(fmt.Errorf("environment variable %s is empty", keyEnv))
			}
			extra, err := requestFields(fields)
			if err != nil {
				return err
			}
			serveArgs := []string{"room", "serve", "--package", o.PackageDir, "--expect", o.Expect, "--workspace", o.Workspace}
			if o.Transcript != "" {
				serveArgs = append(serveArgs, "--transcript", o.Transcript)
			}
			if f.rootLabel != "" {
				serveArgs = append(serveArgs, "--root-label", f.rootLabel)
			}
			if o.Resume {
				serveArgs = append(serveArgs, "--resume")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := harness.Drive(ctx, harness.DriveOptions{
				Server: func() *exec.Cmd {
					c := exec.Command("/proc/self/exe", serveArgs...)
					c.Env = []string{} // the key stays here
					c.Stderr = cmd.ErrOrStderr()
					return c
				},
				Endpoint: endpoint, Model: model, APIKey: key, MaxTurns: maxTurns, Seed: seed, MaxTokens: maxTokens,
				Timeout: timeout, Transcript: o.Transcript, Profile: profile, RequestFields: extra,
				Retry:         harness.RetryPolicy{Max: retries, Base: retryBase, MaxWait: retryMaxWait},
				MaxToolErrors: maxToolErrors, MaxCutOffs: maxCutOffs, MaxTotalTokens: maxTotalTokens, MaxWall: maxWall,
				Progress: cmd.ErrOrStderr(), Resume: prior,
			})
			if res != nil {
				if perr := printResult(cmd, res, func(w io.Writer) {
					fmt.Fprintf(w, "model %s: %d turns, stop %s, usage %s, %d retries, %d tool errors\n", res.Model, res.Turns, res.Stop, plainMap(res.Usage), res.Retries, res.ToolErrors)
				}); perr != nil {
					return perr
				}
			}
			// Classed by Drive: a named budget stop or a refused resumption
			// is refused (1), a session that ended on an error unusable (2).
			return err
		},
	}
	f.register(c)
	fl := c.Flags()
	fl.StringVar(&model, "model", "", "the model name sent to the endpoint")
	fl.StringVar(&endpoint, "endpoint", "", "chat-completions base URL (…/v1); /chat/completions is appended")
	fl.StringVar(&keyEnv, "api-key-env", "", "name of the environment variable holding the API key")
	fl.IntVar(&maxTurns, "max-turns", 80, "stop after this many model turns (stop max_turns)")
	fl.IntVar(&maxTotalTokens, "max-total-tokens", 0, "stop once the endpoint's total_tokens reach this (stop token_budget; 0 = no budget)")
	fl.DurationVar(&maxWall, "max-wall", 0, "stop after this much time (stop wall_time; 0 = no budget)")
	fl.IntVar(&maxToolErrors, "max-tool-errors", 20, "stop after this many calls of tools that do not exist or with arguments that are not JSON (stop tool_errors)")
	fl.IntVar(&maxCutOffs, "max-cut-offs", 3, "stop after this many replies in a row cut short without a tool call (stop cut_off)")
	fl.IntVar(&seed, "seed", 1, "seed sent with every request (profiles that send one)")
	fl.IntVar(&maxTokens, "max-tokens", 8192, "the reply's token cap (max_tokens, or max_completion_tokens in the openai-reasoning profile)")
	fl.StringVar(&profile, "profile", harness.ProfileOpenAI, "request profile: "+strings.Join(harness.ProfileNames(), ", "))
	fl.StringArrayVar(&fields, "request-field", nil, "NAME=JSON added to every request (repeatable), e.g. reasoning_effort=\"high\"")
	fl.DurationVar(&timeout, "request-timeout", 5*time.Minute, "deadline for one model request (a timeout is retried)")
	fl.IntVar(&retries, "retries", 8, "retries of one model request after a transient failure (-1: none)")
	fl.DurationVar(&retryBase, "retry-base", time.Second, "first retry's backoff, doubled for each later one")
	fl.DurationVar(&retryMaxWait, "retry-max-wait", 2*time.Minute, "longest wait before a retry, Retry-After included")
	fl.StringVar(&resume, "resume", "", "continue the interrupted session this transcript records")
	for _, name := range []string{"model", "endpoint", "api-key-env"} {
		_ = c.MarkFlagRequired(name)
	}
	return c
}

// requestFields reads --request-field NAME=JSON values; another value is an
// unusable argument (2).
func requestFields(fields []string) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, f := range fields {
		name, value, ok := strings.Cut(f, "=")
		if !ok || name == "" || !json.Valid([]byte(value)) {
			return nil, fault.AsUnusable(fmt.Errorf("--request-field %q: want NAME=JSON (a JSON value: a string is quoted)", f))
		}
		out[name] = json.RawMessage(value)
	}
	return out, nil
}

func newRoomTranscriptCmd() *cobra.Command {
	var recoverLine bool
	c := &cobra.Command{
		Use:   "transcript FILE",
		Short: "Check a room transcript and print it as a TRVM-CLEAN-ROOM-TRANSCRIPT-v1 document",
		Long: `Read a transcript written by "room serve --transcript" (JSON Lines: start line,
one line per tool call, end line; from "room drive", turn and retry lines
while it runs and its drive line at the end; a resumed session's start and
resume lines; from "room agent", its agent line at the end)
through the strict reader, check that its summaries agree with its calls, and
print the TRVM-CLEAN-ROOM-TRANSCRIPT-v1 document (docs/formats.md §11.1). The text
output is a summary; --json prints the whole document.

--recover first ends a record whose "room agent" was killed while it appended
its agent line (the record ends in a line cut short, and FILE` + harness.PendingSuffix + ` holds
the whole line): the line is written again after the cut, naming the cut
line's size and sha256 (cut_line), which the reader then skips; the cut bytes
stay. A cut line that is not the beginning of that line is refused.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if recoverLine {
				did, err := harness.RecoverAgentLine(args[0])
				if err != nil {
					return err
				}
				if did {
					fmt.Fprintf(cmd.ErrOrStderr(), "cleanroom room transcript: %s: the agent line written again after the cut\n", args[0])
				}
			}
			b, err := evidence.ReadRegularFile(args[0], harness.MaxTranscriptBytes)
			if err != nil {
				return err
			}
			doc, err := harness.ReadTranscript(b)
			if err != nil {
				if _, jerr := os.Lstat(args[0] + harness.PendingSuffix); jerr == nil && !recoverLine {
					// room agent was killed while it appended its line.
					err = fmt.Errorf("%w (an agent line is pending in %s: --recover ends the record with it)", err, args[0]+harness.PendingSuffix)
				}
				return fmt.Errorf("%s: %w", args[0], err)
			}
			return printResult(cmd, doc, func(w io.Writer) {
				// Shown escaped: the transcript holds what the model (or the
				// agent) sent raw, bidirectional controls and terminal
				// escapes included (--json prints it as recorded).
				get := func(k string) string { v, _ := doc.Get(k); return textsafe.Visible(plainValue(v)) }
				count := func(k string) int { v, _ := doc.Get(k); a, _ := v.([]any); return len(a) }
				fmt.Fprintf(w, "%s\nblind_package_id %s\nseal_digest %s\nserved files %s, read %d, refused reads %d, written %d, calls %d\nmodel %s, turns %s, stop %s, complete %s, retries %d, resumptions %d\n",
					get("type"), get("blind_package_id"), get("seal_digest"), get("served_file_count"), count("files_read"),
					count("refused_reads"), count("files_written"), count("access"), get("model"), get("turns"), get("stop"), get("complete"),
					count("retries"), count("resumptions"))
				if v, _ := doc.Get("agent"); v != nil {
					a, _ := v.(*evidence.Object)
					// room agent's line: what ran and where it connected.
					av := func(k string) any {
						if a == nil {
							return nil
						}
						v, _ := a.Get(k)
						return v
					}
					conns, _ := av("connections").([]any)
					refused := 0
					for _, c := range conns {
						if o, ok := c.(*evidence.Object); ok {
							if oc, _ := o.Get("outcome"); oc == "refused" {
								refused++
							}
						}
					}
					fmt.Fprintf(w, "agent %s, version %q, connections %d (refused %d), relay connections %s\n",
						textsafe.Visible(plainValue(av("command"))), plainValue(av("version")), len(conns), refused, plainValue(av("relay_connections")))
				}
			})
		},
	}
	c.Flags().BoolVar(&recoverLine, "recover", false, "first end a record whose room agent was killed while it appended its agent line (from FILE"+harness.PendingSuffix+")")
	return c
}
