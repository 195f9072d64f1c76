package pkgwalk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fsx"
	"github.com/cleanroom-dev/cleanroom/pkgwalk/internal/sha2x"
	"golang.org/x/sys/unix"
)

// File is one regular file found by a walk.
type File struct {
	Path   string // relative to the root, '/'-separated
	SHA256 string // lowercase hex SHA-256 of the bytes read from the open descriptor
	Size   int64
	Data   []byte // the bytes that were hashed, when WalkOptions.KeepBytes
}

// Tree is the result of one walk: every regular file read (even one that
// has a problem, such as a second link), every directory below the root and
// every problem, each list sorted by path in UTF-16 order.
type Tree struct {
	Root     string
	Files    []File
	Dirs     []string
	Problems Problems
}

// Err returns nil when the tree has no problem, otherwise its Problems.
func (t *Tree) Err() error {
	if len(t.Problems) == 0 {
		return nil
	}
	return t.Problems
}

// Digests returns the {path, sha256} list of the tree's files.
func (t *Tree) Digests() []FileDigest {
	out := make([]FileDigest, len(t.Files))
	for i, f := range t.Files {
		out[i] = FileDigest{Path: f.Path, SHA256: f.SHA256}
	}
	return out
}

// Size returns the total size of the tree's files.
func (t *Tree) Size() int64 {
	var n int64
	for _, f := range t.Files {
		n += f.Size
	}
	return n
}

// WalkOptions controls a walk.
type WalkOptions struct {
	// HoldoutDir, when set, enables the holdout leak rules: a file
	// byte-identical to any regular file under HoldoutDir is refused
	// (errLeakHoldoutCopy), and so is a file carrying one of its committed
	// challenges (errLeakCommittedChallenge, committed.go). Every file is
	// then read into memory to be matched.
	HoldoutDir string
	// KeepBytes keeps each file's bytes in File.Data: the bytes that were
	// hashed, read once from the descriptor that was checked.
	KeepBytes bool
	// Progress, when set, is called after each file is read with the number
	// of files and bytes read so far. Calls are serialised.
	Progress func(files int, bytes int64)
	// Workers is the number of goroutines that read and hash files, each
	// one file at a time, or two where the CPU has the SHA extensions
	// (pairs.go); 0 means GOMAXPROCS.
	Workers int

	// plain walks only refuse what is not a regular file or a directory
	// (ListRegularFiles, DigestOfPaths): release surfaces and instrument
	// files are digested, not delivered.
	plain bool
	// structural walks apply every rule that needs no file contents (entry
	// types, links, mounts, names, case-folding, empty directories, leak
	// paths) and read nothing: Emit's source walk, whose content rules and
	// digests are applied to the delivered copy instead. Files carry Path
	// and Size, no SHA256.
	structural bool
}

// MaxKeptFile is the largest file a walk holds in memory (KeepBytes, or a
// JSON file read for the challenge-shape leak rule); a larger one is
// refused with errTooLarge rather than exhausting memory.
const MaxKeptFile = 1 << 30

// pairReader: walk workers hash two files at a time (pairs.go) where
// sha2x runs its assembly (decided at the first walk: CPU, build tag,
// CLEANROOM_SHA2X, self-check); tests turn it off to run the one-file
// reader here too.
var pairReader = sha2x.Available

// openFlags is how every entry is opened for reading, relative to the
// descriptor of its parent directory, never by a path from the top, with
// fsx.Open's resolve rules (nothing outside the parent, no link of any kind
// followed, no mount entered: a bind mount over an entry is refused).
// O_NOFOLLOW: a symlink is refused, never followed. O_NONBLOCK: a FIFO
// swapped in cannot hang the walk. O_NOCTTY: a terminal cannot become ours.
const openFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC

// openEntry opens name beneath the directory dirfd. It (with createEntry,
// its form for a file Emit creates) is the only way entries are opened:
// the caller decides on fstat of the returned descriptor and reads from
// that same descriptor. (The unsafe form it replaces is lstat(path)
// followed by open(path), which a rename between the two calls defeats.)
func openEntry(dirfd int, name string, flags uint64) (int, error) {
	return createEntry(dirfd, name, flags, 0)
}

