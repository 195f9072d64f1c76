package main

import (
	"os"
	"runtime"

	// The devices cgroup manager: without it libcontainer refuses any
	// device rules (and on cgroup v1 the devices controller is what keeps
	// the candidate away from host devices).
	"github.com/cleanroom-dev/cleanroom/sandbox"
	_ "github.com/opencontainers/cgroups/devices"
	"github.com/opencontainers/runc/libcontainer"
	// nsenter's cgo constructor runs before the Go runtime starts: it sets
	// up the namespaces of `cleanroom init` when libcontainer starts it,
	// and returns at once otherwise.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

// init turns this binary into libcontainer's container init when
// libcontainer re-executes it as `/proc/self/exe init` (libcontainer.Init
// never returns: it execs the container's first process), and into the
// sandbox shim when it is that first process (sandbox.RunShimIfRequested
// never returns either: it execs the candidate's command).
func init() {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		libcontainer.Init()
	}
	sandbox.RunShimIfRequested()
	// Keep the main goroutine on the main thread for the life of the
	// process, so no other goroutine ever runs there. Goroutines that
	// setns(2) end locked and their threads are discarded — except the
	// main thread, which Go cannot discard: it would stay parked in the
	// foreign namespace, and /proc/self (the thread-group leader) would
	// then describe that namespace to everyone reading it.
	runtime.LockOSThread()
}
