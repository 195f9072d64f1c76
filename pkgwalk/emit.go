package pkgwalk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	gosync "sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// EmitOptions controls Emit.
type EmitOptions struct {
	// RootLabel is the manifest's root label; "" means DefaultRootLabel.
	RootLabel string
	// HoldoutDir enables the holdout-copy leak rule on the walk of the
	// delivered copy.
	HoldoutDir string
	// Sync fsyncs every file and directory written (not needed on the
	// clean room's tmpfs).
	Sync bool
	// Progress is passed to the walk of the delivered copy (the one that
	// reads and hashes).
	Progress func(files int, bytes int64)
}

// Emit delivers the package at src into dest and returns the manifest of
// what was delivered, which is the pinned bpkg expect or the emit is
// refused. dest must be absent (it is created, mode 0755) or an empty
// directory (such as a freshly mounted tmpfs).
//
// It runs in three steps:
//
//  1. A structural walk of src: every rule of Walk that needs no file
//     contents (entry types, links, mounts, path segments, case-folding,
//     empty directories, leak paths), all problems reported at once, sorted,
//     before anything is written.
//  2. A copy, file by file, by parallel workers: each source file is opened
//     beneath src with openat2 and checked on fstat of that descriptor as
//     the walk does; the destination file is created O_CREAT|O_EXCL|
//     O_NOFOLLOW beneath the descriptor of a directory Emit has just made
//     (exactly the directories the files imply, nothing else); exactly the
//     fstat'ed size is copied in the kernel with copy_file_range(2) (a
//     read/write loop where the kernel cannot), and a source with a byte
//     more or fewer is refused (errChanged).
//  3. A full walk of the delivered copy, through the destination descriptor
//     Emit holds: every rule of Walk, the content rules included (holdout
//     copy with HoldoutDir, challenge shape), and the SHA-256 of every file.
//     Its manifest must be exactly expect (ErrNotPinned, naming both ids).
//
// What is measured is what was delivered, so a source that changes during
// the copy, or a destination written by someone else before the final
// walk, is refused, never delivered under the pin. The source's bytes are
// never held in memory (only a JSON file's, for the challenge-shape rule).
// On any refusal or error after dest was opened, everything the emit
// created is removed (its files, its directories, and dest itself when the
// emit created it), so a refused emit leaves dest as it found it. A
// cancelled ctx stops each step between files, the final walk included, and
// is undone the same way.
func Emit(ctx context.Context, src, dest, expect string, opts EmitOptions) (*Manifest, error) {
	if err := CheckID(expect); err != nil {
		return nil, err
	}
	// The holdout digests are read before anything is written: an
	// unreadable holdout directory stops the emit here, not after the copy.
	holdout, err := loadHoldout(WalkOptions{HoldoutDir: opts.HoldoutDir})
	if err != nil {
		return nil, err
	}
	e, destf, err := deliver(ctx, src, dest, opts)
	if err != nil {
		return nil, err
	}
	defer destf.Close()

	// The delivered copy is what is measured: walked through the descriptor
	// that was filled, so a path renamed meanwhile changes nothing.
	_, m, _, err := measurePinned(ctx, destf, WalkOptions{HoldoutDir: opts.HoldoutDir, Progress: opts.Progress}, holdout, opts.RootLabel, expect, "the delivered bytes give")
	if err != nil {
		// A refusal (a problem of the copy, or not the pin) names the copy.
		var re *RefusalError
		if errors.As(err, &re) {
			err = fmt.Errorf("delivered copy %s: %w", dest, err)
		}
		return nil, e.undo(err)
	}
	return m, nil
}

// Deliver copies the package at src into dest as Emit does (steps 1 and 2:
// the structural walk of src, every problem before anything is written,
// and the checked copy; a refusal removes what it created) but does not
// measure what it delivered: it neither hashes the copy nor applies the
// content rules. Nothing delivered by it may be used before it is measured.
// It is for a caller that measures the copy itself once it can no longer
// change: the clean room seals dest read-only and then opens it with
// OpenView, which walks, hashes and pins the sealed bytes (one walk of the
// copy instead of two). HoldoutDir is a rule of the measurement, so it is
// refused here.
func Deliver(ctx context.Context, src, dest string, opts EmitOptions) error {
	if opts.HoldoutDir != "" {
		return errors.New("pkgwalk.Deliver: HoldoutDir applies to the measurement (Emit, OpenView's caller)")
	}
	_, destf, err := deliver(ctx, src, dest, opts)
	if err != nil {
		return err
	}
	return destf.Close()
}

