// Package fsx is cleanroom's one way to open a name relative to a
// directory descriptor with openat2(2): the flags that make the lookup safe
// against a tree someone else controls (no symbolic or magic link followed,
// nothing outside the directory, no mount crossed), each explained once, and
// the retry of an interrupted lookup, in one place.
//
// Callers decide on fstat of the descriptor they get back and read from
// that same descriptor, never from the path again (a rename between a check
// by path and an open by path would defeat the check). Reading the bytes
// with a size bound is evidence.ReadOpenFile's job; fsx only opens.
//
// It imports the standard library and golang.org/x/sys only, so every
// package of the module may use it (deps_test.go).
package fsx
