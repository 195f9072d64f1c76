package hosttree

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// errSystemTree: the path is a system tree, inside one, or a parent of one.
var errSystemTree = errors.New("path is a system tree of this host")

// trees are refused with everything in them and every ancestor of them
// (so / and /var too): writing there changes host configuration, kernel
// interfaces, devices, programs or other programs' state.
var trees = []string{
	"/etc", "/proc", "/sys", "/dev", "/usr", "/boot", "/bin", "/sbin",
	"/lib", "/lib32", "/lib64", "/libx32", "/run", "/var/lib", "/var/log",
	"/var/cache", "/var/spool", "/var/mail", "/var/backups", "/var/run", "/snap",
}

// dirs are refused themselves (what lies beneath them is the users'):
// each holds other users' or programs' files.
var dirs = []string{"/home", "/root", "/tmp", "/var/tmp", "/opt", "/srv", "/mnt", "/media"}

// Within reports whether the clean path p is dir or lies beneath it.
func Within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// Check refuses (errSystemTree, naming the tree) an absolute, clean path
// that is a system tree, lies inside one, or holds one; and the same of
// its real path, every symbolic link of its existing part resolved (a
// link /tmp/x -> /etc carries no system tree past the check of the
// literal path). A path that does not exist yet is judged by what of it
// exists.
func Check(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("%s: want an absolute path", p)
	}
	p = filepath.Clean(p)
	if err := judge(p, p); err != nil {
		return err
	}
	real, err := realPath(p)
	if err != nil {
		return err
	}
	return judge(p, real)
}

func judge(named, p string) error {
	if why, ok := System(p); ok {
		return fmt.Errorf("%s: %w (%s)", named, errSystemTree, why)
	}
	return nil
}

// System reports whether the absolute, clean path p (taken as written: no
// link resolved) is a system tree, inside one or a parent of one, and why.
func System(p string) (why string, ok bool) {
	for _, t := range trees {
		if Within(p, t) || Within(t, p) {
			return fmt.Sprintf("%s is %s, inside it or one of its parents", p, t), true
		}
	}
	for _, d := range dirs {
		if p == d {
			return fmt.Sprintf("%s holds other users' or programs' files", p), true
		}
	}
	return "", false
}

// realPath resolves the links of p's longest existing prefix and appends
// the rest.
func realPath(p string) (string, error) {
	rest := ""
	for cur := p; ; cur = filepath.Dir(cur) {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, os.ErrNotExist) || cur == "/" {
			return "", err
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}
