// Package sha2x computes SHA-256 of two independent byte streams at once on
// one core, with the x86 SHA extensions (SHA-NI). It exists for the package
// walk, whose cost is hashing: SHA256RNDS2 is limited by its latency, so
// one core running the rounds of two streams interleaved hashes nearly
// twice as many bytes as one stream (on the AMD EPYC this was written on:
// about 2.6–3.2 GB/s per core for the pair, 1.8 GB/s for crypto/sha256 or
// OpenSSL hashing one stream; go test -bench . shows both).
//
// Only the block function is ours: padding and the final digest are
// crypto/sha256's (Sum restores the state into a crypto/sha256 hash through
// its documented binary marshalling and writes the tail). Every result is
// checked against crypto/sha256 by the tests, on random lengths and on the
// NIST vectors. Available is false on CPUs without SHA-NI and on other
// architectures; callers then use crypto/sha256 directly.
package sha2x