// deliver is Emit's steps 1 and 2: the structural walk of src and the copy
// into dest. It returns what it created (for undo) and the destination
// directory's descriptor, open.
func deliver(ctx context.Context, src, dest string, opts EmitOptions) (*emission, *os.File, error) {
	srcf, prob, err := openRoot(src)
	if err != nil {
		return nil, nil, err
	}
	if prob != nil {
		return nil, nil, fmt.Errorf("source %s: %w", src, Problems{prob})
	}
	defer srcf.Close()
	tree, err := walkFrom(ctx, srcf, "", src, WalkOptions{structural: true}, nil)
	if err != nil {
		return nil, nil, err
	}
	if err := tree.Err(); err != nil {
		return nil, nil, fmt.Errorf("source %s: %w", src, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if testHook != nil {
		testHook("walked")
	}

	// Writing into the source would change what is being copied; checked
	// before dest is created, and again on the opened directory.
	if inside, err := IsInside(src, dest); err != nil {
		return nil, nil, err
	} else if inside {
		return nil, nil, &RefusalError{Path: dest, Rule: ErrOutputInside, Detail: "destination inside the source package " + src}
	}
	destf, made, err := openEmptyDest(dest)
	if err != nil {
		return nil, nil, err
	}
	e := &emission{dest: dest, destFD: int(destf.Fd()), madeRoot: made}
	fail := func(err error) (*emission, *os.File, error) {
		err = e.undo(err)
		destf.Close()
		return nil, nil, err
	}
	if inside, err := isInside(int(destf.Fd()), src); err != nil {
		return fail(err)
	} else if inside {
		return fail(&RefusalError{Path: dest, Rule: ErrOutputInside, Detail: "destination inside the source package " + src})
	}

	if err := copyFiles(ctx, srcf, destf, tree.Files, opts.Sync, e); err != nil {
		var probs Problems
		if errors.As(err, &probs) {
			err = fmt.Errorf("source %s: %w", src, err)
		} else {
			err = fmt.Errorf("emitting into %s: %w", dest, err)
		}
		return fail(err)
	}
	if testHook != nil {
		testHook("copied")
	}
	return e, destf, nil
}

// Test hooks (set only by tests, through export_test.go). testHook is
// called with "walked" after Emit's structural walk of the source, with
// "open PATH" in a copy worker after the source file PATH was opened and
// checked and before a byte is copied, with "copied" after the last file
// was copied and before the delivered copy is walked, and with "read PATH"
// by any walk after the file PATH was opened and checked and before its
// bytes are read.
// forceCopyFallback makes every copy take the read/write loop; copyFallbacks
// counts the files that did.
var (
	testHook          func(stage string)
	forceCopyFallback bool
	copyFallbacks     atomic.Int64
)

// emission records what one Emit created beneath its destination, so that
// a refused emit can remove exactly that.
type emission struct {
	dest     string
	destFD   int
	madeRoot bool // dest itself was created by this emit

	mu    gosync.Mutex
	files []string // created files, package paths
	dirs  []string // created directories, parents before children
}

func (e *emission) addFile(p string) { e.mu.Lock(); e.files = append(e.files, p); e.mu.Unlock() }
func (e *emission) addDir(p string)  { e.mu.Lock(); e.dirs = append(e.dirs, p); e.mu.Unlock() }

// undo removes what the emit created (files, then directories deepest
// first, then dest when the emit made it) and returns cause, with any
// failure to remove added to it. Everything is removed by name beneath
// descriptors opened like every other entry (no symlink followed, no mount
// crossed), never by a path resolved from the top.
func (e *emission) undo(cause error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	parentFD, parent := -1, ""
	closeParent := func() {
		if parentFD >= 0 && parentFD != e.destFD {
			unix.Close(parentFD)
		}
		parentFD = -1
	}
	// openParent returns the descriptor of the directory dir beneath dest
	// ("" is dest itself), reusing the last one opened.
	openParent := func(dir string) (int, error) {
		if parentFD >= 0 && dir == parent {
			return parentFD, nil
		}
		closeParent()
		if dir == "" {
			parentFD, parent = e.destFD, ""
			return parentFD, nil
		}
		fd, err := openEntry(e.destFD, dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			return -1, err
		}
		parentFD, parent = fd, dir
		return fd, nil
	}
	slices.SortFunc(e.files, strings.Compare) // one parent opened per directory
	for _, p := range e.files {
		dir, name := splitPath(p)
		fd, err := openParent(dir)
		if err == nil {
			err = unix.Unlinkat(fd, name, 0)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing %q: %w", p, err))
		}
	}
	for i := len(e.dirs) - 1; i >= 0; i-- {
		dir, name := splitPath(e.dirs[i])
		fd, err := openParent(dir)
		if err == nil {
			err = unix.Unlinkat(fd, name, unix.AT_REMOVEDIR)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing directory %q: %w", e.dirs[i], err))
		}
	}
	closeParent()
	e.files, e.dirs = nil, nil
	if e.madeRoot {
		if err := removeMadeRoot(e.dest, e.destFD); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w (and removing what the emit created failed: %w)", cause, errors.Join(errs...))
	}
	return cause
}

// removeMadeRoot removes the (now empty) directory dest that Emit created,
// only while the name still refers to the directory held open at fd: a
// directory renamed into its place is left alone.
func removeMadeRoot(dest string, fd int) error {
	dest = filepath.Clean(dest)
	pfd, err := unix.Open(filepath.Dir(dest), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("removing %s: %w", dest, err)
	}
	defer unix.Close(pfd)
	var held, named unix.Stat_t
	if err := unix.Fstat(fd, &held); err != nil {
		return fmt.Errorf("removing %s: %w", dest, err)
	}
	if err := unix.Fstatat(pfd, filepath.Base(dest), &named, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("removing %s: %w", dest, err)
	}
	if held.Dev != named.Dev || held.Ino != named.Ino {
		return fmt.Errorf("removing %s: the name no longer refers to the directory the emit created", dest)
	}
	if err := unix.Unlinkat(pfd, filepath.Base(dest), unix.AT_REMOVEDIR); err != nil {
		return fmt.Errorf("removing %s: %w", dest, err)
	}
	return nil
}

// splitPath splits a package path into its directory ("" at the root) and
// its last segment.
func splitPath(p string) (string, string) {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return "", p
}

// openEmptyDest opens dest as a directory without following a final
// symlink, creating it when absent (made reports that), and refuses one
// that has any entry.
func openEmptyDest(dest string) (f *os.File, made bool, err error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	// Clean: "dest/" would follow a final symlink despite O_NOFOLLOW.
	dest = filepath.Clean(dest)
	fd, err := unix.Open(dest, flags, 0)
	if errors.Is(err, unix.ENOENT) {
		if err := unix.Mkdir(dest, 0o755); err != nil {
			return nil, false, fmt.Errorf("creating %s: %w", dest, err)
		}
		made = true
		fd, err = unix.Open(dest, flags, 0)
	}
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, false, &RefusalError{Path: dest, Rule: errRootSymlink}
	case errors.Is(err, unix.ENOTDIR):
		var st unix.Stat_t
		if unix.Lstat(dest, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return nil, false, &RefusalError{Path: dest, Rule: errRootSymlink}
		}
		return nil, false, &RefusalError{Path: dest, Rule: errRootNotDir}
	case err != nil:
		return nil, false, fmt.Errorf("opening %s: %w", dest, err)
	}
	f = os.NewFile(uintptr(fd), dest)
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		f.Close()
		// A dirty destination would deliver whatever was already there.
		return nil, false, &RefusalError{Path: dest, Rule: errDestNotEmpty, Detail: "holds " + quote(names[0])}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, false, fmt.Errorf("reading %s: %w", dest, err)
	}
	return f, made, nil
}

