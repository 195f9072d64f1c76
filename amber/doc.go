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
// C2SP signed checkpoint and C2SP tlog-proofs), the redacted summary, the
// runner, the run record, and the comparability and adjudication rules.
//
// It refuses: shallow and partial-clone sources; a cutoff whose history
// reaches a submodule or whose tree holds LFS content; pinned files (spec,
// protocol) that are not UTF-8 with LF and no BOM; oracle directories with
// anything but regular files and directories; manifests that break the
// schema's rules, carry unknown or duplicate keys, a second document,
// anchors, aliases or non-core tags; bundles whose header is not v3 with one
// ref and no prerequisites; index entries that are not the canonical seven
// fields, histories that are edited, reordered, truncated or rewritten,
// entries after the signed checkpoint (an interrupted append or unsigned
// lines: refused on reading, discarded by the key holder's next write), and
// checkpoints not signed by the index key; runs of cases that are not in the
// index or are retired.
//
// Only the git command is used (forge-neutral); every git command runs
// without GIT_* variables from the caller and without system configuration,
// and the receiver's scratch repository and the candidate's workspace also
// without user configuration.
//
// # Security Considerations
//
// Verification is ordered so that nothing is parsed before it is
// authenticated: the manifest, summary and record signatures are checked
// over the raw bytes first; a checkpoint's note signature before its body is
// read; a tlog-proof's inclusion before its entry is parsed. Bundle and
// oracle hashes are compared with the signed values before git or the
// evaluator reads them, and they read the very bytes hashed (a private copy
// for git, an in-memory unpack for the oracle). `git bundle verify` accepts
// a corrupted pack and a bundle from a shallow clone, so a fetch with
// transfer.fsckObjects and `git fsck --full --strict` follow it in a scratch
// repository; git's messages are never parsed, only exit codes. Each
// document kind has its own SSHSIG namespace, so a signature made for one
// never passes for another.
//
// The runner never runs git or anything else on the host inside the
// candidate's workspace after the candidate ran (its .git/config is the
// candidate's to write: core.fsmonitor would run code); artifacts are hashed
// by walking the tree without following links. The oracle is unpacked into
// the sandbox's sealed read-only tmpfs and evaluated in a second container
// with no network, after the candidate's container is gone. What the runner
// does not prove: that the host did not change the candidate's network
// namespace between the probe and the run (package sandbox checks it is the
// same namespace), or that a candidate did not learn the answer from its
// model's training data — that is what the leak check and adjudication are
// for. A suspected leak is not detected automatically: adjudicate applies
// the leak window once a leak date is known.
package amber
