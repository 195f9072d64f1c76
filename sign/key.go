package sign

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"golang.org/x/crypto/ssh"
)

// Caps on what this package reads. A private or public key file is a few
// hundred bytes; the caps keep a hostile path (a device, a huge file) from
// exhausting memory.
const (
	maxKeyFile = 16 << 10
	// MaxSignature caps an armored signature.
	MaxSignature = 16 << 10
)

// Signer signs with an Ed25519 private key loaded from an OpenSSH key file.
type Signer struct {
	priv ed25519.PrivateKey
	pub  ssh.PublicKey
}

// GenerateKey writes a new Ed25519 key pair: the private key to path (mode
// 0600, OpenSSH PEM format, unencrypted) and the public key to path+".pub"
// as one authorized_keys line. Neither file may exist already; a
// half-written pair is removed.
func GenerateKey(path string) error { return GenerateKeyWithComment(path, "") }

// GenerateKeyWithComment is GenerateKey with a comment in both files.
func GenerateKeyWithComment(path, comment string) error {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("generating key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return fmt.Errorf("encoding private key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return fmt.Errorf("encoding public key: %w", err)
	}
	pubLine := bytes.TrimSuffix(ssh.MarshalAuthorizedKey(sshPub), []byte("\n"))
	if comment != "" {
		pubLine = append(pubLine, ' ')
		pubLine = append(pubLine, comment...)
	}
	pubLine = append(pubLine, '\n')
	if err := writeNew(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return err
	}
	if err := writeNew(path+".pub", pubLine, 0o644); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// writeNew creates path exclusively through the durable writer (never
// replacing a key: overwriting a signing key loses it for good).
func writeNew(path string, b []byte, mode os.FileMode) error {
	if err := durable.CreateFile(path, b, mode); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return &KeyError{Path: path, Err: errKeyExists}
		}
		return fmt.Errorf("creating %s: %w", path, err)
	}
	return nil
}

// LoadSigner reads an unencrypted OpenSSH Ed25519 private key (as written by
// GenerateKey or `ssh-keygen -t ed25519 -N ""`).
func LoadSigner(path string) (*Signer, error) {
	// The one bounded reader: a FIFO named as a key is refused instead of
	// waited on, a device instead of read without end; its errors name
	// the file and carry its rule (evidence.ErrNotRegular, ErrFileTooLarge).
	b, err := evidence.ReadRegularFile(path, maxKeyFile)
	if err != nil {
		return nil, err
	}
	return ParseSigner(path, b)
}

// ParseSigner is LoadSigner over bytes already read; name labels errors.
func ParseSigner(name string, b []byte) (*Signer, error) {
	raw, err := ssh.ParseRawPrivateKey(b)
	if err != nil {
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			return nil, &KeyError{Path: name, Err: errEncryptedKey}
		}
		return nil, &KeyError{Path: name, Err: err}
	}
	var priv ed25519.PrivateKey
	switch k := raw.(type) {
	case *ed25519.PrivateKey:
		priv = *k
	case ed25519.PrivateKey:
		priv = k
	default:
		return nil, &KeyError{Path: name, Err: fmt.Errorf("%w (%T)", errKeyType, raw)}
	}
	// Length-check before use: ed25519 functions panic on a wrong length.
	if len(priv) != ed25519.PrivateKeySize {
		return nil, &KeyError{Path: name, Err: fmt.Errorf("%w: private key of %d bytes", errKeyType, len(priv))}
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		return nil, &KeyError{Path: name, Err: err}
	}
	return &Signer{priv: priv, pub: pub}, nil
}

// PublicKey returns the signer's public key.
func (s *Signer) PublicKey() ssh.PublicKey { return s.pub }

// Fingerprint returns the signer's key fingerprint ("SHA256:…").
func (s *Signer) Fingerprint() string { return Fingerprint(s.pub) }

// Fingerprint returns the SHA256 fingerprint of pub as `ssh-keygen -l`
// prints it: "SHA256:" and the unpadded base64 of the key blob's SHA-256.
func Fingerprint(pub ssh.PublicKey) string { return ssh.FingerprintSHA256(pub) }

// LoadPublicKey reads a public key file holding one authorized_keys line
// (PATH.pub as GenerateKey or ssh-keygen writes it). Only Ed25519 is accepted.
func LoadPublicKey(path string) (ssh.PublicKey, error) {
	b, err := evidence.ReadRegularFile(path, maxKeyFile) // as LoadSigner
	if err != nil {
		return nil, err
	}
	return ParsePublicKey(path, b)
}

// ParsePublicKey parses one authorized_keys line; name labels errors.
func ParsePublicKey(name string, b []byte) (ssh.PublicKey, error) {
	pub, _, _, rest, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		return nil, &KeyError{Path: name, Err: err}
	}
	// One key per file: a second line would make "the key" ambiguous.
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, &KeyError{Path: name, Err: errors.New("more than one key line")}
	}
	if pub.Type() != ssh.KeyAlgoED25519 {
		return nil, &KeyError{Path: name, Err: fmt.Errorf("%w (%s)", errKeyType, pub.Type())}
	}
	return pub, nil
}

// AllowedSignersLine returns one line of an OpenSSH allowed_signers file
// (ssh-keygen(1) ALLOWED SIGNERS) for identity, restricted to namespaces when
// any are given.
func AllowedSignersLine(identity string, pub ssh.PublicKey, namespaces ...string) string {
	var b strings.Builder
	b.WriteString(identity)
	if len(namespaces) > 0 {
		fmt.Fprintf(&b, ` namespaces="%s"`, strings.Join(namespaces, ","))
	}
	b.WriteByte(' ')
	b.Write(bytes.TrimSuffix(ssh.MarshalAuthorizedKey(pub), []byte("\n")))
	b.WriteByte('\n')
	return b.String()
}
