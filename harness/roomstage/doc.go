// Package roomstage routes the clean room's sealed stages (harness.RunStage)
// from its own init function, so that the binary's re-executions start
// their stage as soon as the harness and its imports are initialised, not
// after every package initialiser of the binary and the command tree: `room
// serve` starts the binary three times (the command, the seal stage, the
// serve stage), and the two stages would otherwise pay for the command
// line's whole start-up each.
//
// A binary that links this package and is started as `<binary> room
// sealed-stage ARGS…` runs harness.RunStage(Args, ARGS, stdio) and exits
// with its status; any other command line passes through untouched. The
// stage uses nothing but the harness and what it imports, which Go
// initialises before this package, so no initialiser the stage depends on
// is skipped.
//
// It decides nothing and refuses nothing itself: every check of the seal
// and of the serve stage is harness.RunStage's.
//
// # No API promise
//
// This package is cleanroom's own machinery, not an API: it is exported for
// the cleanroom binaries and their tests, and any identifier in it may
// change in any commit, without notice. docs/design.md lists the packages
// meant to be imported.
package roomstage
