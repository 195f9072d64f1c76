package sandboxinit

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"

	// The devices cgroup manager: without it libcontainer refuses any
	// device rules (and on cgroup v1 the devices controller is what keeps
	// the candidate away from host devices).
	_ "github.com/opencontainers/cgroups/devices"
	"github.com/opencontainers/runc/libcontainer"
	// nsenter's cgo constructor runs before the Go runtime starts: it sets
	// up the namespaces of `init` when libcontainer starts it, and returns
	// at once otherwise.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
	"golang.org/x/sys/unix"
)

// ShimArg is argv[1] of the bundle's shim (see the package comment).
const ShimArg = "sandbox-shim"

func init() {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		containerInit()
	}
	if len(os.Args) > 2 && os.Args[1] == ShimArg {
		shim(os.Args[2:])
	}
}

// containerInit never returns: libcontainer.Init execs the container's
// first process or exits.
func containerInit() {
	// libcontainer.Init locks this goroutine to the main thread; the
	// signal is a property of the thread, so set it from the same one,
	// the thread that will exec the command.
	runtime.LockOSThread()
	// Without it, a harness killed by SIGKILL would leave the candidate
	// running with no timeout (see the package's Security Considerations).
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "cleanroom container init: prctl(PR_SET_PDEATHSIG): %v\n", err)
		os.Exit(126)
	}
	// The candidate's system calls are judged from here on (see
	// filter.go). libcontainer's init needs nothing the filter refuses:
	// sandbox.Exec sets NoNewKeyring, the candidate's user namespace and
	// the others were made by nsexec before this runs, and the mount
	// calls that build the root are allowed (the candidate lacks the
	// capability they need).
	if err := denyToCandidate(); err != nil {
		fmt.Fprintf(os.Stderr, "cleanroom container init: %v\n", err)
		os.Exit(126)
	}
	libcontainer.Init()
	os.Exit(126) // not reached: Init execs or exits
}

// shim never returns: it sets PR_SET_PDEATHSIG to SIGKILL and execs args.
// The signal survives the exec (no set-uid binary can raise privileges
// under no_new_privs).
func shim(args []string) {
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "cleanroom sandbox shim: prctl(PR_SET_PDEATHSIG): %v\n", err)
		os.Exit(126)
	}
	// As the container init's: no kernel keyring, no user namespace. The
	// runtime has set no_new_privs (the spec asks for it), which a filter
	// installed without CAP_SYS_ADMIN needs; set it again in case it did not.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "cleanroom sandbox shim: prctl(PR_SET_NO_NEW_PRIVS): %v\n", err)
		os.Exit(126)
	}
	if err := denyToCandidate(); err != nil {
		fmt.Fprintf(os.Stderr, "cleanroom sandbox shim: %v\n", err)
		os.Exit(126)
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "cleanroom sandbox shim: %v\n", err)
		os.Exit(127)
	}
	err = unix.Exec(path, args, os.Environ())
	fmt.Fprintf(os.Stderr, "cleanroom sandbox shim: exec %s: %v\n", path, err)
	os.Exit(126)
}

// Run keeps the calling goroutine — the main goroutine, when called from an
// init function — on the main thread for the life of the process:
// goroutines that setns(2) end locked and their threads are discarded,
// except the main thread, which Go cannot discard; it would stay parked in
// the foreign namespace, and /proc/self (the thread-group leader) would
// then describe that namespace to everyone reading it. (The container's
// init and the shim never get here: this package's init function has
// routed them.)
func Run() {
	runtime.LockOSThread()
}
