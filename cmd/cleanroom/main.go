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
	code, msg := 2, err
	var ee *exitError
	if errors.As(err, &ee) {
		code, msg = ee.code, ee.err
	}
	// Anything cobra itself refuses (unknown flag, wrong argument count) is
	// a usage error (2).
	if msg != nil {
		fmt.Fprintf(stderr, "cleanroom: %v\n", msg)
	}
	// With --json, stdout carries one JSON document whatever happens: a
	// command that failed before printing its result prints the error, so
	// a script reading stdout never gets empty input. Not where stdout is
	// another party's stream (the MCP session, the candidate's output).
	if out.n == 0 && jsonRequested(cmd, args, err) && cmd.Annotations[annotationStdout] != stdoutStream {
		doc := map[string]any{"error": "", "exit_code": code}
		if msg != nil {
			doc["error"] = msg.Error()
		}
		if b, jerr := evidence.Stringify(doc, "  "); jerr == nil {
			stdout.Write(b)
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
