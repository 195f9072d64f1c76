package sha2x

//go:generate go run gen.go

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
)

// BlockSize is the SHA-256 block size: Blocks and Blocks2 hash whole
// blocks only.
const BlockSize = 64

// State is a SHA-256 chaining state (h0..h7) and the number of bytes
// hashed into it so far.
type State struct {
	h [8]uint32
	n uint64
}

// New returns the initial state.
func New() State {
	return State{h: [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}}
}

// Len returns the number of bytes hashed into s.
func (s *State) Len() uint64 { return s.n }

// Blocks hashes p, whose length must be a multiple of BlockSize, into s.
func Blocks(s *State, p []byte) {
	n := len(p) / BlockSize
	if n*BlockSize != len(p) {
		panic("sha2x: Blocks of a partial block")
	}
	if n == 0 {
		return
	}
	blocks1(&s.h, &p[0], n)
	s.n += uint64(len(p))
}

// Blocks2 hashes p into s and q into t, interleaved; len(p) and len(q)
// must be equal and a multiple of BlockSize.
func Blocks2(s, t *State, p, q []byte) {
	n := len(p) / BlockSize
	if n*BlockSize != len(p) || len(q) != len(p) {
		panic("sha2x: Blocks2 of unequal or partial blocks")
	}
	if n == 0 {
		return
	}
	blocks2(&s.h, &t.h, &p[0], &q[0], n)
	s.n += uint64(len(p))
	t.n += uint64(len(q))
}

// Sum returns the SHA-256 of everything hashed into s followed by tail
// (shorter than a block or not: it is written through crypto/sha256).
func Sum(s *State, tail []byte) [sha256.Size]byte {
	// crypto/sha256's marshalled state: "sha\x03", h0..h7 big-endian, the
	// 64-byte partial block, the length; s holds no partial block.
	b := make([]byte, 0, 4+32+BlockSize+8)
	b = append(b, "sha\x03"...)
	for _, v := range s.h {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	b = append(b, make([]byte, BlockSize)...)
	b = binary.BigEndian.AppendUint64(b, s.n)
	h := sha256.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(b); err != nil {
		// The format is crypto/sha256's own; failing here is a bug.
		panic("sha2x: crypto/sha256 refused its marshalled state: " + err.Error())
	}
	h.Write(tail)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
