// Package sandboxinit is the entry point every binary that starts candidate
// containers must run first: libcontainer re-executes the binary as
// `/proc/self/exe init` to become the container's init, and the sandbox's
// shim is the same binary as the container's first process. Importing this
// package also links runc's nsenter, whose cgo constructor sets up the
// namespaces of `init` before the Go runtime starts.
//
// Call [Run] from an init function of the main package (or of a test
// binary that runs containers). It refuses nothing and decides nothing; it
// only routes the two re-executions.
package sandboxinit

import (
	"os"
	"runtime"

	"github.com/cleanroom-dev/cleanroom/sandbox"
	// The devices cgroup manager: without it libcontainer refuses any
	// device rules (and on cgroup v1 the devices controller is what keeps
	// the candidate away from host devices).
	_ "github.com/opencontainers/cgroups/devices"
	"github.com/opencontainers/runc/libcontainer"
	// nsenter's cgo constructor runs before the Go runtime starts: it sets
	// up the namespaces of `init` when libcontainer starts it, and returns
	// at once otherwise.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

// Run turns the process into libcontainer's container init when it was
// re-executed as `init` (libcontainer.Init never returns: it execs the
// container's first process), and into the sandbox shim when it is that
// first process (sandbox.RunShimIfRequested never returns either).
// Otherwise it keeps the calling goroutine — the main goroutine, when
// called from an init function — on the main thread for the life of the
// process: goroutines that setns(2) end locked and their threads are
// discarded, except the main thread, which Go cannot discard; it would stay
// parked in the foreign namespace, and /proc/self (the thread-group leader)
// would then describe that namespace to everyone reading it.
func Run() {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		libcontainer.Init()
	}
	sandbox.RunShimIfRequested()
	runtime.LockOSThread()
}
