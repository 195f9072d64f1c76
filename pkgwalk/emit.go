package pkgwalk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	gosync "sync"

	"golang.org/x/sys/unix"
)

// EmitOptions controls Emit.
type EmitOptions struct {
	// RootLabel is the manifest's root label; "" means DefaultRootLabel.
	RootLabel string
	// HoldoutDir enables the holdout-copy leak rule on the source walk.
	HoldoutDir string
	// Sync fsyncs every file and directory written (not needed on the
	// clean room's tmpfs).
	Sync bool
	// Progress is passed to the source walk.
	Progress func(files int, bytes int64)
}

// Emit delivers the package at src into dest from its manifest: it walks
// src (every rule of Walk), refuses unless the walk is free of problems and
// its bpkg equals expect (ErrNotPinned), then creates in dest exactly the
// directories the manifest implies and each manifested file, one by one,
// from the very bytes that were hashed (O_CREAT|O_EXCL|O_NOFOLLOW beneath
// descriptors of directories it has just made). dest must be absent (it is
// created, mode 0755) or an empty directory. Finally dest is re-walked and
// verified against the manifest, exempting nothing.
//
// Copying a directory delivers whatever is in it; emitting a manifest
// delivers what was measured. The whole package is held in memory between
// the walk and the writes. On an error after writing began, dest holds a
// partial emission that never verifies; discard it.
func Emit(ctx context.Context, src, dest, expect string, opts EmitOptions) (*Manifest, error) {
	if err := CheckID(expect); err != nil {
		return nil, err
	}
	tree, err := Walk(src, WalkOptions{KeepBytes: true, HoldoutDir: opts.HoldoutDir, Progress: opts.Progress})
	if err != nil {
		return nil, err
	}
	if err := tree.Err(); err != nil {
		return nil, fmt.Errorf("source %s: %w", src, err)
	}
	m, err := NewManifest(tree, opts.RootLabel)
	if err != nil {
		return nil, err
	}
	id, err := m.ID()
	if err != nil {
		return nil, err
	}
	if id != expect {
		return nil, fmt.Errorf("source %s: %w", src, &RefusalError{Path: ".", Rule: ErrNotPinned, Detail: fmt.Sprintf("the walk gives %s, pinned %s", id, expect)})
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// Writing into the source would change what was just measured; checked
	// before dest is created, and again on the opened directory.
	if inside, err := IsInside(src, dest); err != nil {
		return nil, err
	} else if inside {
		return nil, &RefusalError{Path: dest, Rule: ErrOutputInside, Detail: "destination inside the source package " + src}
	}
	destf, err := openEmptyDest(dest)
	if err != nil {
		return nil, err
	}
	defer destf.Close()
	if inside, err := isInside(int(destf.Fd()), src); err != nil {
		return nil, err
	} else if inside {
		return nil, &RefusalError{Path: dest, Rule: ErrOutputInside, Detail: "destination inside the source package " + src}
	}

	if err := writeFiles(ctx, destf, tree.Files, opts.Sync); err != nil {
		return nil, fmt.Errorf("emitting into %s: %w", dest, err)
	}
	if _, err := verify(dest, m, false); err != nil {
		return nil, fmt.Errorf("re-walking %s after emission: %w", dest, err)
	}
	return m, nil
}

// openEmptyDest opens dest as a directory without following a final
// symlink, creating it when absent, and refuses one that has any entry.
func openEmptyDest(dest string) (*os.File, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	// Clean: "dest/" would follow a final symlink despite O_NOFOLLOW.
	dest = filepath.Clean(dest)
	fd, err := unix.Open(dest, flags, 0)
	if errors.Is(err, unix.ENOENT) {
		if err := unix.Mkdir(dest, 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", dest, err)
		}
		fd, err = unix.Open(dest, flags, 0)
	}
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, &RefusalError{Path: dest, Rule: ErrRootSymlink}
	case errors.Is(err, unix.ENOTDIR):
		var st unix.Stat_t
		if unix.Lstat(dest, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return nil, &RefusalError{Path: dest, Rule: ErrRootSymlink}
		}
		return nil, &RefusalError{Path: dest, Rule: ErrRootNotDir}
	case err != nil:
		return nil, fmt.Errorf("opening %s: %w", dest, err)
	}
	f := os.NewFile(uintptr(fd), dest)
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		f.Close()
		// A dirty destination would deliver whatever was already there.
		return nil, &RefusalError{Path: dest, Rule: ErrDestNotEmpty, Detail: "holds " + quote(names[0])}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		f.Close()
		return nil, fmt.Errorf("reading %s: %w", dest, err)
	}
	return f, nil
}

// writeFiles creates the files (sorted by path, so every directory's files
// are contiguous) beneath root, creating each implied directory once, just
// before its first file. Each directory is made with mkdirat in a directory
// this function made, then opened with openat2 (no symlink, no mount
// crossing); each file is created O_EXCL|O_NOFOLLOW beneath its
// directory's descriptor, so nothing that appeared meanwhile is ever
// written through. Directories are made in order here; files are written
// by parallel workers.
func writeFiles(ctx context.Context, root *os.File, files []File, sync bool) (err error) {
	rootFD, err := unix.FcntlInt(root.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	type wjob struct {
		dir  *dirRef
		name string
		file *File
	}
	jobs := make(chan wjob, 64)
	var (
		wg       gosync.WaitGroup
		mu       gosync.Mutex
		firstErr error
	)
	fail := func(e error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = e
		}
		mu.Unlock()
	}
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return firstErr
	}
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if failed() == nil {
					if e := writeOne(j.dir.fd, j.name, j.file, sync); e != nil {
						fail(e)
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
			if e := ctx.Err(); e != nil {
				fail(e)
			}
		}
		if failed() != nil {
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
		for _, d := range dirs[len(stack)-1:] {
			parent := stack[len(stack)-1].dir.fd
			// EEXIST here means something else created it: refuse.
			if e := unix.Mkdirat(parent, d, 0o755); e != nil {
				fail(fmt.Errorf("mkdir for %q: %w", file.Path, e))
				break
			}
			fd, e := openEntry(parent, d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC)
			if e != nil {
				fail(fmt.Errorf("opening new directory for %q: %w", file.Path, e))
				break
			}
			stack = append(stack, level{d, newDirRef(fd)})
		}
		if failed() != nil {
			break
		}
		jobs <- wjob{dir: stack[len(stack)-1].dir.acquire(), name: base, file: file}
	}
	close(jobs)
	wg.Wait()
	if e := failed(); e != nil {
		closeTo(0)
		return e
	}
	closeTo(0)
	if sync {
		return syncDirs(root, files)
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

func writeOne(dirfd int, name string, file *File, sync bool) error {
	how := &unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Mode:    0o644,
		Resolve: resolveFlags,
	}
	fd, err := unix.Openat2(dirfd, name, how)
	for err == unix.EINTR {
		fd, err = unix.Openat2(dirfd, name, how)
	}
	if err != nil {
		return fmt.Errorf("creating %q: %w", file.Path, err)
	}
	for b := file.Data; len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return fmt.Errorf("writing %q: %w", file.Path, err)
		}
		b = b[n:]
	}
	if sync {
		if err := unix.Fsync(fd); err != nil {
			unix.Close(fd)
			return fmt.Errorf("fsync %q: %w", file.Path, err)
		}
	}
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("closing %q: %w", file.Path, err)
	}
	return nil
}
