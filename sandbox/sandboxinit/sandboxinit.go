package sandboxinit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"

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

// LimitsArg is argv[1] of the limits stage (see the package comment):
// argv[2] is RLIMIT_DATA in bytes, argv[3] RLIMIT_NPROC, the rest the
// command.
const LimitsArg = "sandbox-limits"

func init() {
	if len(os.Args) > 1 && os.Args[1] == "init" {
		containerInit()
	}
	if len(os.Args) > 2 && os.Args[1] == ShimArg {
		shim(os.Args[2:])
	}
	if len(os.Args) > 4 && os.Args[1] == LimitsArg {
		limits(os.Args[2], os.Args[3], os.Args[4:])
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
	execCommand("cleanroom sandbox shim", args)
}

// limits never returns: it sets RLIMIT_DATA to data and RLIMIT_NPROC to
// nproc (soft and hard, decimal) on itself and execs args, which start
// with them. It runs in the container after libcontainer's init, as the
// command it execs (the container's init, a sealed copy of this binary,
// re-executed from /proc/self/exe): the limits that stand in for the
// memory and pids cgroups in rootless mode bound the candidate from its
// first instruction and never the init, whose Go runtime (its heap and
// every thread's stack count against RLIMIT_DATA, every thread against
// RLIMIT_NPROC) a small --memory would otherwise kill before the exec.
// The candidate's seccomp filter and parent-death signal are the init's,
// kept across the exec.
func limits(data, nproc string, args []string) {
	for _, l := range []struct {
		resource int
		value    string
	}{{unix.RLIMIT_DATA, data}, {unix.RLIMIT_NPROC, nproc}} {
		n, err := strconv.ParseUint(l.value, 10, 64)
		if err == nil {
			err = unix.Setrlimit(l.resource, &unix.Rlimit{Cur: n, Max: n})
		}
		if err != nil {
			// Never run the command without its limits.
			fmt.Fprintf(os.Stderr, "cleanroom sandbox limits: rlimit %d = %q: %v\n", l.resource, l.value, err)
			os.Exit(126)
		}
	}
	execCommand("cleanroom sandbox limits", args)
}

// execCommand execs args as a shell would (127: not found, 126: found and
// not run), naming who in its messages; it never returns.
func execCommand(who string, args []string) {
	path, err := exec.LookPath(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", who, err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			os.Exit(127)
		}
		os.Exit(126)
	}
	err = unix.Exec(path, args, os.Environ())
	fmt.Fprintf(os.Stderr, "%s: exec %s: %v\n", who, path, err)
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
