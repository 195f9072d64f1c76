// Package cleanroom carries the synthetic data the demo runs on, embedded
// in the binary so `cleanroom demo` needs nothing but itself.
package cleanroom

import "embed"

// Demo holds testdata/demo: small documents the demo reads and canonicalises.
//
//go:embed testdata/demo
var Demo embed.FS
