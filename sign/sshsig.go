package sign

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Namespaces, one per purpose (AMBER-FORMATS "Keys"). A signature made in
// one never verifies in another.
const (
	NamespaceCaseManifest = "amber-case-manifest@cleanroom"
	NamespaceSummary      = "amber-summary@cleanroom"
	NamespaceRunRecord    = "amber-run-record@cleanroom"
	NamespaceReceipt      = "cleanroom-receipt@cleanroom"
)

// The SSHSIG wire format (OpenSSH PROTOCOL.sshsig):
//
//	blob   = "SSHSIG" uint32(1) string(publickey) string(namespace)
//	         string(reserved="") string(hash_algorithm) string(signature)
//	signed = "SSHSIG" string(namespace) string(reserved="")
//	         string(hash_algorithm) string(H(message))
//
// Armored as "-----BEGIN SSH SIGNATURE-----", base64 of blob wrapped at 70
// columns (as ssh-keygen writes it), "-----END SSH SIGNATURE-----", and a
// final newline.
const (
	sigMagic    = "SSHSIG"
	sigVersion  = 1
	hashAlg     = "sha512"
	armorBegin  = "-----BEGIN SSH SIGNATURE-----"
	armorEnd    = "-----END SSH SIGNATURE-----"
	armorColumn = 70
)

// Sign returns an armored SSHSIG signature over msg in namespace.
func (s *Signer) Sign(namespace string, msg []byte) ([]byte, error) {
	if namespace == "" {
		// PROTOCOL.sshsig: the namespace is mandatory; an empty one would
		// give a signature that is not bound to any purpose.
		return nil, fmt.Errorf("signing: %w: empty", errNamespace)
	}
	h := sha512.Sum512(msg)
	sig, err := ssh.NewSignerFromKey(s.priv)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	raw, err := sig.Sign(nil, signedData(namespace, h[:]))
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	var blob []byte
	blob = append(blob, sigMagic...)
	blob = binary.BigEndian.AppendUint32(blob, sigVersion)
	blob = appendString(blob, s.pub.Marshal())
	blob = appendString(blob, []byte(namespace))
	blob = appendString(blob, nil)
	blob = appendString(blob, []byte(hashAlg))
	blob = appendString(blob, ssh.Marshal(raw))
	return armor(blob), nil
}

func signedData(namespace string, digest []byte) []byte {
	var b []byte
	b = append(b, sigMagic...)
	b = appendString(b, []byte(namespace))
	b = appendString(b, nil)
	b = appendString(b, []byte(hashAlg))
	b = appendString(b, digest)
	return b
}

