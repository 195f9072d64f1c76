// Package sign owns cleanroom's signing keys and detached signatures.
//
// Keys are OpenSSH Ed25519 key pairs: the private key in the OpenSSH PEM
// format ("-----BEGIN OPENSSH PRIVATE KEY-----", unencrypted, readable by
// ssh-keygen), the public key as one authorized_keys line in PATH.pub. A key
// is named by its SHA256 fingerprint exactly as `ssh-keygen -l` prints it
// ("SHA256:" followed by unpadded base64), which is what AMBER manifests call
// signing_key_id.
//
// Signatures are SSHSIG (OpenSSH PROTOCOL.sshsig, the `ssh-keygen -Y sign`
// format): armored, detached, hash sha512, over the exact bytes given. Every
// signature this package makes verifies with stock
//
//	ssh-keygen -Y verify -f allowed_signers -I IDENTITY -n NAMESPACE -s X.sig < X
//
// and a signature made by `ssh-keygen -Y sign` with an Ed25519 key and hash
// sha512 verifies here.
//
// The package refuses: keys other than Ed25519, encrypted private keys,
// signatures over another hash than sha512, another namespace, another key,
// a reserved field that is not empty, trailing data after the armor or the
// blob, and inputs larger than the caps below.
//
// # Security Considerations
//
// The namespace is part of the signed data, so a signature made for one
// purpose (a manifest, a summary, a run record, a receipt) never verifies for
// another; callers must always pass the namespace they expect, never the one
// found in the signature. Verify checks the signature before anything else
// reads the message: callers parse a document only after Verify returned nil
// over its raw bytes, and never re-encode it before verifying. Verify compares
// the public key embedded in the signature with the expected key byte for byte
// before using it, so a signature carrying its own key cannot vouch for itself.
package sign
