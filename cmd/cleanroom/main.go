package main

import (
	"errors"
	"fmt"
	"io"
	"os"
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
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "cleanroom: %v\n", ee.err)
		}
		return ee.code
	}
	// Anything cobra itself refuses (unknown flag, wrong argument count) is
	// a usage error.
	fmt.Fprintf(stderr, "cleanroom: %v\n", err)
	return 2
}
