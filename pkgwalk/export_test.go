package pkgwalk

import "testing"

// SetEmitHook installs the emit test hook (see emitHook) for the duration
// of the test.
func SetEmitHook(t testing.TB, h func(stage string)) {
	emitHook = h
	t.Cleanup(func() { emitHook = nil })
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
