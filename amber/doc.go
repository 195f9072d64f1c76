// Package amber builds, signs, indexes, verifies and runs AMBER evaluation
// cases (AMBER Distribution Protocol v0.3; the decisions the protocol leaves
// open are cleanroom's, recorded in the README's AMBER guide).
//
// A case is four files: base.bundle (git bundle v3 of the history reachable
// from the cutoff commit, through one temporary ref refs/cleanroom/cutoff,
// never --all, no tags, no notes), oracle.pack (a deterministic tar of the
// oracle directory), manifest.yaml (exactly the amber-manifest-0.1 fields)
// and manifest.yaml.sig (SSHSIG, namespace amber-case-manifest@cleanroom).
// The package also owns the public index (an RFC 6962 Merkle log with a
// C2SP signed checkpoint), the redacted summary, the run record and the
// comparability and adjudication rules.
//
// It refuses: shallow and partial-clone sources; a cutoff whose history
// reaches a submodule or whose tree holds LFS content; pinned files (spec,
// protocol) that are not UTF-8 with LF and no BOM; oracle directories with
// anything but regular files and directories; manifests that break the
// schema's rules, carry unknown or duplicate keys, a second document,
// anchors, aliases or non-core tags; bundles whose header is not v3 with one
// ref and no prerequisites.
//
// Only the git command is used (forge-neutral); every git command runs
// without GIT_* variables from the caller and without system configuration,
// and the receiver's scratch repository also without user configuration.
//
// # Security Considerations
//
// Verification is ordered so that nothing is parsed before it is
// authenticated: the manifest signature is checked over the raw bytes first,
// and only then is the manifest read; bundle and oracle hashes are compared
// with the signed values before git reads them, and git reads a private copy
// made while hashing, so the bytes checked are the bytes used. `git bundle
// verify` accepts a corrupted pack and a bundle from a shallow clone, so a
// fetch with transfer.fsckObjects and `git fsck --full --strict` follow it in
// a scratch repository; git's messages are never parsed, only exit codes.
// The manifest is signed in namespace amber-case-manifest@cleanroom, so a
// summary or run-record signature made by the same key never passes for it.
package amber
