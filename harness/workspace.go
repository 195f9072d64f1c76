package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/internal/fsx"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"golang.org/x/sys/unix"
)

// The rules write_source enforces. Each refusal wraps one of these in a
// *pkgwalk.RefusalError naming the path.
const (
	// errWorkspaceExists: a workspace that existed before the run may hold
	// anything (a planted file, a symlink out), so only a fresh one is used.
	errWorkspaceExists pkgwalk.Rule = "workspace already exists"
	// errWorkspacePath: the workspace must be a clean absolute path.
	errWorkspacePath pkgwalk.Rule = "workspace path is not a clean absolute path"
	// errWritePath: only portable relative paths: segments of
	// [A-Za-z0-9._+-], no ".", "..", empty segment, leading "/" or NUL.
	errWritePath pkgwalk.Rule = "not a portable relative path"
	// errWriteCase: two paths differing only by ASCII case are one file on
	// a case-insensitive filesystem.
	errWriteCase pkgwalk.Rule = "path equals another written path after ASCII case-folding"
	// errWriteConflict: the path crosses a file, or names a directory.
	errWriteConflict pkgwalk.Rule = "path conflicts with a file or directory already written"
	// errWriteTooLarge: content over the per-file cap.
	errWriteTooLarge pkgwalk.Rule = "content over the per-file size cap"
	// errWorkspaceFull: the file-count, byte or call cap is reached.
	errWorkspaceFull pkgwalk.Rule = "workspace cap reached"
)

// Limits bound what the implementer can write and send.
type Limits struct {
	MaxFileBytes  int // one write_source content
	MaxTotalBytes int // the workspace, counting each file's latest size
	MaxFiles      int // distinct files
	MaxWrites     int // write_source calls, accepted or not
	MaxPathBytes  int
	MaxDepth      int
	// MaxSessionCalls and MaxSessionBytes are one session's budget: tool
	// calls, and bytes of its transcript. Past either the session ends
	// (errSessionBudget). 0 means the default's value; a MaxSessionBytes
	// over the default's is refused (errSessionBytes).
	MaxSessionCalls int
	MaxSessionBytes int
}

// DefaultLimits are generous for a source tree and small for a disk.
var DefaultLimits = Limits{
	MaxFileBytes:  1 << 20,
	MaxTotalBytes: 64 << 20,
	MaxFiles:      2000,
	MaxWrites:     5000,
	MaxPathBytes:  255,
	MaxDepth:      16,
	// A session of a hundred thousand calls is far beyond any
	// implementation's; a flood of them must not grow the transcript
	// without bound.
	MaxSessionCalls: 100_000,
	// Half the readers' limit: the end line (at most the strict reader's
	// limit, as its refused reads are bounded) and the relay's line fit
	// after the last call, so the record stays readable whole.
	MaxSessionBytes: MaxTranscriptBytes / 2,
}

// errSessionBytes: Limits.MaxSessionBytes over the default's, which is the
// most a session may write and its transcript still be read whole (half
// the readers' MaxTranscriptBytes). Honouring it would make a transcript
// no reader takes in; lowering it without a word would end a session
// sooner than its caller asked.
var errSessionBytes = fault.New(fault.Refused, "session byte budget over the transcript readers' limit")

// check refuses limits the room cannot honour.
func (l Limits) check() error {
	if l.MaxSessionBytes > DefaultLimits.MaxSessionBytes {
		return fmt.Errorf("%w: %d bytes asked, at most %d", errSessionBytes, l.MaxSessionBytes, DefaultLimits.MaxSessionBytes)
	}
	return nil
}

// session returns the session budget, the default's for a zero field
// (check has refused a byte budget over the default's).
func (l Limits) session() (calls, bytes int) {
	calls, bytes = l.MaxSessionCalls, l.MaxSessionBytes
	if calls <= 0 {
		calls = DefaultLimits.MaxSessionCalls
	}
	if bytes <= 0 {
		bytes = DefaultLimits.MaxSessionBytes
	}
	return calls, bytes
}

// Workspace is the implementer's only writable place: a directory created
// by the server (it must not exist before), written only through a
// descriptor opened at creation, with every path resolved beneath it by
// openat2. It has no read operation: what was written cannot be read back
// through the room.
type Workspace struct {
	Path   string
	limits Limits

	mu      sync.Mutex
	dirfd   int
	sizes   map[string]int    // path → size of the latest write
	folded  map[string]string // ASCII-lower path → path
	dirs    map[string]bool   // directories created
	dirFold map[string]string // ASCII-lower directory → directory
	total   int
	writes  int
}

// CreateWorkspace creates dir (mode 0755) exclusively — refusing one that
// exists — and opens it.
func CreateWorkspace(dir string, limits Limits) (*Workspace, error) {
	if err := checkWorkspacePath(dir); err != nil {
		return nil, err
	}
	// mkdir is create-exclusive: an existing directory, file or symlink at
	// dir fails with EEXIST, so nothing planted beforehand is adopted.
	if err := unix.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil, &pkgwalk.RefusalError{Path: dir, Rule: errWorkspaceExists}
		}
		return nil, fmt.Errorf("creating workspace %s: %w", dir, err)
	}
	return openWorkspaceDir(dir, limits)
}