// createEntry is openEntry with the mode a file created by flags
// (O_CREAT) gets: Emit's destination files are made beneath their
// directory with the same resolve rules.
func createEntry(dirfd int, name string, flags, mode uint64) (int, error) {
	return fsx.Open(dirfd, name, int(flags), uint32(mode))
}

// Walk walks the package at root and returns every regular file with its
// digest and every problem found (TRVM-FORMATS §4.1), all of them, sorted.
// A tree with problems is returned with a nil error: problems are findings
// about the input. The error is non-nil only when the walk could not be done
// at all (the root does not exist, the holdout directory is unreadable).
//
// The root is opened O_DIRECTORY|O_NOFOLLOW (a root that is a symlink or not
// a directory is a problem, not followed); symlinks in the path leading to
// the root are the caller's choice and are followed. Every entry is then
// opened with openat2 relative to its parent's descriptor (see openEntry),
// the decision is made on fstat of that descriptor, and the bytes hashed are
// read from it. Files are read and hashed in parallel.
func Walk(root string, opts WalkOptions) (*Tree, error) {
	holdout, err := loadHoldout(opts)
	if err != nil {
		return nil, err
	}
	rootf, prob, err := openRoot(root)
	if err != nil {
		return nil, err
	}
	if prob != nil {
		return &Tree{Root: root, Problems: Problems{prob}}, nil
	}
	defer rootf.Close()
	return walkFrom(context.Background(), rootf, "", root, opts, holdout)
}

// loadHoldout returns the digests of the holdout files (digest -> path)
// and its committed challenges when the holdout rules apply to this walk,
// else nil.
func loadHoldout(opts WalkOptions) (*holdoutSet, error) {
	if opts.HoldoutDir == "" || opts.plain || opts.structural {
		return nil, nil
	}
	t, err := Walk(opts.HoldoutDir, WalkOptions{plain: true, KeepBytes: true})
	if err == nil {
		err = t.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("reading the holdout directory %s: %w", opts.HoldoutDir, err)
	}
	h := &holdoutSet{digests: make(map[string]string, len(t.Files))}
	for _, f := range t.Files {
		h.digests[f.SHA256] = f.Path
	}
	if h.challenges, err = loadCommitted(t.Files); err != nil {
		return nil, fmt.Errorf("reading the holdout directory %s: %w", opts.HoldoutDir, err)
	}
	return h, nil
}

// walkFrom walks the directory open at d; paths are prefix + "/" + name
// (prefix "" at a package root). d stays the caller's. A cancelled ctx
// stops the walk between files (no entry is queued and no file opened
// after it is seen; a file being read is finished) and is its error.
func walkFrom(ctx context.Context, d *os.File, prefix, root string, opts WalkOptions, holdout *holdoutSet) (*Tree, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(d.Fd()), &st); err != nil {
		return nil, fmt.Errorf("fstat %s: %w", root, err)
	}

	// No safe lookup, no walk: falling back to a path-based resolver
	// would be a downgrade an attacker could ask for. fsx answers a
	// kernel without openat2 (ENOSYS) with its descriptor walk, which
	// keeps every rule; a seccomp filter that forbids openat2 (EPERM) is
	// refused here.
	probe, err := openEntry(int(d.Fd()), ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return nil, fmt.Errorf("openat2 is refused (%w): the package walk needs openat2 (Linux 5.6) or a kernel that lacks it outright, not a seccomp filter on it", err)
	}
	if err != nil {
		return nil, fmt.Errorf("openat2 on %s: %w", root, err)
	}
	unix.Close(probe)

	w := &walker{ctx: ctx, opts: opts, rootDev: st.Dev, holdout: holdout}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// A deep queue lets the directory reader run ahead whenever it gets a
	// core, so a pair worker seldom finds no second file to pair with.
	w.jobs = make(chan job, 256)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256<<10)
			if !opts.structural && pairReader() {
				// Two files at a time on this core (pairs.go).
				w.pairs(buf)
				return
			}
			for j := range w.jobs {
				w.file(j, buf)
			}
		}()
	}
	// The root is re-opened through its descriptor ("." beneath it), so
	// the walk's reference counting never closes the caller's and its
	// directory reads start at the beginning whatever the caller read of d.
	fd, err := openEntry(int(d.Fd()), ".", openFlags|unix.O_DIRECTORY)
	if err != nil {
		close(w.jobs)
		wg.Wait()
		return nil, fmt.Errorf("opening %s: %w", root, err)
	}
	w.dir(newDirRef(fd), prefix)
	close(w.jobs)
	wg.Wait()
	// A cancelled walk skipped files: its tree is not a measurement.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return w.finish(root), nil
}

