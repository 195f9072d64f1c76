package pkgwalk

import "testing"

// SetTestHook installs the walk and emit test hook (see testHook) for the
// duration of the test.
func SetTestHook(t testing.TB, h func(stage string)) {
	testHook = h
	t.Cleanup(func() { testHook = nil })
}

// ForceCopyFallback makes every emit copy take the read/write loop for the
// duration of the test.
func ForceCopyFallback(t testing.TB) {
	forceCopyFallback = true
	t.Cleanup(func() { forceCopyFallback = false })
}

// CopyFallbacks returns the number of files copied through the read/write
// loop so far.
func CopyFallbacks() int64 { return copyFallbacks.Load() }
