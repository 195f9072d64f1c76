package amber

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cleanroom-dev/cleanroom/internal/fsx"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sandbox"
	"golang.org/x/sys/unix"
)

// errEvaluatorInput: the workspace the evaluator reads holds something
// other than directories, regular files and links that stay inside it.
var errEvaluatorInput = errors.New("evaluator input is not a regular file")

// wsWalk is what one walk of the workspace finds, entry by entry (visit,
// a sandbox.WalkFunc without the error): the sha256 of every file outside
// .git (the snapshot: a regular file by its bytes, a symbolic link by its
// target, never followed, anything else by its type) within
// maxArtifactFiles and maxArtifactBytes, and, after the run (before is
// the snapshot taken before it), what the evaluator must not be given.
// After a run the walk is the sandbox's post-run scrub
// (sandbox.Config.Inspect, ContainerSpec.Inspect): the workspace is
// walked once, by descriptor, nothing followed. Every finding is kept
// apart, so that Run judges them in its own order whatever the walk met
// first.
type wsWalk struct {
	ws     string
	root   *os.File          // the workspace, where links are resolved (after a run)
	before map[string]string // nil: the snapshot before the run
	sums   map[string]string
	total  int64
	// shape: the snapshot cannot take the workspace (errWorkspaceShape);
	// hash: a file could not be read; input: the first entry the
	// evaluator must not read (errEvaluatorInput). The snapshot stops at
	// the first of shape and hash; the input check goes on.
	shape, hash, input error
}

// newWalk prepares a walk of ws; before is nil for the snapshot taken
// before the run, else that snapshot (the case's own links, as checked
// out, are the evaluator's to read).
func newWalk(ws string, before map[string]string) (*wsWalk, error) {
	w := &wsWalk{ws: ws, before: before, sums: map[string]string{}}
	if before != nil {
		// A symlink at ws is refused (fsx.OpenDir: on gVisor too).
		fd, err := fsx.OpenDir(ws)
		if err != nil {
			return nil, err
		}
		w.root = os.NewFile(uintptr(fd), ws)
	}
	return w, nil
}

func (w *wsWalk) close() {
	if w.root != nil {
		w.root.Close()
	}
}

// walk walks the workspace itself (sandbox.WalkWorkspace), for the
// snapshot and after a run no sandbox walked; whatever an earlier,
// unfinished walk found is dropped first. A walk that cannot finish
// (nesting past the sandbox's depth bound, an entry it cannot open) is
// the workspace's shape, as for the sandbox's own walk (RuleUnwalked).
func (w *wsWalk) walk() {
	w.sums, w.total, w.shape, w.hash, w.input = map[string]string{}, 0, nil, nil, nil
	err := sandbox.WalkWorkspace(w.ws, func(dirfd int, name, rel string, st *unix.Stat_t) error {
		w.visit(dirfd, name, rel, st)
		return nil
	})
	if err != nil {
		w.unwalked(err.Error())
	}
}

// unwalked records that the walk stopped before the end.
func (w *wsWalk) unwalked(why string) {
	if w.shape == nil {
		w.shape = fmt.Errorf("%w: the walk stopped: %s", errWorkspaceShape, why)
	}
}

// visit takes in one entry.
func (w *wsWalk) visit(dirfd int, name, rel string, st *unix.Stat_t) {
	if w.before != nil && w.input == nil {
		w.input = w.evaluatorInput(dirfd, name, rel, st)
	}
	if w.shape != nil || w.hash != nil {
		return
	}
	if p := filepath.Join(w.ws, rel); len(p) >= unix.PathMax {
		// The evaluator, and any reader after it, resolves paths: .git
		// included (an evaluator may run git), else a candidate could
		// make the evaluator fail and the run read as the
		// infrastructure's failure.
		w.shape = fmt.Errorf("%w: a path longer than the kernel resolves (%d bytes: %.200s…)", errWorkspaceShape, len(p), rel)
		return
	}
	// .git is the checkout's: the evaluator may read it (checked above),
	// the artifact list does not.
	if rel == ".git" || strings.HasPrefix(rel, ".git"+string(filepath.Separator)) {
		return
	}
	mode := st.Mode & unix.S_IFMT
	if mode == unix.S_IFDIR {
		return
	}
	if len(w.sums) >= maxArtifactFiles {
		w.shape = fmt.Errorf("%w: more than %d files", errWorkspaceShape, maxArtifactFiles)
		return
	}
	switch mode {
	case unix.S_IFREG:
		// Judged by its size before a byte is hashed: a sparse terabyte
		// made in an instant must not keep the host hashing zeros.
		if w.total += st.Size; w.total > maxArtifactBytes {
			w.shape = fmt.Errorf("%w: more than %d bytes (%s: %d)", errWorkspaceShape, maxArtifactBytes, rel, st.Size)
			return
		}
		sum, err := hashAt(dirfd, name, rel)
		if err != nil {
			w.hash = err
			return
		}
		w.sums[rel] = sum
	case unix.S_IFLNK:
		target, err := readlinkAt(dirfd, name)
		if err != nil {
			w.hash = fmt.Errorf("%s: %w", rel, err)
			return
		}
		w.sums[rel] = linkSum(target)
	default:
		w.sums[rel] = pkgwalk.SHA256Hex([]byte("special:" + fileModeType(mode).String()))
	}
}

