package fsx

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// tree makes dir/{file, sub/inner, link -> file, uplink -> ..,
// dirlink -> sub, fifo} and returns dir with a descriptor of it.
func tree(t *testing.T) (string, int) {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"sub"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"file", "sub/inner"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"link": "file", "uplink": "..", "dirlink": "sub"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return dir, int(d.Fd())
}

// eachResolver runs f against both ways a name is resolved: openat2 and
// the walk used where the kernel has none (skipped, with its reason, only
// where this kernel has no openat2).
func eachResolver(t *testing.T, f func(t *testing.T, r resolver)) {
	t.Helper()
	for _, r := range []resolver{{walk: false}, {walk: true}} {
		t.Run(r.name(), func(t *testing.T) {
			t.Parallel()
			if !r.walk && auto().walk {
				t.Skip("openat2 answers ENOSYS on this kernel: only the walk can run")
			}
			f(t, r)
		})
	}
}

func (r resolver) name() string {
	if r.walk {
		return "walk"
	}
	return "openat2"
}

func TestOpen(t *testing.T) {
	t.Parallel()
	eachResolver(t, func(t *testing.T, r resolver) {
		dir, dirfd := tree(t)
		self := "/proc/self/fd/" + strconv.Itoa(dirfd)
		for _, tc := range []struct {
			name  string
			flags int
			want  error // nil: opens
		}{
			{"file", unix.O_RDONLY, nil},
			{"sub/inner", unix.O_RDONLY, nil},
			{"sub/../file", unix.O_RDONLY, nil}, // ".." that stays beneath is fine
			{"sub/../sub/../file", unix.O_RDONLY, nil},
			{"sub//inner", unix.O_RDONLY, nil}, // empty and "." components are nothing
			{"./sub/./inner", unix.O_RDONLY, nil},
			{"sub", unix.O_RDONLY | unix.O_DIRECTORY, nil},
			{"sub/", unix.O_RDONLY, nil},
			{"sub/..", unix.O_RDONLY | unix.O_DIRECTORY, nil},
			{".", unix.O_PATH | unix.O_DIRECTORY, nil},
			{"file/", unix.O_RDONLY, unix.ENOTDIR}, // a trailing slash asks for a directory
			{"file/x", unix.O_RDONLY, unix.ENOTDIR},
			{"file", unix.O_RDONLY | unix.O_DIRECTORY, unix.ENOTDIR},
			{"sub", unix.O_PATH | unix.O_DIRECTORY, nil}, // O_PATH takes no O_NOCTTY
			{"file", unix.O_PATH | unix.O_DIRECTORY, unix.ENOTDIR},
			{"link", unix.O_PATH, unix.ELOOP},            // O_PATH: RESOLVE_NO_SYMLINKS refuses the link
			{"link", unix.O_PATH | unix.O_NOFOLLOW, nil}, // unless the caller asks for the link itself
			{"dirlink/inner", unix.O_PATH, unix.ELOOP},
			{"fifo", unix.O_RDONLY | unix.O_NONBLOCK, nil}, // opened; the caller's fstat refuses it
			{"link", unix.O_RDONLY, unix.ELOOP},            // the last component a symlink
			{"dirlink/inner", unix.O_RDONLY, unix.ELOOP},   // a symlink before it
			{"dirlink/", unix.O_RDONLY, unix.ELOOP},        // a trailing slash would follow it
			{"uplink/file", unix.O_RDONLY, unix.ELOOP},
			{"../" + filepath.Base(dir) + "/file", unix.O_RDONLY, unix.EXDEV}, // climbs out
			{"sub/../../" + filepath.Base(dir) + "/file", unix.O_RDONLY, unix.EXDEV},
			{"..", unix.O_PATH, unix.EXDEV},
			{dir + "/file", unix.O_RDONLY, unix.EXDEV}, // absolute
			{"/", unix.O_PATH, unix.EXDEV},
			{self[1:], unix.O_RDONLY, unix.ENOENT}, // not beneath: no such name
			{"missing", unix.O_RDONLY, unix.ENOENT},
			{"missing/file", unix.O_RDONLY, unix.ENOENT},
			{"", unix.O_RDONLY, unix.ENOENT},
		} {
			fd, err := r.open(dirfd, tc.name, tc.flags, 0)
			if err == nil {
				unix.Close(fd)
			}
			if tc.want == nil && err != nil {
				t.Errorf("Open(%q) = %v, want it opened", tc.name, err)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Open(%q) = %v, want %v", tc.name, err, tc.want)
			}
		}
	})
}

