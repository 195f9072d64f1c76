package sha2x

//go:generate go run gen.go

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"os"
	"strings"
	"sync"
)

// BlockSize is the SHA-256 block size: Blocks and Blocks2 hash whole
// blocks only.
const BlockSize = 64

// EnvVar names the environment variable that turns the assembly off:
// CLEANROOM_SHA2X=off.
const EnvVar = "CLEANROOM_SHA2X"

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

var (
	decideOnce sync.Once
	useAsm     bool
	why        string
)

// Available reports whether Blocks and Blocks2 run the SHA-NI assembly
// (see the package documentation for when they do). It is decided once,
// at the first call, and stays fixed for the life of the process.
func Available() bool {
	decideOnce.Do(func() { useAsm, why = decide(cpuHasSHA, os.Getenv(EnvVar), blocks1, blocks2) })
	return useAsm
}

// Implementation names the block function in use, and if it is not the
// assembly, why not (for diagnostics and benchmark notes).
func Implementation() string {
	if Available() {
		return "sha-ni"
	}
	return "crypto/sha256 (" + why + ")"
}

type (
	blocks1Func func(s *[8]uint32, p *byte, n int)
	blocks2Func func(s, t *[8]uint32, p, q *byte, n int)
)

// decide is Available's rule, apart from the process state so the tests
// can give it a CPU, an environment and block functions.
func decide(cpu bool, env string, b1 blocks1Func, b2 blocks2Func) (bool, string) {
	switch {
	case !cpu:
		// Checked first: without the extensions the self-check itself
		// would fault.
		return false, "no SHA-NI on this CPU or in this build"
	case strings.EqualFold(strings.TrimSpace(env), "off"):
		return false, EnvVar + "=off"
	case !selfCheck(b1, b2):
		// A build or CPU that computes a wrong digest must not name
		// package files by it: the digests are what the evidence binds.
		return false, "known-answer self-check failed"
	}
	return true, ""
}

// The known answers: SHA-256 of the bytes 0x00..0xff, and of 200 'a's,
// computed with sha256sum, not with this package or crypto/sha256.
const (
	katP = "40aff2e9d2d8922e47afd4648e6967497158785fbd1da870e7110266bf944880"
	katQ = "c2a908d98f5df987ade41b5fce213067efbcc21ef2240212a41e54b5e7c28ae5"
)

// selfCheck hashes the two known-answer inputs with b2 (three blocks of
// each, interleaved) and b1 (the fourth block of the first), and compares
// the digests with the constants.
func selfCheck(b1 blocks1Func, b2 blocks2Func) bool {
	p := make([]byte, 256)
	for i := range p {
		p[i] = byte(i)
	}
	q := []byte(strings.Repeat("a", 200))
	s, t := New(), New()
	b2(&s.h, &t.h, &p[0], &q[0], 3)
	s.n, t.n = 3*BlockSize, 3*BlockSize
	b1(&s.h, &p[3*BlockSize], 1)
	s.n += BlockSize
	gp, gq := Sum(&s, nil), Sum(&t, q[3*BlockSize:])
	return hex.EncodeToString(gp[:]) == katP && hex.EncodeToString(gq[:]) == katQ
}

// Blocks hashes p, whose length must be a multiple of BlockSize, into s.
func Blocks(s *State, p []byte) {
	n := len(p) / BlockSize
	if n*BlockSize != len(p) {
		panic("sha2x: Blocks of a partial block")
	}
	if n == 0 {
		return
	}
	if Available() {
		blocks1(&s.h, &p[0], n)
	} else {
		generic(s, p)
	}
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
	if Available() {
		blocks2(&s.h, &t.h, &p[0], &q[0], n)
	} else {
		generic(s, p)
		generic(t, q)
	}
	s.n += uint64(len(p))
	t.n += uint64(len(q))
}

// generic is the fallback block function: crypto/sha256's, reached
// through its marshalled state (s.n is a multiple of BlockSize, so the
// restored hash holds no partial block and Write runs whole blocks).
func generic(s *State, p []byte) {
	h := restore(s)
	h.Write(p)
	b, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic("sha2x: crypto/sha256 cannot marshal its state: " + err.Error())
	}
	for i := range s.h {
		s.h[i] = binary.BigEndian.Uint32(b[4+4*i:])
	}
}

// restore returns a crypto/sha256 hash in state s.
func restore(s *State) hash.Hash {
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
	return h
}

// Sum returns the SHA-256 of everything hashed into s followed by tail
// (shorter than a block or not: it is written through crypto/sha256).
func Sum(s *State, tail []byte) [sha256.Size]byte {
	h := restore(s)
	h.Write(tail)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