// copyFiles copies the files (sorted by path, so every directory's files
// are contiguous) from beneath src to beneath dest, creating each implied
// directory once, just before its first file. Each directory is made with
// mkdirat in a directory this function made, then opened with openat2 (no
// symlink, no mount crossing); each file is created O_EXCL|O_NOFOLLOW
// beneath its directory's descriptor, so nothing that appeared meanwhile is
// ever written through. Directories are made in order here; files are
// copied by parallel workers (copyOne). A source file that breaks a rule
// when it is opened for the copy, or changed size, ends the copy with a
// Problems error naming every such file seen.
func copyFiles(ctx context.Context, src, dest *os.File, files []File, sync bool, e *emission) (err error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return err
	}
	// The walker's rule decisions (openFile, openFailed) are reused for the
	// source side; its problems end the copy.
	w := &walker{rootDev: st.Dev}
	srcFD := int(src.Fd())
	rootFD, err := unix.FcntlInt(dest.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	type cjob struct {
		dir  *dirRef
		name string
		file *File
	}
	jobs := make(chan cjob, 64)
	var (
		wg       gosync.WaitGroup
		mu       gosync.Mutex
		firstErr error
		stopped  atomic.Bool
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		stopped.Store(true)
	}
	refused := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.problems) > 0
	}
	// Two copiers per core: a copy is one long system call that can
	// sleep (page allocation on the destination), and a second copier
	// keeps the core busy meanwhile.
	for range 2 * runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte // for the read/write fallback, made on first use
			for j := range jobs {
				if !stopped.Load() {
					if err := ctx.Err(); err != nil {
						fail(err)
					} else if err := copyOne(w, srcFD, j.dir.fd, j.name, j.file, sync, &buf, e); err != nil {
						fail(err)
					} else if refused() {
						stopped.Store(true)
					}
				}
				j.dir.release()
			}
		}()
	}

	type level struct {
		name string
		dir  *dirRef
	}
	stack := []level{{"", newDirRef(rootFD)}}
	closeTo := func(n int) {
		for len(stack) > n {
			l := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			l.dir.release()
		}
	}
	for i := range files {
		file := &files[i]
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				fail(err)
			}
		}
		if stopped.Load() {
			break
		}
		segs := strings.Split(file.Path, "/")
		dirs, base := segs[:len(segs)-1], segs[len(segs)-1]
		// Keep the open directories that are a prefix of this file's.
		keep := 1
		for keep < len(stack) && keep-1 < len(dirs) && stack[keep].name == dirs[keep-1] {
			keep++
		}
		closeTo(keep)
		for k := len(stack) - 1; k < len(dirs); k++ {
			d := dirs[k]
			parent := stack[len(stack)-1].dir.fd
			// EEXIST here means something else created it: refuse.
			if err := unix.Mkdirat(parent, d, 0o755); err != nil {
				fail(fmt.Errorf("mkdir for %q: %w", file.Path, err))
				break
			}
			e.addDir(strings.Join(dirs[:k+1], "/"))
			fd, err := openEntry(parent, d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
			if err != nil {
				fail(fmt.Errorf("opening new directory for %q: %w", file.Path, err))
				break
			}
			stack = append(stack, level{d, newDirRef(fd)})
		}
		if stopped.Load() {
			break
		}
		jobs <- cjob{dir: stack[len(stack)-1].dir.acquire(), name: base, file: file}
	}
	close(jobs)
	wg.Wait()
	closeTo(0)
	if len(w.problems) > 0 {
		return sortProblems(w.problems)
	}
	if firstErr != nil {
		return firstErr
	}
	// Cancelled while the last files were being copied: nothing checked
	// the context after them.
	if err := ctx.Err(); err != nil {
		return err
	}
	if sync {
		return syncDirs(dest, files)
	}
	return nil
}

