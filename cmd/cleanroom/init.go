package main

import "github.com/cleanroom-dev/cleanroom/sandbox/sandboxinit"

// init routes libcontainer's `init` re-execution and the sandbox shim
// before anything else runs (see sandboxinit.Run).
func init() { sandboxinit.Run() }