// checkWorkspacePath refuses a relative, unclean or NUL-bearing path: a
// ".." or relative workspace would put the room's writes somewhere other
// than the directory the record names.
func checkWorkspacePath(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || strings.ContainsRune(dir, 0) {
		return &pkgwalk.RefusalError{Path: dir, Rule: errWorkspacePath}
	}
	return nil
}

// openWorkspaceDir opens dir as a Workspace refusing a symlink at dir
// (fsx.OpenDir, on gVisor too): a link swapped in at dir would carry every
// write out of the workspace.
func openWorkspaceDir(dir string, limits Limits) (*Workspace, error) {
	fd, err := fsx.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("opening workspace %s: %w", dir, err)
	}
	return &Workspace{Path: dir, limits: limits, dirfd: fd, sizes: map[string]int{}, folded: map[string]string{}, dirs: map[string]bool{}, dirFold: map[string]string{}}, nil
}

// Close releases the workspace descriptor.
func (w *Workspace) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dirfd < 0 {
		return nil
	}
	err := unix.Close(w.dirfd)
	w.dirfd = -1
	return err
}

// CheckWritePath applies the portable-path rule to an implementer's path.
func CheckWritePath(p string, limits Limits) error {
	if p == "" || len(p) > limits.MaxPathBytes {
		return &pkgwalk.RefusalError{Path: p, Rule: errWritePath, Detail: fmt.Sprintf("length %d, allowed 1..%d", len(p), limits.MaxPathBytes)}
	}
	segs := strings.Split(p, "/")
	if len(segs) > limits.MaxDepth {
		return &pkgwalk.RefusalError{Path: p, Rule: errWritePath, Detail: fmt.Sprintf("%d segments, allowed %d", len(segs), limits.MaxDepth)}
	}
	for _, s := range segs {
		// "" catches a leading "/" (absolute), "//" and a trailing "/".
		if s == "" || s == "." || s == ".." {
			return &pkgwalk.RefusalError{Path: p, Rule: errWritePath, Detail: fmt.Sprintf("segment %q", s)}
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			ok := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '+' || c == '-'
			if !ok {
				return &pkgwalk.RefusalError{Path: p, Rule: errWritePath, Detail: fmt.Sprintf("byte %#02x in segment %q", c, s)}
			}
		}
	}
	return nil
}

// Write stores content at the relative path p, replacing an earlier write
// of the same path. It returns the content's size.
func (w *Workspace) Write(p string, content []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	if w.writes > w.limits.MaxWrites {
		return &pkgwalk.RefusalError{Path: p, Rule: errWorkspaceFull, Detail: fmt.Sprintf("more than %d write_source calls", w.limits.MaxWrites)}
	}
	if err := CheckWritePath(p, w.limits); err != nil {
		return err
	}
	if len(content) > w.limits.MaxFileBytes {
		return &pkgwalk.RefusalError{Path: p, Rule: errWriteTooLarge, Detail: fmt.Sprintf("%d bytes, cap %d", len(content), w.limits.MaxFileBytes)}
	}
	lower := strings.ToLower(p)
	if prev, ok := w.folded[lower]; ok && prev != p {
		return &pkgwalk.RefusalError{Path: p, Rule: errWriteCase, Detail: fmt.Sprintf("already wrote %q", prev)}
	}
	old, exists := w.sizes[p]
	if !exists && len(w.sizes) >= w.limits.MaxFiles {
		return &pkgwalk.RefusalError{Path: p, Rule: errWorkspaceFull, Detail: fmt.Sprintf("%d files", w.limits.MaxFiles)}
	}
	if w.total-old+len(content) > w.limits.MaxTotalBytes {
		return &pkgwalk.RefusalError{Path: p, Rule: errWorkspaceFull, Detail: fmt.Sprintf("%d bytes", w.limits.MaxTotalBytes)}
	}
	// A file may not stand where a directory was created, nor a directory
	// (a parent of p) where a file was written.
	if w.dirs[p] || w.dirs[lower] {
		return &pkgwalk.RefusalError{Path: p, Rule: errWriteConflict, Detail: "a directory of that name exists"}
	}
	segs := strings.Split(p, "/")
	for i := 1; i < len(segs); i++ {
		parent := strings.Join(segs[:i], "/")
		if _, isFile := w.folded[strings.ToLower(parent)]; isFile {
			return &pkgwalk.RefusalError{Path: p, Rule: errWriteConflict, Detail: fmt.Sprintf("%q is a file", parent)}
		}
		// "A/" and "a/" are one directory on a case-insensitive
		// filesystem, and a tree holding both is refused by the walk.
		if prev, ok := w.dirFold[strings.ToLower(parent)]; ok && prev != parent {
			return &pkgwalk.RefusalError{Path: p, Rule: errWriteCase, Detail: fmt.Sprintf("directory %q, already created as %q", parent, prev)}
		}
	}
	if err := w.writeBeneath(segs, content); err != nil {
		return &pkgwalk.RefusalError{Path: p, Rule: errWriteConflict, Detail: err.Error()}
	}
	for i := 1; i < len(segs); i++ {
		d := strings.Join(segs[:i], "/")
		w.dirs[d] = true
		w.dirs[strings.ToLower(d)] = true
		w.dirFold[strings.ToLower(d)] = d
	}
	w.sizes[p] = len(content)
	w.folded[lower] = p
	w.total += len(content) - old
	return nil
}

