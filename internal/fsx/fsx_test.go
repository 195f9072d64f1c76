package fsx

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
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

func TestOpen(t *testing.T) {
	t.Parallel()
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
		{"sub", unix.O_RDONLY | unix.O_DIRECTORY, nil},
		{"sub", unix.O_PATH | unix.O_DIRECTORY, nil}, // O_PATH takes no O_NOCTTY
		{"link", unix.O_PATH, unix.ELOOP},            // O_PATH: RESOLVE_NO_SYMLINKS refuses the link
		{"link", unix.O_PATH | unix.O_NOFOLLOW, nil}, // unless the caller asks for the link itself
		{"dirlink/inner", unix.O_PATH, unix.ELOOP},
		{"fifo", unix.O_RDONLY | unix.O_NONBLOCK, nil}, // opened; the caller's fstat refuses it
		{"link", unix.O_RDONLY, unix.ELOOP},            // the last component a symlink
		{"dirlink/inner", unix.O_RDONLY, unix.ELOOP},   // a symlink before it
		{"uplink/file", unix.O_RDONLY, unix.ELOOP},
		{"../" + filepath.Base(dir) + "/file", unix.O_RDONLY, unix.EXDEV}, // climbs out
		{dir + "/file", unix.O_RDONLY, unix.EXDEV},                        // absolute
		{self[1:], unix.O_RDONLY, unix.ENOENT},                            // not beneath: no such name
		{"missing", unix.O_RDONLY, unix.ENOENT},
	} {
		fd, err := Open(dirfd, tc.name, tc.flags, 0)
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
}

// FollowInside follows links, each resolved beneath the directory: the
// chain uplink -> .. climbs out (EXDEV), links that stay inside resolve.
func TestOpenFollowInside(t *testing.T) {
	t.Parallel()
	_, dirfd := tree(t)
	for _, tc := range []struct {
		name string
		want error
	}{
		{"link", nil},
		{"dirlink/inner", nil},
		{"sub/../link", nil},
		{"uplink/file", unix.EXDEV},
		{"uplink", unix.EXDEV},
		{"missing", unix.ENOENT},
	} {
		fd, err := Open(dirfd, tc.name, unix.O_PATH, 0, FollowInside)
		if err == nil {
			unix.Close(fd)
		}
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("Open(%q, FollowInside) = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestOpenCloseOnExec(t *testing.T) {
	t.Parallel()
	_, dirfd := tree(t)
	fd, err := Open(dirfd, "file", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if fl&unix.FD_CLOEXEC == 0 {
		t.Error("descriptor lacks FD_CLOEXEC")
	}
}

func TestOpenCreate(t *testing.T) {
	t.Parallel()
	dir, dirfd := tree(t)
	fd, err := Open(dirfd, "sub/new", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
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
	// Through a symlink, O_CREAT makes nothing.
	if _, err := Open(dirfd, "dirlink/new2", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600); !errors.Is(err, unix.ELOOP) {
		t.Errorf("create through a symlink = %v, want ELOOP", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub/new2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("create through a symlink made sub/new2 (%v)", err)
	}
}

func TestOpenFile(t *testing.T) {
	t.Parallel()
	dir, _ := tree(t)
	f, err := OpenFile(dir, "sub/inner", unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if want := filepath.Join(dir, "sub", "inner"); f.Name() != want {
		t.Errorf("Name() = %q, want %q", f.Name(), want)
	}
	_, err = OpenFile(dir, "link", unix.O_RDONLY, 0)
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Path != filepath.Join(dir, "link") || !errors.Is(err, unix.ELOOP) {
		t.Errorf("OpenFile(link) = %v, want a PathError naming %s with ELOOP", err, filepath.Join(dir, "link"))
	}
	// The directory itself must not be a symlink.
	// (O_DIRECTORY|O_NOFOLLOW on a symlink is ENOTDIR.)
	if _, err := OpenFile(filepath.Join(dir, "dirlink"), "inner", unix.O_RDONLY, 0); !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("OpenFile through a symlinked directory = %v, want ENOTDIR", err)
	}
}

func TestOpenPath(t *testing.T) {
	t.Parallel()
	dir, _ := tree(t)
	fd, err := OpenPath(filepath.Join(dir, "sub"), unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	for _, p := range []string{filepath.Join(dir, "dirlink"), filepath.Join(dir, "dirlink", "inner")} {
		if _, err := OpenPath(p, unix.O_RDONLY); !errors.Is(err, unix.ELOOP) {
			t.Errorf("OpenPath(%s) = %v, want ELOOP", p, err)
		}
	}
}

// TestOpenMount: a mount over a name in the tree is refused by default and
// entered with AcrossMounts. The mount is made in a mount namespace of one
// locked thread that dies with the test's goroutine, so nothing is left
// mounted on the host.
func TestOpenMount(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs in a private mount namespace")
	}
	dir, _ := tree(t)
	type result struct {
		skip           string
		beneath, cross error
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
		if err := unix.Mount("tmpfs", filepath.Join(dir, "sub"), "tmpfs", 0, "size=64k"); err != nil {
			done <- result{skip: "mounting a tmpfs: " + err.Error()}
			return
		}
		// Opened in this namespace: a descriptor from before the unshare
		// would look up names in the old mount tree.
		dirfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- result{skip: "opening the tree: " + err.Error()}
			return
		}
		defer unix.Close(dirfd)
		var r result
		if fd, err := Open(dirfd, "sub", unix.O_RDONLY|unix.O_DIRECTORY, 0); err == nil {
			unix.Close(fd)
		} else {
			r.beneath = err
		}
		if fd, err := Open(dirfd, "sub", unix.O_RDONLY|unix.O_DIRECTORY, 0, AcrossMounts); err == nil {
			unix.Close(fd)
		} else {
			r.cross = err
		}
		done <- r
	}()
	r := <-done
	if r.skip != "" {
		t.Skip(r.skip)
	}
	if !errors.Is(r.beneath, unix.EXDEV) {
		t.Errorf("Open of a mount point = %v, want EXDEV", r.beneath)
	}
	if r.cross != nil {
		t.Errorf("Open of a mount point with AcrossMounts = %v, want it opened", r.cross)
	}
}
