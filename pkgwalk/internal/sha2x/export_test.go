package sha2x

import (
	"testing"
	"unsafe"
)

// Decide is Available's rule, for tests that give it a CPU, an
// environment and block functions.
var Decide = decide

// Asm1 and Asm2 are the assembly block functions (they panic in a build
// without them).
var Asm1, Asm2 = blocks1, blocks2

// Generic1 and Generic2 are block functions with the assembly's signature
// built on the crypto/sha256 fallback.
func Generic1(h *[8]uint32, p *byte, n int) {
	s := State{h: *h}
	generic(&s, unsafe.Slice(p, n*BlockSize))
	*h = s.h
}

func Generic2(h, g *[8]uint32, p, q *byte, n int) {
	Generic1(h, p, n)
	Generic1(g, q, n)
}

// ForceFallback makes Blocks and Blocks2 run the crypto/sha256 fallback
// for the duration of the test, on any CPU.
func ForceFallback(t testing.TB) {
	Available()
	was, wasWhy := useAsm, why
	useAsm, why = false, "forced by a test"
	t.Cleanup(func() { useAsm, why = was, wasWhy })
}