// writeBeneath creates the parent directories one at a time under the
// workspace descriptor, writes the content to a fresh temporary name
// (O_CREAT|O_EXCL) in the parent, syncs it, and renames it into place: the
// final name is replaced, never written through, so a planted hard link
// cannot carry the write outside. Every directory is opened by fsx.Open:
// no ".." out of the workspace, no link, no other mount on the way.
func (w *Workspace) writeBeneath(segs []string, content []byte) error {
	parent := w.dirfd
	closeParent := func() {}
	defer func() { closeParent() }()
	for i, s := range segs[:len(segs)-1] {
		rel := strings.Join(segs[:i+1], "/")
		if err := unix.Mkdirat(parent, s, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("mkdir %s: %w", rel, err)
		}
		fd, err := fsx.Open(w.dirfd, rel, unix.O_DIRECTORY|unix.O_RDONLY, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", rel, err)
		}
		closeParent()
		parent = fd
		closeParent = func() { unix.Close(fd) }
	}
	name := segs[len(segs)-1]
	// The durable writer works on a descriptor of its own: the held parent
	// (reached beneath the workspace above) is the directory written, and
	// the file and the directory entry are both fsynced.
	dup, err := unix.Dup(parent)
	if err != nil {
		return fmt.Errorf("dup: %w", err)
	}
	dir := os.NewFile(uintptr(dup), "workspace/"+strings.Join(segs[:len(segs)-1], "/"))
	defer dir.Close()
	return durable.ReplaceIn(dir, name, content, 0o644)
}

// errWorkspaceEntry: a resumed workspace holds something write_source
// never creates (a link, a device, a name no write could have).
const errWorkspaceEntry pkgwalk.Rule = "workspace holds an entry the room did not write"

// ReopenWorkspace opens the workspace of an interrupted session (room
// drive --resume) and takes back what it holds as written: the caps count
// its files and bytes again (the write count starts afresh). Only
// directories and regular files under portable paths are taken; anything
// else is refused, as a link planted there would carry a later write out
// (writes replace by rename under openat2 beneath, but the record must
// also say what the workspace holds). The relay has already held the
// files to the transcript's record (checkWorkspace).
func ReopenWorkspace(dir string, limits Limits) (*Workspace, error) {
	if err := checkWorkspacePath(dir); err != nil {
		return nil, err
	}
	w, err := openWorkspaceDir(dir, limits)
	if err != nil {
		return nil, err
	}
	if err := w.takeBack(w.dirfd, ""); err != nil {
		_ = w.Close() // releases the descriptor; the refusal is the error
		return nil, err
	}
	return w, nil
}

// takeBack records the entries of the directory open at fd (rel beneath
// the workspace) and recurses into its directories, every lookup by
// descriptor without following a link.
func (w *Workspace) takeBack(fd int, rel string) error {
	dup, err := unix.Dup(fd)
	if err != nil {
		return err
	}
	d := os.NewFile(uintptr(dup), w.Path+"/"+rel)
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("reading workspace %s: %w", rel, err)
	}
	for _, name := range names {
		p := name
		if rel != "" {
			p = rel + "/" + name
		}
		refuse := func(detail string) error {
			return &pkgwalk.RefusalError{Path: filepath.Join(w.Path, p), Rule: errWorkspaceEntry, Detail: detail}
		}
		if err := CheckWritePath(p, w.limits); err != nil {
			return refuse(err.Error())
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("workspace %s: %w", p, err)
		}
		lower := strings.ToLower(p)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if _, ok := w.dirFold[lower]; ok {
				return refuse("two directories differ only by case")
			}
			w.dirs[p], w.dirs[lower], w.dirFold[lower] = true, true, p
			sub, err := fsx.Open(fd, name, unix.O_DIRECTORY|unix.O_RDONLY, 0)
			if err != nil {
				return fmt.Errorf("workspace %s: %w", p, err)
			}
			err = w.takeBack(sub, p)
			unix.Close(sub)
			if err != nil {
				return err
			}
		case unix.S_IFREG:
			if _, ok := w.folded[lower]; ok {
				return refuse("two files differ only by case")
			}
			w.sizes[p], w.folded[lower] = int(st.Size), p
			w.total += int(st.Size)
		default:
			return refuse(fmt.Sprintf("mode %#o", st.Mode&unix.S_IFMT))
		}
	}
	return nil
}