// openRoot opens the root directory without following a final symlink.
// A refusal is returned as a problem; an error means there is nothing to
// walk.
func openRoot(root string) (*os.File, *RefusalError, error) {
	// Clean first: a trailing "/" or "/." would make the kernel follow a
	// final symlink that O_NOFOLLOW is there to refuse. fsx.OpenDir
	// refuses the symlink on gVisor too (ENOTDIR).
	root = filepath.Clean(root)
	fd, err := fsx.OpenDir(root)
	if err == nil {
		return os.NewFile(uintptr(fd), root), nil, nil
	}
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		// Classify with lstat; nothing is opened through the name.
		var st unix.Stat_t
		if lerr := unix.Lstat(root, &st); lerr == nil {
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				target, _ := os.Readlink(root)
				return nil, &RefusalError{Path: ".", Rule: errRootSymlink, Detail: fmt.Sprintf("-> %q", target)}, nil
			}
			return nil, &RefusalError{Path: ".", Rule: errRootNotDir, Detail: typeName(st.Mode)}, nil
		}
	}
	return nil, nil, fmt.Errorf("opening package root %s: %w", root, err)
}

// dirRef is an open directory descriptor shared by the jobs of its
// entries; the last release closes it.
type dirRef struct {
	fd   int
	refs atomic.Int32
}

func newDirRef(fd int) *dirRef {
	d := &dirRef{fd: fd}
	d.refs.Store(1)
	return d
}

func (d *dirRef) acquire() *dirRef { d.refs.Add(1); return d }

func (d *dirRef) release() {
	if d.refs.Add(-1) == 0 {
		unix.Close(d.fd)
	}
}

// job is one regular-file entry to open (beneath dir), check and read.
type job struct {
	dir  *dirRef // released by file
	name string
	path string
}

type entry struct {
	path  string
	isDir bool
}

type walker struct {
	ctx     context.Context // checked between files
	opts    WalkOptions
	rootDev uint64
	holdout *holdoutSet
	jobs    chan job

	mu       sync.Mutex
	problems Problems
	files    []File
	dirs     []string
	entries  []entry // touched by the traversal goroutine only
	nfiles   int
	nbytes   int64
}

