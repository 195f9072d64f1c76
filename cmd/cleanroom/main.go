package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int { return execute(args, os.Stdout, os.Stderr) }

// execute runs the command line args with the given output streams and
// returns the exit code (docs/exit-codes.md). Tests call it to see exactly
// what a user sees.
func execute(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	out := &countingWriter{w: stdout}
	root.SetOut(out)
	root.SetErr(stderr)
	ctx, stop := interruptible()
	defer stop()
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	// The one mapping from an error to the exit code (internal/fault;
	// docs/exit-codes.md). Anything cobra itself refuses (unknown flag,
	// wrong argument count) is classed unusable where it is made.
	code := fault.ExitCode(err)
	msg := ""
	if !fault.Shown(err) {
		msg = err.Error()
		fmt.Fprintf(stderr, "cleanroom: %s\n", msg)
	}
	// With --json, stdout carries one JSON document whatever happens: a
	// command that failed before printing its result prints the failure
	// document, so a script reading stdout never gets empty input. Not
	// where stdout is another party's stream (the MCP session, the
	// candidate's output).
	if out.n == 0 && jsonRequested(cmd, args, err) && cmd.Annotations[annotationStdout] != stdoutStream {
		if b, jerr := evidence.Stringify(failureDocument(err, msg, code), "  "); jerr == nil {
			_, _ = stdout.Write(b) // the failure document: nowhere left to report a failed write
		}
	}
	return code
}

// interruptible returns the context every command runs under: cancelled by
// SIGINT, SIGTERM or SIGHUP, so that a signal unwinds the command through
// its deferred clean-ups (containers killed and their mounts, cgroups,
// network namespaces and temporary directories removed, partial outputs
// dropped) instead of ending the process where it stands. The first signal
// also restores the default dispositions: a second one ends the process at
// once, for a clean-up that hangs.
func interruptible() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// A command whose stdout is not its own result (annotationStdout:
// stdoutStream) never gets a JSON error document there.
const (
	annotationStdout = "cleanroom/stdout"
	stdoutStream     = "stream"
)

// jsonRequested reports whether --json was given: as parsed, or, when the
// command line did not parse (err), as written before any "--".
func jsonRequested(cmd *cobra.Command, args []string, err error) bool {
	if cmd != nil {
		if v, gerr := cmd.Flags().GetBool("json"); gerr == nil && v {
			return true
		}
		// Flags that parsed are the answer: "--json" among the raw
		// arguments may be another flag's value (--reason --json).
		if cmd.Flags().Parsed() && !errors.As(err, new(flagError)) {
			return false
		}
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

// countingWriter counts the bytes a command wrote to stdout.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// failureDocument is the one --json failure document of every command:
// {"error": the message stderr shows, "exit_code": N}, followed by the
// members the command attached to the error (withDetail: the problems
// listed one by one, the subject refused).
func failureDocument(err error, msg string, code int) *evidence.Object {
	doc := evidence.NewObject(
		evidence.Member{Name: "error", Value: msg},
		evidence.Member{Name: "exit_code", Value: code},
	)
	var d *detailError
	if errors.As(err, &d) {
		for _, m := range d.members {
			if _, taken := doc.Get(m.Name); !taken {
				doc.Set(m.Name, m.Value)
			}
		}
	}
	return doc
}

// detailError attaches members to the --json failure document.
type detailError struct {
	err     error
	members []evidence.Member
}

func (e *detailError) Error() string { return e.err.Error() }
func (e *detailError) Unwrap() error { return e.err }

// withDetail returns err with members added to its --json failure document
// (after "error" and "exit_code", which no member replaces).
func withDetail(err error, members ...evidence.Member) error {
	return &detailError{err: err, members: members}
}
