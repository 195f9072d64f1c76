//go:build fsxwalk

package fsx

// Built with -tags fsxwalk, every lookup uses the walk, as on a kernel
// without openat2: `go test -tags fsxwalk ./...` runs the whole suite on
// the fallback. A build tag, not a run-time switch: no environment or
// flag can move a released binary off openat2.
func init() { auto = func() resolver { return resolver{walk: true} } }
