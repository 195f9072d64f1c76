package amber

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// Rules an oracle directory or an oracle.pack can break.
var (
	errPackFileType = fault.New(fault.Refused, "only regular files and directories may be packed")
	errPackName     = fault.New(fault.Refused, "path not allowed in an oracle pack")
	errPackTooLarge = fault.New(fault.Refused, "oracle pack over the cap")
	errPackChanged  = fault.New(fault.Refused, "file changed while it was packed")
	errPackEntry    = fault.New(fault.Refused, "oracle pack entry not in the deterministic form")
)

// Caps on an oracle pack: the oracle holds tests, a rubric and evaluator
// materials, not datasets.
const (
	MaxPackBytes   = 1 << 30
	MaxPackEntries = 100_000
)

// PackError names the path inside the oracle and the rule it broke.
type PackError struct {
	Path string
	Err  error
}

func (e *PackError) Error() string { return fmt.Sprintf("oracle %q: %v", e.Path, e.Err) }
func (e *PackError) Unwrap() error { return e.Err }

// packEpoch is the fixed modification time of every entry.
var packEpoch = time.Unix(0, 0).UTC()

// WritePack writes the deterministic tar of the directory dir to w: entries
// sorted by path (bytewise), directories as "name/", uid/gid 0, no user or
// group names, mtime 1970-01-01T00:00:00Z, mode 0755 for directories and
// executables (any x bit), 0644 for other files. The same tree gives the
// same bytes, so oracle_pack_sha256 names the oracle's content only.
//
// Every entry is opened under a descriptor for dir (os.Root), never by a
// joined path, and a symbolic link, device, FIFO or socket is refused rather
// than followed or skipped: a link could pull a file from outside the oracle
// into the sealed pack.
func WritePack(dir string, w io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening oracle directory: %w", err)
	}
	defer root.Close()
	var names []string
	var walk func(rel string) error
	walk = func(rel string) error {
		d, err := root.Open(dirName(rel))
		if err != nil {
			return &PackError{Path: rel, Err: err}
		}
		entries, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			return &PackError{Path: rel, Err: err}
		}
		for _, e := range entries {
			name := path.Join(rel, e.Name())
			if !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
				return &PackError{Path: name, Err: errPackName}
			}
			switch {
			case e.Type().IsDir():
				names = append(names, name+"/")
				if err := walk(name); err != nil {
					return err
				}
			case e.Type().IsRegular():
				names = append(names, name)
			default:
				return &PackError{Path: name, Err: fmt.Errorf("%w (%s)", errPackFileType, e.Type())}
			}
			if len(names) > MaxPackEntries {
				return &PackError{Path: name, Err: fmt.Errorf("%w: more than %d entries", errPackTooLarge, MaxPackEntries)}
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return err
	}
	slices.Sort(names)
	tw := tar.NewWriter(w)
	var total int64
	for _, name := range names {
		if strings.HasSuffix(name, "/") {
			if err := tw.WriteHeader(packHeader(name, 0o755, 0)); err != nil {
				return &PackError{Path: name, Err: err}
			}
			continue
		}
		hdr := packHeader(name, 0, 0)
		n, err := packFile(root, tw, hdr, MaxPackBytes-total)
		if err != nil {
			return err
		}
		total += n
	}
	return tw.Close()
}

