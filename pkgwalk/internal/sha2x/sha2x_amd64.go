//go:build amd64 && !purego

package sha2x

// cpuHasSHA reports whether this CPU has the SHA extensions (CPUID leaf 7,
// EBX bit 29) and SSE4.1 (PBLENDW) and SSSE3 (PSHUFB, PALIGNR), which the
// block functions use. Without them the assembly would fault (SIGILL), so
// it is never run, not even by the self-check.
var cpuHasSHA = func() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, c1, _ := cpuid(1, 0)
	_, b7, _, _ := cpuid(7, 0)
	const ssse3, sse41, sha = 1 << 9, 1 << 19, 1 << 29
	return c1&ssse3 != 0 && c1&sse41 != 0 && b7&sha != 0
}()

//go:noescape
func blocks1(s *[8]uint32, p *byte, n int)

//go:noescape
func blocks2(s, t *[8]uint32, p, q *byte, n int)

func cpuid(leaf, sub uint32) (a, b, c, d uint32)