// syncDirs fsyncs every directory the files imply (opened beneath root
// like every other entry), deepest first, then root.
func syncDirs(root *os.File, files []File) error {
	m := &Manifest{Files: make([]FileDigest, len(files))}
	for i, f := range files {
		m.Files[i].Path = f.Path
	}
	dirs := m.Dirs()
	for i := len(dirs) - 1; i >= 0; i-- {
		fd, err := openEntry(int(root.Fd()), dirs[i], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			return fmt.Errorf("opening %q to fsync: %w", dirs[i], err)
		}
		err = unix.Fsync(fd)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("fsync %q: %w", dirs[i], err)
		}
	}
	return root.Sync()
}

// copyOne copies one file: the source is opened beneath the source root
// srcFD and checked on fstat of that descriptor (w.openFile: a regular
// file, one link, the root's filesystem; a refusal is recorded in w and
// nothing is created), the destination is created exclusively beneath
// dirfd, and exactly the fstat'ed size is copied (copyExactly).
func copyOne(w *walker, srcFD, dirfd int, name string, file *File, sync bool, buf *[]byte, e *emission) error {
	// The whole relative path resolves beneath the source root with the
	// walk's openat2 rules: no symlink in any component, no mount crossed.
	sfd, st, ok := w.openFile(srcFD, file.Path, file.Path)
	if !ok {
		return nil
	}
	defer unix.Close(sfd)
	if st.Nlink != 1 {
		// Recorded by openFile: a second name can change the bytes.
		return nil
	}
	if testHook != nil {
		testHook("open " + file.Path)
	}
	// O_EXCL|O_NOFOLLOW: whatever appeared at the name meanwhile (a file,
	// a symlink out of the destination) is never written through.
	dfd, err := createEntry(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("creating %q: %w", file.Path, err)
	}
	e.addFile(file.Path)
	changed, err := copyExactly(sfd, dfd, st.Size, buf)
	if err == nil && sync {
		err = unix.Fsync(dfd)
	}
	if cerr := unix.Close(dfd); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copying %q: %w", file.Path, err)
	}
	if changed != "" {
		w.problem(file.Path, errChanged, changed)
	}
	return nil
}