func (w *walker) problem(path string, r Rule, detail string) {
	w.mu.Lock()
	w.problems = append(w.problems, &RefusalError{Path: path, Rule: r, Detail: detail})
	w.mu.Unlock()
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// dirent is one name read from a directory with the kernel's type hint.
type dirent struct {
	name string
	typ  uint8
}

// readDir reads every entry of the directory open at fd (getdents64 on the
// descriptor; never a path) except "." and "..", sorted by name.
func readDir(fd int) ([]dirent, error) {
	var out []dirent
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			break
		}
		for b := buf[:n]; len(b) >= 19; {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < 19 || reclen > len(b) {
				return nil, fmt.Errorf("getdents64: bad record length %d", reclen)
			}
			typ := b[18]
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			if s := string(name); s != "." && s != ".." {
				out = append(out, dirent{name: s, typ: typ})
			}
			b = b[reclen:]
		}
	}
	slices.SortFunc(out, func(a, b dirent) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// dir walks the directory d (relative path rel, "" for the root) and
// releases d. Subdirectories are walked here; regular files are handed to
// the workers, which open, check and read them in parallel.
func (w *walker) dir(d *dirRef, rel string) {
	defer d.release()
	ents, err := readDir(d.fd)
	if err != nil {
		w.problem(orDot(rel), errUnreadable, err.Error())
		return
	}
	for _, e := range ents {
		if w.ctx.Err() != nil {
			return // walkFrom returns the context's error
		}
		p := join(rel, e.name)
		if !w.opts.plain {
			for _, r := range segmentRules(e.name) {
				w.problem(p, r, "")
			}
		}
		typ := e.typ
		if typ == unix.DT_UNKNOWN {
			// A filesystem without d_type: ask fstatat on the parent's
			// descriptor (never a path).
			var st unix.Stat_t
			if err := unix.Fstatat(d.fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				w.entries = append(w.entries, entry{path: p})
				w.openFailed(d.fd, e.name, p, err)
				continue
			}
			typ = dtOf(st.Mode)
		}
		switch typ {
		case unix.DT_REG:
			w.entries = append(w.entries, entry{path: p})
			// The type is only a hint: the worker decides on fstat of the
			// descriptor it opens and reads.
			w.jobs <- job{dir: d.acquire(), name: e.name, path: p}
		case unix.DT_DIR:
			w.entries = append(w.entries, entry{path: p, isDir: true})
			w.subdir(d, e.name, p)
		default:
			// Not a regular file or a directory: refused without being
			// opened, so opening a device node can have no effect.
			w.entries = append(w.entries, entry{path: p})
			var st unix.Stat_t
			if err := unix.Fstatat(d.fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				w.openFailed(d.fd, e.name, p, err)
				continue
			}
			w.refuseType(d.fd, e.name, p, st.Mode)
		}
	}
}

// subdir opens, checks and walks one subdirectory.
func (w *walker) subdir(d *dirRef, name, p string) {
	fd, err := openEntry(d.fd, name, openFlags|unix.O_DIRECTORY)
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) {
			w.problem(p, errChanged, "no longer a directory")
			return
		}
		w.openFailed(d.fd, name, p, err)
		return
	}
	// The decision is made on the descriptor that will be read.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		w.problem(p, errUnreadable, err.Error())
		return
	}
	if st.Dev != w.rootDev {
		// Another filesystem mounted here (RESOLVE_NO_XDEV normally
		// refuses it at open).
		unix.Close(fd)
		w.problem(p, errMountPoint, "")
		return
	}
	w.mu.Lock()
	w.dirs = append(w.dirs, p)
	w.mu.Unlock()
	w.dir(newDirRef(fd), p)
}

func dtOf(mode uint32) uint8 {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return unix.DT_REG
	case unix.S_IFDIR:
		return unix.DT_DIR
	}
	return unix.DT_UNKNOWN // refused by type below
}

func orDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// refuseType records the problem for an entry that is not a regular file or
// a directory.
func (w *walker) refuseType(dirfd int, name, p string, mode uint32) {
	detail := ""
	if mode&unix.S_IFMT == unix.S_IFLNK {
		buf := make([]byte, 4096)
		if n, err := unix.Readlinkat(dirfd, name, buf); err == nil {
			detail = fmt.Sprintf("-> %q", buf[:n])
		}
	}
	w.problem(p, typeRule(mode), detail)
}

// openFailed turns a failed fstatat or openat2 into the problem it reveals.
func (w *walker) openFailed(dirfd int, name, p string, err error) {
	// A name of several segments (Emit's copy resolves a package path
	// beneath the root) is looked up again only beneath its parent, opened
	// like every entry: fstatat or readlinkat of the whole name would
	// follow a symlink swapped in for one of its directories, out of the
	// package, and report what they found there.
	lookup := true
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		pfd, perr := openEntry(dirfd, name[:i], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
		if perr == nil {
			defer unix.Close(pfd)
			dirfd, name = pfd, name[i+1:]
		} else {
			lookup = false
			if errors.Is(perr, unix.ELOOP) {
				w.problem(p, ErrSymlink, "a symbolic link on its path")
				return
			}
		}
	}
	switch {
	case errors.Is(err, unix.ELOOP) && !lookup:
		w.problem(p, ErrSymlink, "")
	case errors.Is(err, unix.ELOOP):
		// O_NOFOLLOW / RESOLVE_NO_SYMLINKS met a symlink swapped in.
		w.refuseType(dirfd, name, p, unix.S_IFLNK)
	case errors.Is(err, unix.EXDEV):
		// RESOLVE_NO_XDEV: a mount is stacked on this entry.
		w.problem(p, errMountPoint, "")
	case errors.Is(err, unix.ENOENT):
		w.problem(p, errChanged, "vanished during the walk")
	case errors.Is(err, unix.ENXIO):
		var st unix.Stat_t
		if lookup && unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT != unix.S_IFREG && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			w.problem(p, typeRule(st.Mode), "")
			return
		}
		w.problem(p, errUnreadable, err.Error())
	default:
		w.problem(p, errUnreadable, err.Error())
	}
}

