// Command cleanroom is the harness for sealed, blind evaluations: it issues
// and verifies releases, walks and emits packages, runs the clean room and
// the candidate sandbox, scores holdouts, renders run reports, plans fleets
// and builds AMBER cases.
//
// It owns the command line only: flags, arguments, the text and --json
// renderings of results (printResult; --json is a persistent flag every
// command that prints a result honours) and the exit codes. Every rule and
// every record belongs to a package (experiment, holdout, pkgwalk, amber,
// fleet, report, sandbox, harness); a command parses its arguments, calls
// one of them and returns the error it gets with the class it was made
// with, and never re-implements a check.
//
// Exit codes (docs/exit-codes.md; internal/fault): 0 success; 1 refused,
// the input was read and broke a rule, every problem named; 2 unusable, bad
// arguments, an input that cannot be read, an output that exists; 3 this
// machine cannot establish the isolation the command needs. An error's class
// is decided where the error is made (a classed sentinel or error type in
// the package that applies the rule, or fault.AsUnusable and friends for
// what a command itself checks); execute maps it with fault.ExitCode, the
// only caller, and anything unclassified is 2. `sandbox exec` and `room
// serve` pass another process's status through (fault.Status).
package main