// copyExactly copies size bytes from sfd to dfd (both at offset 0) and
// checks that the source has no byte more: changed is non-empty when the
// source holds fewer or more bytes than its fstat said (it is being
// written). The copy is done in the kernel with copy_file_range(2), never
// through user space; where the kernel cannot (EXDEV, EINVAL, EOPNOTSUPP,
// ENOSYS, for example between some filesystems, or it copies nothing
// before the size) it continues with a read/write loop through buf from
// where it stopped. Either way the bytes
// delivered are measured afterwards, on the destination.
func copyExactly(sfd, dfd int, size int64, buf *[]byte) (changed string, err error) {
	var done int64
	fallback := forceCopyFallback
	for done < size && !fallback {
		n, err := unix.CopyFileRange(sfd, nil, dfd, nil, int(min(size-done, 1<<30)), 0)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EXDEV || err == unix.EINVAL || err == unix.EOPNOTSUPP || err == unix.ENOSYS:
			fallback = true
			continue
		case err != nil:
			return "", err
		case n == 0:
			// The end of the file, or a filesystem whose copy_file_range
			// copies nothing without an error (as Go's os.File.ReadFrom
			// also assumes): the read loop below tells the two apart.
			fallback = true
			continue
		}
		done += int64(n)
	}
	if fallback && done < size {
		copyFallbacks.Add(1)
		if *buf == nil {
			*buf = make([]byte, 256<<10)
		}
		for done < size {
			n, err := readFull(sfd, (*buf)[:min(int64(len(*buf)), size-done)])
			if err != nil {
				return "", err
			}
			if n == 0 {
				return fmt.Sprintf("fstat said %d bytes, it ended after %d", size, done), nil
			}
			if err := writeAll(dfd, (*buf)[:n]); err != nil {
				return "", err
			}
			done += int64(n)
		}
	}
	// One byte past the size fstat gave: a source that grew is refused
	// rather than delivered truncated under a digest of its prefix.
	var one [1]byte
	for {
		n, err := unix.Read(sfd, one[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", err
		}
		if n > 0 {
			return fmt.Sprintf("fstat said %d bytes, it has more", size), nil
		}
		return "", nil
	}
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
