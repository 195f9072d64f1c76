// Package sandboxinit is the entry point every binary that starts candidate
// containers must link: libcontainer re-executes the binary as
// `/proc/self/exe init` to become the container's init, and an OCI bundle
// written by the sandbox starts the binary as its shim ([ShimArg]). Importing this
// package also links runc's nsenter, whose cgo constructor sets up the
// namespaces of `init` before the Go runtime starts.
//
// The re-execution is routed from this package's own init function, not
// from the main package: Go initialises a package as soon as its imports
// are, so the container's init runs after libcontainer's dependencies
// only, not after every package initialiser of the binary (the cleanroom
// binary's own initialisers would add milliseconds to every container
// start). Call [Run] from an init function of the main package (or of a
// test binary that runs containers) for the main-thread lock it takes.
// It refuses nothing and decides nothing; it only routes the three
// re-executions (the third: the limits stage, [LimitsArg], which rootless
// mode puts before the command when rlimits stand in for cgroups, so that
// they bound the command from its exec and never the container's init).
//
// # Security Considerations
//
// The container's init sets PR_SET_PDEATHSIG to SIGKILL before
// libcontainer's init runs: the init is a grandchild (nsexec's
// CLONE_PARENT) that inherits no parent-death signal, and without one a
// harness killed by SIGKILL would leave the candidate running with no
// timeout. libcontainer's init keeps the signal across its credential
// changes (it saves it first and restores it last) and the signal
// survives the exec of the command (no set-uid or file-capability binary
// can change credentials under no_new_privs). Its parent is the harness
// thread that started the container, which sandbox.Exec keeps locked for
// the life of the container. If the harness dies before the signal is
// set, the init's next synchronisation with its parent fails and the
// command never starts.
//
// An OCI bundle runs under another runtime's init, which sets no such
// signal: its first process is this binary as a shim (ShimArg), which sets
// it and execs the command, with the runtime as the parent.
//
// # No API promise
//
// This package is cleanroom's own machinery, not an API: it is exported for
// the cleanroom binaries and their tests, and any identifier in it may
// change in any commit, without notice. docs/design.md lists the packages
// meant to be imported.
package sandboxinit
