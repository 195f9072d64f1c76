// Package cleanroom carries the synthetic data the demo runs on, embedded
// in the binary so `cleanroom demo` needs nothing but itself.
package cleanroom

import "embed"

// Demo holds testdata/demo: small documents the demo reads and canonicalises.
//
//go:embed testdata/demo
var Demo embed.FS

// World holds testdata/world: the synthetic, TRVM-shaped world (a release
// package of the toy protocol TOY-TALLY-v1, its committed holdout, the
// reference adapter and the candidate the scripted implementer writes).
//
//go:embed all:testdata/world
var World embed.FS
