//go:build !amd64 || purego

package sha2x

// cpuHasSHA is false: the assembly exists for amd64 only, and the purego
// build tag leaves it out.
const cpuHasSHA = false

func blocks1(s *[8]uint32, p *byte, n int)       { panic("sha2x: no assembly in this build") }
func blocks2(s, t *[8]uint32, p, q *byte, n int) { panic("sha2x: no assembly in this build") }