// fileModeType is the fs.FileMode type bits of an lstat S_IFMT, as the
// snapshot has always written a special entry ("special:" and its type).
func fileModeType(mode uint32) os.FileMode {
	switch mode {
	case unix.S_IFIFO:
		return os.ModeNamedPipe
	case unix.S_IFSOCK:
		return os.ModeSocket
	case unix.S_IFCHR:
		return os.ModeDevice | os.ModeCharDevice
	case unix.S_IFBLK:
		return os.ModeDevice
	}
	return os.ModeIrregular
}

// evaluatorInput judges one entry as the evaluator would meet it (.git
// included: an evaluator may run git), by lstat, never opening anything
// for reading (a link is resolved with O_PATH, which opens no file): a
// FIFO, socket or device anywhere is refused (the case's checkout makes
// none, so any is the candidate's, and the evaluator opening one would
// block or never end); a symbolic link the candidate made or changed
// must lead to a path inside the workspace, by its text and resolved
// link after link: an absolute or escaping target reads the evaluator's
// own filesystem (/dev/zero, /proc, the oracle) instead of the
// candidate's files.
func (w *wsWalk) evaluatorInput(dirfd int, name, rel string, st *unix.Stat_t) error {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR, unix.S_IFREG:
		return nil
	case unix.S_IFLNK:
	default:
		return fmt.Errorf("%s: %w (%s)", rel, errEvaluatorInput, fileModeType(st.Mode&unix.S_IFMT))
	}
	target, err := readlinkAt(dirfd, name)
	if err != nil {
		return fmt.Errorf("%s: %w (symbolic link that cannot be read: %v)", rel, errEvaluatorInput, err)
	}
	if sum, ok := w.before[rel]; ok && sum == linkSum(target) {
		return nil // the case's own link, as checked out
	}
	if j := filepath.Join(filepath.Dir(rel), target); filepath.IsAbs(target) || j == ".." || strings.HasPrefix(j, "../") {
		return fmt.Errorf("%s: %w (symbolic link to %q, outside the workspace)", rel, errEvaluatorInput, target)
	}
	// Resolved as the evaluator will, link after link, never leaving the
	// workspace: texts that each stay inside can still chain out of it
	// (sub/l1 -> .., sub/l2 -> l1/..) to the evaluator's own root
	// (/dev/zero, the oracle in /package). Where it leads is judged by
	// the walk itself.
	fd, err := fsx.Open(int(w.root.Fd()), rel, unix.O_PATH, 0, fsx.FollowInside)
	if err == nil {
		unix.Close(fd)
	} else if !errors.Is(err, unix.ENOENT) { // dangling inside: dangling for the evaluator too
		return fmt.Errorf("%s: %w (symbolic link to %q does not resolve inside the workspace: %v)", rel, errEvaluatorInput, target, err)
	}
	return nil
}

// snapshotErr is the first error of the snapshot: the workspace's shape
// (errWorkspaceShape), else a file that could not be read.
func (w *wsWalk) snapshotErr() error {
	if w.shape != nil {
		return w.shape
	}
	return w.hash
}

// artifacts lists the files the candidate added or changed, against the
// snapshot taken before it ran.
func (w *wsWalk) artifacts() ([]Artifact, error) {
	if err := w.snapshotErr(); err != nil {
		return nil, err
	}
	var arts []Artifact
	for p, sum := range w.sums {
		if w.before[p] != sum {
			arts = append(arts, Artifact{Path: "workspace/" + filepath.ToSlash(p), SHA256: sum})
		}
	}
	sort.Slice(arts, func(i, j int) bool { return arts[i].Path < arts[j].Path })
	return arts, nil
}

// snapshot is the sha256 of every file of the workspace outside .git
// (wsWalk), taken before the run.
func snapshot(dir string) (map[string]string, error) {
	w, err := newWalk(dir, nil)
	if err != nil {
		return nil, err
	}
	w.walk()
	return w.sums, w.snapshotErr()
}

// linkSum is how the snapshot records a symbolic link: by its target,
// never followed; the evaluator-input check compares against it.
func linkSum(target string) string { return pkgwalk.SHA256Hex([]byte("symlink:" + target)) }

// hashAt returns the sha256 of the regular file name in the directory
// dirfd: opened without following a link and without waiting on a FIFO,
// and refused (errNotRegular) unless its fstat says regular file.
func hashAt(dirfd int, name, rel string) (string, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("%s: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%s: %w", rel, err)
	}
	if !fi.Mode().IsRegular() {
		// Swapped since the walk's lstat: hashed only as a regular file.
		return "", fmt.Errorf("%s: %w (%s)", rel, errNotRegular, fi.Mode().Type())
	}
	sum, _, err := hashOpen(f, nil)
	return sum, err
}

// readlinkAt reads the target of the symbolic link name in dirfd.
func readlinkAt(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}