func typeRule(mode uint32) Rule {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return ErrSymlink
	case unix.S_IFIFO:
		return errFIFO
	case unix.S_IFSOCK:
		return errSocket
	case unix.S_IFCHR, unix.S_IFBLK:
		return errDevice
	}
	return errOther
}

func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "unknown type"
}

// file opens one regular-file entry beneath its directory, decides on fstat
// of that descriptor, and reads it (see read).
func (w *walker) file(j job, buf []byte) {
	defer j.dir.release()
	if w.ctx.Err() != nil {
		return // cancelled: the queued files are drained unopened
	}
	fd, st, ok := w.openFile(j.dir.fd, j.name, j.path)
	if !ok {
		return
	}
	defer unix.Close(fd)
	if w.opts.structural {
		w.mu.Lock()
		w.files = append(w.files, File{Path: j.path, Size: st.Size})
		w.mu.Unlock()
		return
	}
	if testHook != nil {
		testHook("read " + j.path)
	}
	w.read(fd, j.path, st.Size, buf)
}

// openFile opens name beneath dirfd (p is its package path) and decides on
// fstat of the descriptor: anything but a regular file on the root's
// filesystem is recorded as a problem and closed (ok false). A second link
// is recorded too, but the descriptor is still returned (a walk reads it
// so that its problem list is complete; Emit refuses to copy it).
func (w *walker) openFile(dirfd int, name, p string) (int, unix.Stat_t, bool) {
	var st unix.Stat_t
	fd, err := openEntry(dirfd, name, openFlags)
	if err != nil {
		w.openFailed(dirfd, name, p, err)
		return -1, st, false
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		w.problem(p, errUnreadable, err.Error())
		return -1, st, false
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		unix.Close(fd)
		w.problem(p, errChanged, "became a directory during the walk")
		return -1, st, false
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		// Swapped after the directory was read: refuse what was opened.
		unix.Close(fd)
		w.problem(p, typeRule(st.Mode), "")
		return -1, st, false
	case st.Dev != w.rootDev:
		// A file of another filesystem (a bind mount RESOLVE_NO_XDEV did
		// not catch): bytes the package's filesystem does not hold.
		unix.Close(fd)
		w.problem(p, errMountPoint, "")
		return -1, st, false
	}
	if st.Nlink != 1 && !w.opts.plain {
		// A second name outside the package can change these bytes.
		w.problem(p, errHardLink, fmt.Sprintf("nlink %d", st.Nlink))
	}
	return fd, st, true
}