func appendString(b, s []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func armor(blob []byte) []byte {
	enc := base64.StdEncoding.EncodeToString(blob)
	var b bytes.Buffer
	b.WriteString(armorBegin + "\n")
	for len(enc) > armorColumn {
		b.WriteString(enc[:armorColumn] + "\n")
		enc = enc[armorColumn:]
	}
	b.WriteString(enc + "\n")
	b.WriteString(armorEnd + "\n")
	return b.Bytes()
}

// Signature is a decoded SSHSIG blob. Its fields are untrusted until Verify
// has returned nil.
type Signature struct {
	PublicKey     ssh.PublicKey
	Namespace     string
	HashAlgorithm string
	Sig           *ssh.Signature
}

// unarmor decodes the armor strictly: the begin line, base64 lines, the end
// line, an optional final newline, nothing else.
func unarmor(armored []byte) ([]byte, error) {
	if len(armored) > MaxSignature {
		return nil, fmt.Errorf("%w: signature over %d bytes", errTooLarge, MaxSignature)
	}
	s := string(armored)
	s = strings.TrimSuffix(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) < 3 || lines[0] != armorBegin || lines[len(lines)-1] != armorEnd {
		return nil, fmt.Errorf("%w: not an armored SSH SIGNATURE block", errMalformed)
	}
	var enc strings.Builder
	for _, l := range lines[1 : len(lines)-1] {
		// A carriage return or blank line would mean the armor was rewritten
		// on the way; refuse rather than guess.
		if l == "" || strings.ContainsAny(l, "\r \t") {
			return nil, fmt.Errorf("%w: unexpected whitespace in armor", errMalformed)
		}
		enc.WriteString(l)
	}
	blob, err := base64.StdEncoding.Strict().DecodeString(enc.String())
	if err != nil {
		return nil, fmt.Errorf("%w: base64: %w", errMalformed, err)
	}
	return blob, nil
}

// ParseSignature decodes an armored SSHSIG signature without verifying it.
func ParseSignature(armored []byte) (*Signature, error) {
	blob, err := unarmor(armored)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(blob, []byte(sigMagic)) {
		return nil, fmt.Errorf("%w: no SSHSIG magic", errMalformed)
	}
	r := blob[len(sigMagic):]
	if len(r) < 4 {
		return nil, fmt.Errorf("%w: truncated", errMalformed)
	}
	if v := binary.BigEndian.Uint32(r); v != sigVersion {
		return nil, fmt.Errorf("%w: version %d", errMalformed, v)
	}
	r = r[4:]
	var fields [5][]byte
	for i := range fields {
		var ok bool
		fields[i], r, ok = readString(r)
		if !ok {
			return nil, fmt.Errorf("%w: truncated field %d", errMalformed, i)
		}
	}
	// Trailing bytes would be unsigned data riding along with the signature.
	if len(r) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errMalformed, len(r))
	}
	pub, err := ssh.ParsePublicKey(fields[0])
	if err != nil {
		return nil, fmt.Errorf("%w: public key: %w", errMalformed, err)
	}
	// ssh-keygen refuses a non-empty reserved field; accepting it would let
	// this verifier and the stock one disagree about the same signature.
	if len(fields[2]) != 0 {
		return nil, fmt.Errorf("%w: reserved field not empty", errMalformed)
	}
	var sig ssh.Signature
	if err := ssh.Unmarshal(fields[4], &sig); err != nil {
		return nil, fmt.Errorf("%w: signature: %w", errMalformed, err)
	}
	// Bytes after the signature inside its field are unsigned and make the
	// same signature verify in many spellings; ssh-keygen refuses them.
	if len(sig.Rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the signature in its field", errMalformed, len(sig.Rest))
	}
	return &Signature{
		PublicKey:     pub,
		Namespace:     string(fields[1]),
		HashAlgorithm: string(fields[3]),
		Sig:           &sig,
	}, nil
}

func readString(b []byte) (s, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := binary.BigEndian.Uint32(b)
	// A length past the end of the blob (a hostile one) must not be sliced.
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, false
	}
	return b[4 : 4+n], b[4+n:], true
}

// Verify checks that armored is an SSHSIG signature over msg, made by pub,
// for namespace, with hash sha512. It returns nil or a *VerifyError whose Err
// is one of the package's sentinels. Only after Verify returns nil may the
// caller parse msg.
func Verify(pub ssh.PublicKey, namespace string, msg, armored []byte) error {
	want := Fingerprint(pub)
	fail := func(got string, err error) error {
		return &VerifyError{Want: want, Got: got, Namespace: namespace, Err: err}
	}
	sig, err := ParseSignature(armored)
	if err != nil {
		return fail("", err)
	}
	got := Fingerprint(sig.PublicKey)
	// The key inside the signature is attacker-chosen: it must be the
	// expected key byte for byte, or any key could vouch for itself.
	if !bytes.Equal(sig.PublicKey.Marshal(), pub.Marshal()) {
		return fail(got, errWrongKey)
	}
	// The namespace binds the signature to one purpose (a manifest signature
	// must not pass as a run record's).
	if sig.Namespace != namespace {
		return fail(got, fmt.Errorf("%w: signature says %q", errNamespace, sig.Namespace))
	}
	// Pin the hash: a verifier that follows the signature's choice lets the
	// signer pick a weaker one.
	if sig.HashAlgorithm != hashAlg {
		return fail(got, fmt.Errorf("%w: %q", errHashAlgorithm, sig.HashAlgorithm))
	}
	// Only Ed25519, and a signature format that is the key's own: no
	// algorithm the signature names is trusted over the one expected.
	if pub.Type() != ssh.KeyAlgoED25519 || sig.Sig.Format != ssh.KeyAlgoED25519 {
		return fail(got, fmt.Errorf("%w: signature format %q", errKeyType, sig.Sig.Format))
	}
	if len(sig.Sig.Blob) != ed25519.SignatureSize {
		return fail(got, fmt.Errorf("%w: Ed25519 signature of %d bytes", errMalformed, len(sig.Sig.Blob)))
	}
	h := sha512.Sum512(msg)
	if err := pub.Verify(signedData(namespace, h[:]), sig.Sig); err != nil {
		return fail(got, errBadSignature)
	}
	return nil
}
