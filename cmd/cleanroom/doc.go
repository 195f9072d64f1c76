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
// one of them and maps the error it gets to an exit code, and never
// re-implements a check.
//
// Exit codes (docs/exit-codes.md, pinned by TestExitCodes and
// TestIsolationUnavailableExitsThree): 0 success; 1 refused, the input
// broke a rule and every problem is named (refusedErr); 2 unusable, bad
// arguments, a missing or unreadable file, an output that exists, or an
// environment that cannot do the work (usageErr); 3 this machine cannot
// establish the isolation the command needs, the missing piece named
// (isolationErr). An error a command returns without one of these, and
// anything cobra itself refuses, is 2. `sandbox exec` and `room serve` pass
// another process's status through.
package main