// readFull reads from fd into b until b is full or the file ends. A
// short read from a regular file is its end: that saves the extra read
// that would return 0, and is safe because a file that in fact has more
// bytes is then refused (its size no longer matches), never accepted.
func readFull(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		rem := len(b) - n
		m, err := unix.Read(fd, b[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		n += m
		if m < rem {
			break // 0 or short: the end of the file
		}
	}
	return n, nil
}

// isJSON reports whether the challenge-shape rule reads the file at path.
func (w *walker) isJSON(path string) bool {
	return !w.opts.plain && !w.opts.structural && strings.HasSuffix(strings.ToLower(path), ".json")
}

// keepsBytes reports whether the file at path is held in memory while it
// is read: asked for (KeepBytes), read by the challenge-shape rule, or
// matched against committed challenges (every file, whatever its name).
func (w *walker) keepsBytes(path string) bool {
	return w.opts.KeepBytes || w.isJSON(path) || (w.holdout != nil && len(w.holdout.challenges) > 0)
}

// read hashes (and keeps, when asked) the bytes of one regular file from
// the descriptor that was checked; size is what fstat said. Reading stops
// one byte past size, so a file that grows while read is noticed without
// reading it all, and one that shrinks is noticed too.
func (w *walker) read(fd int, path string, size int64, buf []byte) {
	keep := w.keepsBytes(path)
	if keep && size > MaxKeptFile {
		w.problem(path, errTooLarge, fmt.Sprintf("%d bytes", size))
		return
	}
	h := sha256.New()
	var data []byte
	if keep {
		// size+1: one byte past what fstat said shows growth.
		data = make([]byte, size+1)
		n, err := readFull(fd, data)
		if err != nil {
			w.problem(path, errUnreadable, err.Error())
			return
		}
		if int64(n) != size {
			w.problem(path, errChanged, fmt.Sprintf("fstat said %d bytes, read %d or more", size, n))
			return
		}
		data = data[:size:size]
		h.Write(data)
	} else {
		var total int64
		for {
			want := min(int64(len(buf)), size+1-total)
			if want <= 0 {
				break
			}
			n, err := readFull(fd, buf[:want])
			if err != nil {
				w.problem(path, errUnreadable, err.Error())
				return
			}
			h.Write(buf[:n])
			total += int64(n)
			if int64(n) < want {
				break // end of file
			}
		}
		if total != size {
			w.problem(path, errChanged, fmt.Sprintf("fstat said %d bytes, read %d or more", size, total))
			return
		}
	}
	w.record(path, hex.EncodeToString(h.Sum(nil)), size, data)
}

// record applies the content rules to one file read in full (sum is the
// hex SHA-256 of its bytes, data the bytes when they were kept: always for
// a JSON file, and for every file when there are committed challenges)
// and adds it to the tree.
func (w *walker) record(path, sum string, size int64, data []byte) {
	if data != nil && w.isJSON(path) && looksLikeChallenge(data) {
		w.problem(path, errLeakChallengeShape, "")
	}
	if w.holdout != nil {
		if hp, ok := w.holdout.digests[sum]; ok {
			w.problem(path, errLeakHoldoutCopy, "same bytes as holdout file "+hp)
		}
		if data != nil {
			if c := committedIn(data, w.holdout.challenges); c != nil {
				w.problem(path, errLeakCommittedChallenge, fmt.Sprintf("challenge %q (holdout file %s)", c.id, c.file))
			}
		}
	}
	file := File{Path: path, SHA256: sum, Size: size}
	if w.opts.KeepBytes {
		file.Data = data
	}
	w.mu.Lock()
	w.files = append(w.files, file)
	w.nfiles++
	w.nbytes += size
	if w.opts.Progress != nil {
		w.opts.Progress(w.nfiles, w.nbytes)
	}
	w.mu.Unlock()
}

// finish applies the whole-tree rules and sorts the results.
func (w *walker) finish(root string) *Tree {
	if !w.opts.plain {
		w.treeRules()
	}
	slices.SortFunc(w.files, func(a, b File) int { return evidence.CompareUTF16(a.Path, b.Path) })
	slices.SortFunc(w.dirs, evidence.CompareUTF16)
	return &Tree{Root: root, Files: w.files, Dirs: w.dirs, Problems: sortProblems(w.problems)}
}

// treeRules applies the rules that need the whole tree: empty directories,
// case-fold collisions and leaking path names.
func (w *walker) treeRules() {
	// Exactly the directories the files imply: every directory must have a
	// manifested file somewhere beneath it.
	lived := make(map[string]bool)
	for _, f := range w.files {
		for d := f.Path; ; {
			i := strings.LastIndexByte(d, '/')
			if i < 0 {
				break
			}
			d = d[:i]
			if lived[d] {
				break
			}
			lived[d] = true
		}
	}
	for _, d := range w.dirs {
		if !lived[d] {
			w.problem(d, ErrEmptyDir, "")
		}
	}

	folded := make(map[string][]string)
	for _, e := range w.entries {
		k := foldASCII(e.path)
		folded[k] = append(folded[k], e.path)
		if r, what := leakPath(e.path, e.isDir); r != "" {
			w.problem(e.path, r, what)
		}
	}
	for _, group := range folded {
		if len(group) < 2 {
			continue
		}
		for _, p := range group {
			others := slices.DeleteFunc(slices.Clone(group), func(q string) bool { return q == p })
			w.problem(p, errCaseCollision, "with "+strings.Join(quoteAll(others), ", "))
		}
	}
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// foldASCII lower-cases ASCII letters only, the folding of TRVM-FORMATS §4.1.
func foldASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}
