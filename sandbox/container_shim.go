package sandbox

import "github.com/cleanroom-dev/cleanroom/sandbox/sandboxinit"

// ShimArg is argv[1] of the shim an OCI bundle starts as the container's
// first process: this very binary (bound read-only at shimPath), which
// sets PR_SET_PDEATHSIG and execs the command (sandboxinit routes it).
// Exec needs no shim: its container's init sets the signal itself.
const ShimArg = sandboxinit.ShimArg

// shimPath is where the harness binary is bound inside a bundle's
// container.
const shimPath = "/.cleanroom/shim"