func dirName(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// packFile opens name without following a final symlink, checks on the
// descriptor that it is still a regular file, and copies exactly the size it
// had, failing if the file grew or shrank meanwhile.
func packFile(root *os.Root, tw *tar.Writer, hdr *tar.Header, budget int64) (int64, error) {
	f, err := root.OpenFile(hdr.Name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, &PackError{Path: hdr.Name, Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, &PackError{Path: hdr.Name, Err: err}
	}
	// The entry may have been swapped for a FIFO or device between the
	// listing and the open; the descriptor tells the truth.
	if !fi.Mode().IsRegular() {
		return 0, &PackError{Path: hdr.Name, Err: fmt.Errorf("%w (%s)", errPackFileType, fi.Mode().Type())}
	}
	if fi.Size() > budget {
		return 0, &PackError{Path: hdr.Name, Err: fmt.Errorf("%w: over %d bytes in total", errPackTooLarge, MaxPackBytes)}
	}
	mode := int64(0o644)
	if fi.Mode().Perm()&0o111 != 0 {
		mode = 0o755
	}
	*hdr = *packHeader(hdr.Name, mode, fi.Size())
	if err := tw.WriteHeader(hdr); err != nil {
		return 0, &PackError{Path: hdr.Name, Err: err}
	}
	n, err := io.Copy(tw, io.LimitReader(f, fi.Size()+1))
	if err != nil || n != fi.Size() {
		return 0, &PackError{Path: hdr.Name, Err: fmt.Errorf("%w: %w", errPackChanged, err)}
	}
	return n, nil
}

// packHeader is the one header form of a pack entry: directories end in
// "/" (mode 0755), files have mode 0644 or 0755; uid/gid 0, no names,
// mtime 0.
func packHeader(name string, mode, size int64) *tar.Header {
	h := &tar.Header{Name: name, Mode: mode, Size: size, ModTime: packEpoch, Format: tar.FormatPAX, Typeflag: tar.TypeReg}
	if strings.HasSuffix(name, "/") {
		h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
	}
	return h
}

// PackEntry is one entry of an oracle pack.
type PackEntry struct {
	Name string
	Dir  bool
	Mode int64
	Data []byte
}

// ReadPack reads an oracle pack and refuses any entry WritePack would not
// have written: other types, absolute or dot-dot paths, names out of order
// or repeated, owners, times or modes outside the fixed values.
func ReadPack(r io.Reader) ([]PackEntry, error) {
	in := sha256.New()
	tee := io.TeeReader(r, in)
	entries, err := readPackEntries(tee)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return nil, err
	}
	// The parser re-formats what it read and compares: anything a header
	// can carry that the checks above missed (PAX records, a missing or
	// extra end-of-archive block, trailing data) makes the bytes differ.
	out := sha256.New()
	tw := tar.NewWriter(out)
	for _, e := range entries {
		name, mode := e.Name, e.Mode
		if e.Dir {
			name += "/"
		}
		if err := tw.WriteHeader(packHeader(name, mode, int64(len(e.Data)))); err != nil {
			return nil, &PackError{Path: e.Name, Err: err}
		}
		if _, err := tw.Write(e.Data); err != nil {
			return nil, &PackError{Path: e.Name, Err: err}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, &PackError{Path: "", Err: err}
	}
	if !bytes.Equal(in.Sum(nil), out.Sum(nil)) {
		return nil, &PackError{Path: "", Err: fmt.Errorf("%w: the bytes are not the canonical encoding of their entries", errPackEntry)}
	}
	return entries, nil
}

func readPackEntries(r io.Reader) ([]PackEntry, error) {
	tr := tar.NewReader(r)
	var out []PackEntry
	var total int64
	prev := ""
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, &PackError{Path: prev, Err: fmt.Errorf("%w: %w", errPackEntry, err)}
		}
		name := hdr.Name
		clean := strings.TrimSuffix(name, "/")
		// Absolute paths and ".." would let extraction write outside the
		// sealed directory.
		if clean == "" || path.IsAbs(clean) || path.Clean(clean) != clean || clean == ".." || strings.HasPrefix(clean, "../") || !fs.ValidPath(clean) {
			return nil, &PackError{Path: name, Err: errPackName}
		}
		if name <= prev {
			return nil, &PackError{Path: name, Err: fmt.Errorf("%w: not in sorted order", errPackEntry)}
		}
		prev = name
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" || !hdr.ModTime.Equal(packEpoch) {
			return nil, &PackError{Path: name, Err: fmt.Errorf("%w: owner or time", errPackEntry)}
		}
		// WritePack's only PAX record is a long or non-ASCII path. A GNU
		// sparse record makes a few bytes on the wire read as up to the
		// whole cap of zeros, in memory, before the sha256 is compared.
		for k := range hdr.PAXRecords {
			if k != "path" {
				return nil, &PackError{Path: name, Err: fmt.Errorf("%w: PAX record %q", errPackEntry, k)}
			}
		}
		if len(out) >= MaxPackEntries {
			return nil, &PackError{Path: name, Err: errPackTooLarge}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if !strings.HasSuffix(name, "/") || hdr.Mode != 0o755 {
				return nil, &PackError{Path: name, Err: fmt.Errorf("%w: directory form", errPackEntry)}
			}
			out = append(out, PackEntry{Name: clean, Dir: true, Mode: 0o755})
		case tar.TypeReg:
			if strings.HasSuffix(name, "/") || (hdr.Mode != 0o644 && hdr.Mode != 0o755) {
				return nil, &PackError{Path: name, Err: fmt.Errorf("%w: file form", errPackEntry)}
			}
			if hdr.Size > MaxPackBytes-total {
				return nil, &PackError{Path: name, Err: errPackTooLarge}
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return nil, &PackError{Path: name, Err: err}
			}
			total += int64(len(data))
			out = append(out, PackEntry{Name: clean, Mode: hdr.Mode, Data: data})
		default:
			return nil, &PackError{Path: name, Err: fmt.Errorf("%w (tar type %q)", errPackFileType, hdr.Typeflag)}
		}
	}
}
