// Package earlyprime starts the cgroup attach priming (sandbox/cgprime)
// from its package initialiser when the command line is `cleanroom sandbox
// exec …`, whose one job is to start one container: the binary's other
// package initialisers and the argument parsing then overlap the kernel's
// RCU grace period that the container's cgroup attach would otherwise wait
// for. The main package imports it for that side effect only. It decides
// nothing and refuses nothing: a command line written differently (a flag
// before the subcommand) just starts priming later, from sandbox.Exec.
//
// It imports nothing heavier than sandbox/cgprime (the standard library
// and x/sys), so that Go initialises it among the first packages.
package earlyprime
