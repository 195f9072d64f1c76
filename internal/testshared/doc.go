// Package testshared locates the repository and the conformance material in
// ../shared for tests. A user's fresh clone has no ../shared: tests that need
// it skip with a message saying so; CI has it (read-only).
//
// It owns only locating, plus what every test package would otherwise redo:
// FullFS (a full file system for tests of failed writes), UnderGVisor (a
// package's tests run again inside runsc), ClosesNothingElse (the check that
// a release acts once), ManyFilesDir (a tmpfs directory for tests that create
// thousands of files) and Cleanroom (the command-line binary, built once per
// checkout for every test package that runs it). It never writes to
// ../shared, never copies from it into the repository, and refuses (fails
// the test) when the repository root itself cannot be found.
package testshared
