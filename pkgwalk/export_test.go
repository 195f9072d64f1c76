package pkgwalk

import (
	"testing"

	"github.com/cleanroom-dev/cleanroom/pkgwalk/internal/sha2x"
)

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

// UsePairReader turns the two-files-at-a-time reader on or off for the
// duration of the test (on only where the CPU has it).
func UsePairReader(t testing.TB, on bool) {
	was := pairReader
	pairReader = func() bool { return on && sha2x.Available() }
	t.Cleanup(func() { pairReader = was })
}

// The rules, for the black-box tests of package pkgwalk_test. They are
// unexported: no caller outside pkgwalk branches on one (a caller sees the
// rule's text in the error, or in Problem.Rule).
const (
	ErrBadID                  = errBadID
	ErrBadManifest            = errBadManifest
	ErrBadSegment             = errBadSegment
	ErrCaseCollision          = errCaseCollision
	ErrChanged                = errChanged
	ErrDestNotEmpty           = errDestNotEmpty
	ErrDevice                 = errDevice
	ErrDigestMismatch         = errDigestMismatch
	ErrFIFO                   = errFIFO
	ErrHardLink               = errHardLink
	ErrLeakChallengeShape     = errLeakChallengeShape
	ErrLeakCommittedChallenge = errLeakCommittedChallenge
	ErrLeakHoldoutCopy        = errLeakHoldoutCopy
	ErrLeakPath               = errLeakPath
	ErrManifestID             = errManifestID
	ErrMissingFile            = errMissingFile
	ErrMountPoint             = errMountPoint
	ErrNotInManifest          = errNotInManifest
	ErrNotNFC                 = errNotNFC
	ErrRootNotDir             = errRootNotDir
	ErrRootSymlink            = errRootSymlink
	ErrSocket                 = errSocket
)
