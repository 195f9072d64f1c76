package sign

import (
	"errors"
	"fmt"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// Rules a key or a signature can break. Unexported: no caller outside sign
// branches on one (the package's tests do); a caller sees the rule's text
// in the error, and its class through fault.
var (
	errMalformed     = fault.New(fault.Refused, "malformed SSHSIG signature")
	errTooLarge      = fault.New(fault.Refused, "input larger than the cap")
	errNamespace     = fault.New(fault.Refused, "signature namespace is empty or not the expected one")
	errHashAlgorithm = fault.New(fault.Refused, "signature hash algorithm is not sha512")
	errWrongKey      = fault.New(fault.Refused, "signature made by another key")
	errBadSignature  = fault.New(fault.Refused, "signature does not verify")
	errKeyType       = errors.New("key is not Ed25519")
	errEncryptedKey  = errors.New("private key is encrypted")
	errKeyExists     = fault.New(fault.Unusable, "key file already exists")
)

// VerifyError reports why a signature was refused and names the key that was
// expected and, when the signature could be decoded, the key that signed it.
type VerifyError struct {
	Want      string // fingerprint of the expected key ("SHA256:…")
	Got       string // fingerprint of the key inside the signature, if decoded
	Namespace string // the namespace the caller expected
	Err       error  // one of the sentinels above
}

func (e *VerifyError) Error() string {
	s := fmt.Sprintf("signature for namespace %q, key %s: %v", e.Namespace, e.Want, e.Err)
	if e.Got != "" && e.Got != e.Want {
		s += fmt.Sprintf(" (signed by %s)", e.Got)
	}
	return s
}

func (e *VerifyError) Unwrap() error { return e.Err }

// KeyError reports a key file that cannot be used.
type KeyError struct {
	Path string
	Err  error
}

func (e *KeyError) Error() string { return fmt.Sprintf("key %s: %v", e.Path, e.Err) }

func (e *KeyError) Unwrap() error { return e.Err }

// FaultClass is Refused (internal/fault): a signature was read and does not verify.
func (*VerifyError) FaultClass() fault.Class { return fault.Refused }

// FaultClass is Refused (internal/fault): a key file was read and is not a
// usable key; Unusable when it could not be read at all (not a regular file).
func (e *KeyError) FaultClass() fault.Class { return fault.RuleClass(e.Err) }
