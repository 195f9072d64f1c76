// Package deathsig starts a child process that the kernel kills when this
// process dies, and not before: the one way cleanroom starts a helper
// process (an adapter, the sealed room, a rootless re-execution, a probe)
// that must not outlive it.
//
// The parent-death signal (PR_SET_PDEATHSIG, exec.Cmd's
// SysProcAttr.Pdeathsig) fires when the OS thread that forked the child
// exits, not when the process does. Go ends a thread whose goroutine
// returns while locked to it (network-namespace and sandbox code does so
// on purpose), and any goroutine may be scheduled onto the thread that
// forked a child: started from an unlocked goroutine, the child could be
// killed mid-run by unrelated code. [Start] forks from a thread locked to
// a goroutine of its own and keeps it until the child is reaped.
package deathsig
