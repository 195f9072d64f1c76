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
// NIST vectors.
//
// The guard rails are those of Go's own SHA-NI code. The assembly runs only
// when Available reports true, which it decides once, at first use:
//
//   - the CPU must report SHA-NI, SSSE3 and SSE4.1 (CPUID); on other CPUs
//     and architectures the assembly is never executed;
//   - the build tag purego compiles the assembly out altogether;
//   - the environment variable CLEANROOM_SHA2X=off turns it off at run
//     time (any other value, or none, leaves it on);
//   - a known-answer self-check hashes two fixed inputs with both assembly
//     block functions and compares the digests with constants: on a
//     mismatch (a miscompiled build, a faulty CPU or emulator) the package
//     falls back.
//
// When Available is false, Blocks and Blocks2 still give the right state:
// they run crypto/sha256's block function instead, through the same
// marshalling. Callers that want speed (the package walk) check Available
// and otherwise hash one stream at a time with crypto/sha256 directly.
package sha2x
