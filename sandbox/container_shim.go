package sandbox

import (
	"fmt"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// ShimArg is argv[1] of the shim: the container's first process is this
// very binary (bound read-only at shimPath), which arranges to die with
// the harness and then execs the candidate's command.
const ShimArg = "sandbox-shim"

// shimPath is where the harness binary is bound inside the container.
const shimPath = "/.cleanroom/shim"

// RunShimIfRequested must be called first thing in the binary's init
// (beside libcontainer's init dispatch). When argv[1] is ShimArg it never
// returns: it sets PR_SET_PDEATHSIG to SIGKILL and execs argv[2:].
//
// Why: libcontainer's nsexec starts the container's init as a grandchild
// (CLONE_PARENT) that does not inherit Config.ParentDeathSignal, so if the
// harness were killed the candidate would run on with no timeout. With the
// death signal on the container's init (PID 1 of its namespace), the
// kernel kills the whole namespace when the harness's forking thread dies.
// The signal survives the exec (no set-uid binary can raise privileges
// under no_new_privs).
func RunShimIfRequested() {
	if len(os.Args) < 3 || os.Args[1] != ShimArg {
		return
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "cleanroom sandbox shim: prctl(PR_SET_PDEATHSIG): %v\n", err)
		os.Exit(126)
	}
	path, err := exec.LookPath(os.Args[2])
	if err != nil {
		fmt.Fprintf(os.Stderr, "cleanroom sandbox shim: %v\n", err)
		os.Exit(127)
	}
	err = unix.Exec(path, os.Args[2:], os.Environ())
	fmt.Fprintf(os.Stderr, "cleanroom sandbox shim: exec %s: %v\n", path, err)
	os.Exit(126)
}
