package amber

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/sign"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// errNotRegular refuses a path that is a symlink, FIFO, device or directory
// where a file is expected. It is evidence's sentinel, so a refusal of
// readCapped (made by evidence's bounded reader) and of openRegular is the
// same error.
var errNotRegular = evidence.ErrNotRegular

// errTooLarge refuses a file over its cap.
var errTooLarge = fault.New(fault.Refused, "file over the size cap")

// openRegular opens path for reading without following a final symlink and
// checks on the descriptor that it is a regular file: a FIFO could block
// forever and a symlink could point the check at one file and the use at
// another.
func openRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w (%s)", path, errNotRegular, fi.Mode().Type())
	}
	return f, fi, nil
}

// openNoFollow opens path for reading, refusing a final symbolic link
// (errNotRegular: a link could point the check at one file and the use at
// another) and not waiting on a FIFO (O_NONBLOCK: opening one would block
// until a writer came). Whether it is a regular file is the caller's
// fstat.
func openNoFollow(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s: %w (symbolic link)", path, errNotRegular)
	}
	return f, err
}

// readCapped reads a whole regular file of at most max bytes, opened
// without following a final symbolic link (openNoFollow) and read by
// evidence's one bounded reader, whose fstat refuses anything but a
// regular file (errNotRegular); a longer file, or one that grows past max
// while read, is errTooLarge.
func readCapped(path string, max int64) ([]byte, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := evidence.ReadOpenRegularFile(f, max)
	if errors.Is(err, evidence.ErrFileTooLarge) {
		return nil, fmt.Errorf("%w: %w", errTooLarge, err)
	}
	return b, err
}

// hashFile returns the sha256 (lowercase hex) and size of a regular file,
// copying the bytes it hashed to w when w is not nil, so a later reader uses
// exactly the bytes that were hashed.
func hashFile(path string, w io.Writer) (string, int64, error) {
	f, _, err := openRegular(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	return hashOpen(f, w)
}

// hashOpen is hashFile of the open regular file f (named f.Name() in
// errors).
func hashOpen(f *os.File, w io.Writer) (string, int64, error) {
	h := sha256.New()
	dst := io.Writer(h)
	if w != nil {
		dst = io.MultiWriter(h, w)
	}
	n, err := io.Copy(dst, f)
	if err != nil {
		return "", 0, fmt.Errorf("reading %s: %w", f.Name(), err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// copyHashed copies the regular file at path to a new file dst (created
// exclusively, mode 0600) and returns the sha256 and size of the bytes
// copied: whoever reads dst afterwards reads exactly what was hashed, not
// whatever path holds by then.
func copyHashed(path, dst string) (string, int64, error) {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", 0, err
	}
	bw := bufio.NewWriter(f)
	sum, size, err := hashFile(path, bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return sum, size, err
}

// syncFile syncs a file written in a staging directory.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func encodeB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// writeSigned signs b in namespace and writes path and path+".sig", each
// atomically (the document first: a signature never names bytes that are
// not there).
func writeSigned(path string, b []byte, signer *sign.Signer, namespace string) error {
	sig, err := signer.Sign(namespace, b)
	if err != nil {
		return err
	}
	if err := durable.ReplaceFile(path, b, 0o644); err != nil {
		return err
	}
	return durable.ReplaceFile(path+".sig", sig, 0o644)
}

// readSigned reads path (at most max bytes) and verifies path+".sig" over
// its exact bytes with pub in namespace, before anything parses them. A
// failure is a *CheckError named check.
func readSigned(path string, max int64, pub ssh.PublicKey, namespace, check string) ([]byte, error) {
	b, err := readCapped(path, max)
	if err != nil {
		return nil, &CheckError{Check: check, File: path, Err: err}
	}
	sig, err := readCapped(path+".sig", sign.MaxSignature)
	if err != nil {
		return nil, &CheckError{Check: check, File: path + ".sig", Err: err}
	}
	if err := sign.Verify(pub, namespace, b, sig); err != nil {
		return nil, &CheckError{Check: check, File: path + ".sig", Err: err}
	}
	return b, nil
}
