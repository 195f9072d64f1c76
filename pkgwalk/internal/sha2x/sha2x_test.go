package sha2x_test

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"github.com/cleanroom-dev/cleanroom/pkgwalk/internal/sha2x"
)

func need(t testing.TB) {
	if !sha2x.Available() {
		t.Skipf("sha2x runs %s here", sha2x.Implementation())
	}
}

// implementations runs f once with the assembly (where this process uses
// it) and once with the crypto/sha256 fallback, which runs on every
// machine, SHA-NI or not.
func implementations(t *testing.T, f func(t *testing.T)) {
	t.Run("sha-ni", func(t *testing.T) {
		need(t)
		f(t)
	})
	t.Run("fallback", func(t *testing.T) {
		sha2x.ForceFallback(t)
		if sha2x.Available() {
			t.Fatal("ForceFallback left the assembly on")
		}
		f(t)
	})
}

// hashPair hashes p and q the way the package walk does: whole blocks of
// both together, the rest of the longer one alone, the tails through Sum.
func hashPair(p, q []byte) (a, b [32]byte) {
	s, t := sha2x.New(), sha2x.New()
	common := min(len(p), len(q)) / sha2x.BlockSize * sha2x.BlockSize
	sha2x.Blocks2(&s, &t, p[:common], q[:common])
	restP := (len(p) - common) / sha2x.BlockSize * sha2x.BlockSize
	restQ := (len(q) - common) / sha2x.BlockSize * sha2x.BlockSize
	sha2x.Blocks(&s, p[common:common+restP])
	sha2x.Blocks(&t, q[common:common+restQ])
	return sha2x.Sum(&s, p[common+restP:]), sha2x.Sum(&t, q[common+restQ:])
}

// Every pair of lengths around the block and padding boundaries, and
// longer random ones, gives crypto/sha256's digest for both streams.
func TestAgainstCryptoSHA256(t *testing.T) {
	// Not parallel: it reads or forces the package-wide choice of
	// implementation (ForceFallback), which parallel tests would see change.
	implementations(t, againstCryptoSHA256)
}

func againstCryptoSHA256(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 1<<20+300)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4096 + 17, 65536, 1<<20 + 5}
	if !testing.Short() {
		// -short (the purego run in make test, whose crypto/sha256 is
		// pure Go too) keeps the boundary lengths only.
		for i := 0; i < 20; i++ {
			lengths = append(lengths, rng.IntN(200_000))
		}
	}
	for _, lp := range lengths {
		for _, lq := range lengths {
			p := buf[:lp]
			q := buf[len(buf)-min(lq, len(buf)):] // different bytes from p
			q = q[:lq]
			a, b := hashPair(p, q)
			if want := sha256.Sum256(p); a != want {
				t.Fatalf("len %d (paired with %d): %x, crypto/sha256 %x", lp, lq, a, want)
			}
			if want := sha256.Sum256(q); b != want {
				t.Fatalf("len %d (paired with %d): %x, crypto/sha256 %x", lq, lp, b, want)
			}
		}
	}
}

// The FIPS 180-2 example digests, written out (not computed).
func TestKnownVectors(t *testing.T) {
	// Not parallel: it reads or forces the package-wide choice of
	// implementation (ForceFallback), which parallel tests would see change.
	implementations(t, knownVectors)
}

func knownVectors(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
	}
	for _, a := range cases {
		for _, b := range cases {
			// Pad both to a whole number of blocks plus the vector, so
			// Blocks2 runs: a block of zeros before each vector changes
			// the digest, so compare with crypto/sha256 of the same input.
			ga, gb := hashPair([]byte(a.in), []byte(b.in))
			if hex.EncodeToString(ga[:]) != a.want || hex.EncodeToString(gb[:]) != b.want {
				t.Errorf("%q, %q: %x %x", a.in, b.in, ga, gb)
			}
		}
	}
}

// Blocks2 panics on unequal or partial inputs rather than hashing a
// prefix silently.
func TestBlocks2Misuse(t *testing.T) {
	// Not parallel: it reads or forces the package-wide choice of
	// implementation (ForceFallback), which parallel tests would see change.
	implementations(t, blocks2Misuse)
}

func blocks2Misuse(t *testing.T) {
	for _, c := range []struct{ p, q int }{{64, 128}, {63, 63}, {100, 100}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Blocks2(%d, %d) did not panic", c.p, c.q)
				}
			}()
			s, u := sha2x.New(), sha2x.New()
			sha2x.Blocks2(&s, &u, make([]byte, c.p), make([]byte, c.q))
		}()
	}
}

func BenchmarkCryptoSHA256(b *testing.B) {
	buf := make([]byte, 64<<10)
	b.SetBytes(int64(len(buf)))
	h := sha256.New()
	for b.Loop() {
		h.Write(buf)
	}
}

func BenchmarkBlocks(b *testing.B) {
	need(b)
	buf := make([]byte, 64<<10)
	b.SetBytes(int64(len(buf)))
	s := sha2x.New()
	for b.Loop() {
		sha2x.Blocks(&s, buf)
	}
}

// BenchmarkBlocks2 reports the bytes of both streams.
func BenchmarkBlocks2(b *testing.B) {
	need(b)
	p, q := make([]byte, 64<<10), make([]byte, 64<<10)
	b.SetBytes(int64(len(p) + len(q)))
	s, t := sha2x.New(), sha2x.New()
	for b.Loop() {
		sha2x.Blocks2(&s, &t, p, q)
	}
}

// FuzzAgainstCryptoSHA256: any two inputs, hashed as a pair, give
// crypto/sha256's digests (go test -fuzz FuzzAgainstCryptoSHA256 explores
// further; the seeds run with every go test).
func FuzzAgainstCryptoSHA256(f *testing.F) {
	f.Add([]byte{}, []byte("abc"))
	f.Add(make([]byte, 55), make([]byte, 56))
	f.Add(make([]byte, 64), make([]byte, 128+63))
	f.Add([]byte("The quick brown fox jumps over the lazy dog"), make([]byte, 1000))
	f.Fuzz(func(t *testing.T, p, q []byte) {
		implementations(t, func(t *testing.T) {
			a, b := hashPair(p, q)
			if want := sha256.Sum256(p); a != want {
				t.Fatalf("len %d: %x, crypto/sha256 %x", len(p), a, want)
			}
			if want := sha256.Sum256(q); b != want {
				t.Fatalf("len %d: %x, crypto/sha256 %x", len(q), b, want)
			}
		})
	})
}
