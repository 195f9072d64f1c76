//go:build !amd64

package sha2x

// Available is false: the block functions exist for amd64 only.
const Available = false

func blocks1(s *[8]uint32, p *byte, n int)       { panic("sha2x: not available") }
func blocks2(s, t *[8]uint32, p, q *byte, n int) { panic("sha2x: not available") }
