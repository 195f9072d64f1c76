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
