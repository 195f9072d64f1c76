// Command cleanroom is the harness for sealed, blind evaluations: it issues
// and verifies releases, walks and emits packages, runs the clean room and
// the candidate sandbox, scores holdouts and builds AMBER cases.
//
// Exit codes: 0 success, 1 refused (the input broke a rule; the problems are
// listed), 2 unusable arguments or an environment that cannot do the work.
package main

import (
	"errors"
	"fmt"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(os.Stderr, "cleanroom: %v\n", ee.err)
		}
		return ee.code
	}
	// Anything cobra itself refuses (unknown flag, wrong argument count) is
	// a usage error.
	fmt.Fprintf(os.Stderr, "cleanroom: %v\n", err)
	return 2
}
