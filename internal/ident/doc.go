// Package ident is the one parser of the text forms of cleanroom's
// identities: a SHA-256 digest as cleanroom writes it (64 lowercase hex
// digits, never upper case: one identity has one spelling, so comparing
// strings compares identities) and the three prefixed forms, srel-<digest>
// (a release), bpkg-<digest> (a blind package) and brun-<digest> (a run).
//
// It only checks forms. Computing an identity belongs to its owner
// (experiment for srel and brun, pkgwalk for bpkg), over evidence.Canonical
// bytes.
package ident