// TestOpenLands: what is opened is the file named, not merely something
// (the walk's ".." goes back to the directory it came from).
func TestOpenLands(t *testing.T) {
	t.Parallel()
	eachResolver(t, func(t *testing.T, r resolver) {
		dir, dirfd := tree(t)
		for name, want := range map[string]string{
			"file":               "file",
			"sub/../file":        "file",
			"sub/inner":          "sub/inner",
			"sub/../sub//inner":  "sub/inner",
			"sub/../sub/./inner": "sub/inner",
		} {
			fd, err := r.open(dirfd, name, unix.O_RDONLY, 0)
			if err != nil {
				t.Errorf("Open(%q) = %v", name, err)
				continue
			}
			if !sameFile(t, fd, filepath.Join(dir, want)) {
				t.Errorf("Open(%q) opened another file than %s", name, want)
			}
			unix.Close(fd)
		}
	})
}

// sameFile says whether fd is the file at path (device and inode).
func sameFile(t *testing.T, fd int, path string) bool {
	t.Helper()
	var a, b unix.Stat_t
	if err := unix.Fstat(fd, &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lstat(path, &b); err != nil {
		t.Fatal(err)
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// FollowInside follows links, each resolved beneath the directory: the
// chain uplink -> .. climbs out (EXDEV), links that stay inside resolve.
func TestOpenFollowInside(t *testing.T) {
	t.Parallel()
	eachResolver(t, func(t *testing.T, r resolver) {
		dir, dirfd := tree(t)
		for name, target := range map[string]string{"abslink": "/etc", "loop1": "loop2", "loop2": "loop1", "chain": "dirlink/../link"} {
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct {
			name string
			want error
		}{
			{"link", nil},
			{"dirlink/inner", nil},
			{"sub/../link", nil},
			{"chain", nil},
			{"uplink/file", unix.EXDEV},
			{"uplink", unix.EXDEV},
			{"abslink", unix.EXDEV}, // an absolute target leaves the tree
			{"loop1", unix.ELOOP},   // a loop of links ends
			{"missing", unix.ENOENT},
		} {
			fd, err := r.open(dirfd, tc.name, unix.O_PATH, 0, FollowInside)
			if err == nil {
				unix.Close(fd)
			}
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Errorf("Open(%q, FollowInside) = %v, want %v", tc.name, err, tc.want)
			}
		}
		fd, err := r.open(dirfd, "chain", unix.O_PATH, 0, FollowInside)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if !sameFile(t, fd, filepath.Join(dir, "file")) {
			t.Error("chain -> dirlink/../link -> file opened another file")
		}
	})
}

// FollowInside never follows a /proc magic link: /proc/self/root jumps
// to a process's root, whatever its text says.
func TestOpenMagicLink(t *testing.T) {
	t.Parallel()
	eachResolver(t, func(t *testing.T, r resolver) {
		proc, err := unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Skipf("no /proc to test magic links on: %v", err)
		}
		defer unix.Close(proc)
		for _, name := range []string{"self/root", "self/cwd", "thread-self/root"} {
			fd, err := r.open(proc, name, unix.O_PATH, 0, FollowInside)
			if err == nil {
				unix.Close(fd)
			}
			if !errors.Is(err, unix.ELOOP) {
				t.Errorf("Open(/proc, %q, FollowInside) = %v, want ELOOP", name, err)
			}
		}
	})
}

func TestOpenCloseOnExec(t *testing.T) {
	t.Parallel()
	eachResolver(t, func(t *testing.T, r resolver) {
		_, dirfd := tree(t)
		for _, name := range []string{"file", "sub/..", "sub"} {
			fd, err := r.open(dirfd, name, unix.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			unix.Close(fd)
			if err != nil {
				t.Fatal(err)
			}
			if fl&unix.FD_CLOEXEC == 0 {
				t.Errorf("descriptor of %q lacks FD_CLOEXEC", name)
			}
		}
	})
}

func TestOpenCreate(t *testing.T) {
	t.Parallel()
	eachResolver(t, func(t *testing.T, r resolver) {
		dir, dirfd := tree(t)
		fd, err := r.open(dirfd, "sub/new", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		fi, err := os.Stat(filepath.Join(dir, "sub/new"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&^0o600 != 0 {
			t.Errorf("created with mode %v, want at most 0600", fi.Mode().Perm())
		}
		// O_EXCL: an existing name, a link included, is not created over.
		for _, name := range []string{"sub/new", "link", "dirlink"} {
			if _, err := r.open(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600); !errors.Is(err, unix.EEXIST) {
				t.Errorf("create of existing %s = %v, want EEXIST", name, err)
			}
		}
		// Without O_EXCL an existing file opens; a link is refused.
		fd, err = r.open(dirfd, "sub/new", unix.O_WRONLY|unix.O_CREAT, 0o600)
		if err != nil {
			t.Errorf("O_CREAT of an existing file = %v, want it opened", err)
		} else {
			unix.Close(fd)
		}
		if _, err := r.open(dirfd, "link", unix.O_WRONLY|unix.O_CREAT, 0o600); !errors.Is(err, unix.ELOOP) {
			t.Errorf("O_CREAT on a link = %v, want ELOOP", err)
		}
		// Through a symlink, O_CREAT makes nothing.
		if _, err := r.open(dirfd, "dirlink/new2", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600); !errors.Is(err, unix.ELOOP) {
			t.Errorf("create through a symlink = %v, want ELOOP", err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "sub/new2")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("create through a symlink made sub/new2 (%v)", err)
		}
		// A name ending in "/" asks for a directory: O_CREAT makes no file
		// of it (EISDIR, as open(2) says).
		if _, err := r.open(dirfd, "newdir/", unix.O_WRONLY|unix.O_CREAT, 0o600); !errors.Is(err, unix.EISDIR) {
			t.Errorf("O_CREAT of newdir/ = %v, want EISDIR", err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "newdir")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("O_CREAT of newdir/ made newdir (%v)", err)
		}
		// O_TMPFILE makes an unnamed file in the directory named: the
		// walk opens it in the directory it checked, as openat2 does.
		// Where the filesystem has no O_TMPFILE (gVisor 20221219's), the
		// answer must be the one openat(2) gives there.
		nfd, native := unix.Open(filepath.Join(dir, "sub"), unix.O_RDWR|unix.O_TMPFILE|unix.O_CLOEXEC, 0o600)
		if native == nil {
			unix.Close(nfd)
		}
		fd, err = r.open(dirfd, "sub", unix.O_RDWR|unix.O_TMPFILE, 0o600)
		switch {
		case native != nil && !errors.Is(err, native):
			t.Errorf("O_TMPFILE in sub = %v, want %v as openat(2) answers here", err, native)
		case native != nil:
		case err != nil:
			t.Errorf("O_TMPFILE in sub = %v, want it opened", err)
		default:
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 0 {
				t.Errorf("O_TMPFILE opened mode %#o with %d links (%v), want an unnamed regular file", st.Mode, st.Nlink, err)
			}
			unix.Close(fd)
		}
		// Nor outside the tree.
		if _, err := r.open(dirfd, "../new3", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600); !errors.Is(err, unix.EXDEV) {
			t.Errorf("create above the tree = %v, want EXDEV", err)
		}
	})
}

func TestOpenFile(t *testing.T) {
	t.Parallel()
	eachResolver(t, func(t *testing.T, r resolver) {
		dir, _ := tree(t)
		f, err := r.openFile(dir, "sub/inner", unix.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if want := filepath.Join(dir, "sub", "inner"); f.Name() != want {
			t.Errorf("Name() = %q, want %q", f.Name(), want)
		}
		_, err = r.openFile(dir, "link", unix.O_RDONLY, 0)
		var pe *os.PathError
		if !errors.As(err, &pe) || pe.Path != filepath.Join(dir, "link") || !errors.Is(err, unix.ELOOP) {
			t.Errorf("OpenFile(link) = %v, want a PathError naming %s with ELOOP", err, filepath.Join(dir, "link"))
		}
		// The directory itself must not be a symlink (ENOTDIR, as
		// O_DIRECTORY|O_NOFOLLOW says on Linux), nor a file.
		for _, d := range []string{"dirlink", "file"} {
			if _, err := r.openFile(filepath.Join(dir, d), "inner", unix.O_RDONLY, 0); !errors.Is(err, unix.ENOTDIR) {
				t.Errorf("OpenFile with %s as the directory = %v, want ENOTDIR", d, err)
			}
		}
	})
}

func TestOpenPath(t *testing.T) {
	t.Parallel()
	eachResolver(t, func(t *testing.T, r resolver) {
		dir, _ := tree(t)
		for _, p := range []string{filepath.Join(dir, "sub"), filepath.Join(dir, "sub", "..", "sub") + "/", "/"} {
			fd, err := r.openPath(p, unix.O_RDONLY|unix.O_DIRECTORY)
			if err != nil {
				t.Errorf("OpenPath(%s) = %v", p, err)
				continue
			}
			if !sameFile(t, fd, filepath.Clean(p)) {
				t.Errorf("OpenPath(%s) opened another directory", p)
			}
			unix.Close(fd)
		}
		// Not beneath anything: ".." climbs, "/.." is "/".
		fd, err := r.openPath("/..", unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			t.Fatalf("OpenPath(/..) = %v", err)
		}
		if !sameFile(t, fd, "/") {
			t.Error("OpenPath(/..) is not /")
		}
		unix.Close(fd)
		for _, p := range []string{filepath.Join(dir, "dirlink"), filepath.Join(dir, "dirlink", "inner"), filepath.Join(dir, "link")} {
			if _, err := r.openPath(p, unix.O_RDONLY); !errors.Is(err, unix.ELOOP) {
				t.Errorf("OpenPath(%s) = %v, want ELOOP", p, err)
			}
		}
	})
}

// TestOpenMount: a mount over a name in the tree is refused by default and
// entered with AcrossMounts, through either resolver: a tmpfs (another
// device), and bind mounts of a directory and of a file from the same
// filesystem (same device, another mount: only the mount id tells). The
// mounts are made in a mount namespace of one locked thread that dies
// with the test's goroutine, so nothing is left mounted on the host.
func TestOpenMount(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs in a private mount namespace")
	}
	dir, _ := tree(t)
	for _, d := range []string{"other", "bound"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "fileb"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		skip string
		errs []string
	}
	done := make(chan result)
	go func() {
		// Never unlocked: the thread, and its mount namespace, end with
		// this goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- result{skip: "unshare(CLONE_NEWNS): " + err.Error()}
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- result{skip: "making / private: " + err.Error()}
			return
		}
		for _, m := range []struct{ src, dst, fstype string }{
			{"tmpfs", "sub", "tmpfs"},
			{filepath.Join(dir, "other"), "bound", ""},
			{filepath.Join(dir, "file"), "fileb", ""},
		} {
			flags := uintptr(unix.MS_BIND)
			if m.fstype != "" {
				flags = 0
			}
			if err := unix.Mount(m.src, filepath.Join(dir, m.dst), m.fstype, flags, ""); err != nil {
				done <- result{skip: "mounting " + m.dst + ": " + err.Error()}
				return
			}
		}
		// Opened in this namespace: a descriptor from before the unshare
		// would look up names in the old mount tree.
		dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- result{skip: "opening the tree: " + err.Error()}
			return
		}
		defer unix.Close(dirfd)
		var res result
		for _, r := range []resolver{{walk: false}, {walk: true}} {
			if !r.walk && auto().walk {
				continue // no openat2 here
			}
			for _, tc := range []struct {
				name  string
				flags int
			}{
				{"sub", unix.O_RDONLY | unix.O_DIRECTORY},
				{"sub/", unix.O_PATH},
				{"sub/x", unix.O_WRONLY | unix.O_CREAT}, // nothing created on the mount
				{"bound", unix.O_RDONLY | unix.O_DIRECTORY},
				{"bound/..", unix.O_PATH},
				{"fileb", unix.O_RDONLY},
				{"fileb", unix.O_PATH},
			} {
				mode := uint32(0)
				if tc.flags&unix.O_CREAT != 0 {
					mode = 0o600
				}
				if fd, err := r.open(dirfd, tc.name, tc.flags, mode); err == nil {
					unix.Close(fd)
					res.errs = append(res.errs, r.name()+": Open of "+tc.name+" across a mount opened, want EXDEV")
				} else if !errors.Is(err, unix.EXDEV) {
					res.errs = append(res.errs, r.name()+": Open of "+tc.name+" across a mount = "+err.Error()+", want EXDEV")
				}
				if fd, err := r.open(dirfd, tc.name, tc.flags, mode, AcrossMounts); err == nil {
					unix.Close(fd)
				} else {
					res.errs = append(res.errs, r.name()+": Open of "+tc.name+" with AcrossMounts = "+err.Error()+", want it opened")
				}
			}
		}
		done <- res
	}()
	r := <-done
	if r.skip != "" {
		t.Skip(r.skip)
	}
	for _, e := range r.errs {
		t.Error(e)
	}
}

// openat2 refuses flags open(2) would ignore; the walk refuses the same.
func TestOpenInvalid(t *testing.T) {
	t.Parallel()
	eachResolver(t, func(t *testing.T, r resolver) {
		_, dirfd := tree(t)
		for _, tc := range []struct {
			flags int
			mode  uint32
		}{
			{unix.O_RDONLY, 0o600},                    // a mode without O_CREAT
			{unix.O_RDONLY | unix.O_DIRECTORY, 0o600}, // nor O_TMPFILE (whose bits include O_DIRECTORY's)
			{unix.O_WRONLY | unix.O_CREAT, 0o10000},   // not a permission
			{unix.O_PATH | unix.O_RDWR, 0},            // O_PATH takes no access mode
			{unix.O_PATH | unix.O_NONBLOCK, 0},
		} {
			fd, err := r.open(dirfd, "file", tc.flags, tc.mode)
			if err == nil {
				unix.Close(fd)
			}
			if !errors.Is(err, unix.EINVAL) {
				t.Errorf("Open(file, %#x, %#o) = %v, want EINVAL", tc.flags, tc.mode, err)
			}
		}
	})
}

// Where the kernel reports no mount id (gVisor), the walk tells a mount
// by its device alone; where it does, a bind mount of the same device is
// a crossing too.
func TestCrossed(t *testing.T) {
	t.Parallel()
	root := node{dev: 1, mnt: 10, hasMnt: true}
	for _, tc := range []struct {
		name string
		n    node
		want bool
	}{
		{"same mount", node{dev: 1, mnt: 10, hasMnt: true}, false},
		{"another device", node{dev: 2, mnt: 12, hasMnt: true}, true},
		{"bind mount, same device", node{dev: 1, mnt: 11, hasMnt: true}, true},
		{"no mount id, same device", node{dev: 1}, false},
		{"no mount id, another device", node{dev: 2}, true},
		// Both ids known: they decide (overlayfs gives a file its layer's
		// device inside one mount).
		{"same mount, another device", node{dev: 2, mnt: 10, hasMnt: true}, false},
	} {
		if got := crossed(root, tc.n); got != tc.want {
			t.Errorf("%s: crossed = %v, want %v", tc.name, got, tc.want)
		}
	}
	if crossed(node{dev: 1}, node{dev: 1, mnt: 11, hasMnt: true}) {
		t.Error("a mount id known on one side only decided a crossing")
	}
	// No mount ids, overlayfs: a file reports its layer's device.
	ovl := func(mode uint32, dev uint64, fs int64) node { return node{mode: mode, dev: dev, fsType: fs} }
	oroot := ovl(unix.S_IFDIR, 0xa, unix.OVERLAYFS_SUPER_MAGIC)
	for _, tc := range []struct {
		name string
		n    node
		want bool
	}{
		{"overlay file on its layer's device", ovl(unix.S_IFREG, 0x9, unix.OVERLAYFS_SUPER_MAGIC), false},
		{"overlay directory on another device", ovl(unix.S_IFDIR, 0x9, unix.OVERLAYFS_SUPER_MAGIC), true},
		{"a file of another filesystem", ovl(unix.S_IFREG, 0x9, unix.TMPFS_MAGIC), true},
	} {
		if got := crossed(oroot, tc.n); got != tc.want {
			t.Errorf("%s: crossed = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !crossed(ovl(unix.S_IFDIR, 0xa, unix.TMPFS_MAGIC), ovl(unix.S_IFREG, 0x9, unix.OVERLAYFS_SUPER_MAGIC)) {
		t.Error("an overlay file below a directory that is not on overlayfs was not a crossing")
	}
}

// TestOpenRace swaps components while they are looked up
// (renameat2 RENAME_EXCHANGE, atomic): a directory with a symbolic link
// to a directory outside the tree, and a directory of the tree with one
// outside it. Whatever the interleaving, no lookup may open the file
// outside: openat2 checks renames itself; the walk holds an O_PATH
// descriptor of every directory it went through, so a swap after a step
// cannot redirect it (the symlink is refused when it is what the step
// finds, and ".." goes back to the held parent, never to where a moved
// directory now lives).
func TestOpenRace(t *testing.T) {
	t.Parallel()
	eachResolver(t, func(t *testing.T, r resolver) {
		base := t.TempDir()
		in, out := filepath.Join(base, "in"), filepath.Join(base, "out")
		for _, d := range []string{in + "/a", in + "/b", out + "/a"} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{in + "/a/secret", in + "/file", out + "/secret", out + "/file", out + "/a/secret", base + "/file"} {
			if err := os.WriteFile(f, []byte(f), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(out, in+"/l"); err != nil {
			t.Fatal(err)
		}
		// The files the attack is after, never in the tree (out/a is,
		// when swapped in: its secret may be opened then). Known by
		// inode: their names move during the race.
		outside := map[[2]uint64]string{}
		for _, f := range []string{out + "/secret", out + "/file", base + "/file"} {
			var st unix.Stat_t
			if err := unix.Stat(f, &st); err != nil {
				t.Fatal(err)
			}
			outside[[2]uint64{st.Dev, st.Ino}] = f
		}
		dirfd, err := unix.Open(in, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(dirfd)
		swap := func(a, b string) error {
			return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
		}
		if err := swap(in+"/a", in+"/l"); err != nil {
			t.Skipf("renameat2(RENAME_EXCHANGE) unavailable: %v", err)
		}
		if err := swap(in+"/a", in+"/l"); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		swapped := make(chan int)
		go func() {
			n := 0
			for {
				select {
				case <-stop:
					swapped <- n
					return
				default:
				}
				// in/a <-> in/l (a symlink to out), then in/b <-> out/a
				// (a directory moved out of the tree and one moved in).
				if swap(in+"/a", in+"/l") == nil {
					n++
				}
				if swap(in+"/b", out+"/a") == nil {
					n++
				}
			}
		}()
		opened, refused := 0, 0
		for i := 0; i < 2000; i++ {
			for _, name := range []string{"a/secret", "b/secret", "a/../file", "b/../file", "b/../a/secret"} {
				fd, err := r.open(dirfd, name, unix.O_RDONLY, 0)
				if err != nil {
					// ELOOP: the symlink was there; ENOENT: the
					// swapped-in directory has no such file; EAGAIN
					// and EXDEV: openat2 saw the rename.
					if !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EXDEV) {
						t.Errorf("Open(%q) during swaps = %v", name, err)
					}
					refused++
					continue
				}
				opened++
				var st unix.Stat_t
				if err := unix.Fstat(fd, &st); err != nil {
					t.Fatal(err)
				}
				unix.Close(fd)
				if p, ok := outside[[2]uint64{st.Dev, st.Ino}]; ok {
					t.Errorf("Open(%q) during swaps opened %s, outside the tree", name, p)
				}
			}
		}
		close(stop)
		if n := <-swapped; n == 0 {
			t.Fatal("no swap happened: no race was run")
		}
		if opened == 0 {
			t.Error("no lookup succeeded during the swaps: the test proves nothing")
		}
	})
}

// OpenDir opens a directory to read, and refuses a symbolic link at its
// last component with ENOTDIR as Linux's O_DIRECTORY|O_NOFOLLOW does (on
// gVisor too: TestUnderGVisor runs this there).
func TestOpenDir(t *testing.T) {
	t.Parallel()
	dir, _ := tree(t)
	fd, err := OpenDir(filepath.Join(dir, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if !sameFile(t, fd, filepath.Join(dir, "sub")) {
		t.Error("OpenDir(sub) opened another directory")
	}
	// Readable: it lists the directory.
	buf := make([]byte, 4096)
	if n, err := unix.Getdents(fd, buf); err != nil || n == 0 {
		t.Errorf("getdents on OpenDir's descriptor = %d, %v", n, err)
	}
	for name, want := range map[string]error{"dirlink": unix.ENOTDIR, "file": unix.ENOTDIR, "fifo": unix.ENOTDIR, "missing": unix.ENOENT} {
		fd, err := OpenDir(filepath.Join(dir, name))
		if err == nil {
			unix.Close(fd)
		}
		var pe *os.PathError
		if !errors.Is(err, want) || !errors.As(err, &pe) || pe.Path != filepath.Join(dir, name) {
			t.Errorf("OpenDir(%s) = %v, want a PathError naming it with %v", name, err, want)
		}
	}
	// A trailing "/" or "/." would make the kernel follow the link.
	for _, name := range []string{"dirlink/", "dirlink//", "dirlink/.", "dirlink/./"} {
		fd, err := OpenDir(dir + "/" + name)
		if err == nil {
			unix.Close(fd)
		}
		if !errors.Is(err, unix.ENOTDIR) {
			t.Errorf("OpenDir(%s) = %v, want ENOTDIR", name, err)
		}
	}
	for _, name := range []string{"sub/", "sub/.", "/", "/.", "//"} {
		path := dir + "/" + name
		if strings.HasPrefix(name, "/") {
			path = name
		}
		fd, err := OpenDir(path)
		if err != nil {
			t.Errorf("OpenDir(%s) = %v, want it opened", path, err)
			continue
		}
		if !sameFile(t, fd, filepath.Clean(path)) {
			t.Errorf("OpenDir(%s) opened another directory", path)
		}
		unix.Close(fd)
	}
}

// OpenDirAt checks the last component beneath a directory descriptor the
// same way.
func TestOpenDirAt(t *testing.T) {
	t.Parallel()
	dir, dirfd := tree(t)
	fd, err := OpenDirAt(dirfd, "sub")
	if err != nil {
		t.Fatal(err)
	}
	if !sameFile(t, fd, filepath.Join(dir, "sub")) {
		t.Error("OpenDirAt(sub) opened another directory")
	}
	unix.Close(fd)
	for name, want := range map[string]error{"dirlink": unix.ENOTDIR, "dirlink/": unix.ENOTDIR, "dirlink/.": unix.ENOTDIR, "file": unix.ENOTDIR, "missing": unix.ENOENT} {
		fd, err := OpenDirAt(dirfd, name)
		if err == nil {
			unix.Close(fd)
		}
		if !errors.Is(err, want) {
			t.Errorf("OpenDirAt(%s) = %v, want %v", name, err, want)
		}
	}
}
