package worldinit

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
)

// template holds the files of a new world: package/ goes to the package
// root, world/ to the world root.
//
//go:embed template
var template embed.FS

// The rules Init refuses by (errors.Is works on every refusal).
var (
	// errNotEmpty: the target exists and is not an empty directory. A
	// world is never mixed with files that were there before it.
	errNotEmpty = errors.New("world init: the target is not an empty directory")
	// errRootLabel: the root label is not a clean relative path, or is
	// the state root governance/ or beneath it.
	errRootLabel = errors.New("world init: unsupported root label")
)

// packagePlaceholder is replaced by the package's world-relative path in
// every template file.
const packagePlaceholder = "{{PACKAGE}}"

// Options configure Init.
type Options struct {
	// RootLabel is the package's world-relative path, which is also the
	// manifest's root label; "" means experiment.PackageDirName.
	RootLabel string
}

// Result is what Init wrote.
type Result struct {
	// Dir is the absolute path of the new world.
	Dir string `json:"dir"`
	// Package is the package's world-relative path.
	Package string `json:"package"`
	// Files are the world-relative paths of every file written, sorted.
	Files []string `json:"files"`
}

// Init writes a new world at dir, which must be absent or an empty
// directory (its missing parents are created).
func Init(dir string, opt Options) (*Result, error) {
	label, err := rootLabel(opt.RootLabel)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("world init %s: %w", dir, err)
	}
	exists, err := emptyOrAbsent(abs)
	if err != nil {
		return nil, err
	}
	if !exists {
		if err := durable.MkdirAll(filepath.Dir(abs)); err != nil {
			return nil, fmt.Errorf("world init %s: %w", dir, err)
		}
	}
	stage, err := durable.StageDir(abs)
	if err != nil {
		return nil, fmt.Errorf("world init %s: %w", dir, err)
	}
	published := false
	defer func() {
		if !published {
			os.RemoveAll(stage)
		}
	}()
	files, err := writeTemplate(stage, label)
	if err != nil {
		return nil, fmt.Errorf("world init %s: %w", dir, err)
	}
	if exists {
		err = durable.ReplaceEmptyDir(stage, abs, 0o755)
	} else {
		err = durable.CreateDir(stage, abs, 0o755)
	}
	switch {
	// Something appeared at the target after it was looked at: the
	// rename changed nothing.
	case errors.Is(err, durable.ErrDirNotEmpty), errors.Is(err, fs.ErrExist):
		return nil, fmt.Errorf("%s: an entry appeared while the world was written: %w", dir, errNotEmpty)
	case err != nil:
		return nil, fmt.Errorf("world init %s: %w", dir, err)
	}
	published = true
	return &Result{Dir: abs, Package: label, Files: files}, nil
}

// rootLabel returns the package path a label names: a clean relative path
// outside the state root (experiment.CheckPackageLabel). A label other than
// experiment.PackageDirName is recorded in the world root's
// cleanroom-package, which every run command reads (experiment.OpenWorld).
func rootLabel(l string) (string, error) {
	if l == "" {
		return experiment.PackageDirName, nil
	}
	if err := experiment.CheckPackageLabel(l); err != nil {
		return "", fmt.Errorf("--root-label %q: %w: %w", l, errRootLabel, err)
	}
	return l, nil
}

// emptyOrAbsent reports whether dir exists (as an empty directory); a dir
// that is anything else is refused with errNotEmpty.
func emptyOrAbsent(dir string) (exists bool, err error) {
	// Lstat: a symbolic link at the target is not an empty directory, even
	// when it points at one; the rename would replace the link, not fill
	// the directory the operator meant.
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("world init %s: %w", dir, err)
	case !fi.IsDir():
		return false, fmt.Errorf("%s is a %s, not a directory: %w", dir, typeName(fi.Mode()), errNotEmpty)
	}
	f, err := os.Open(dir)
	if err != nil {
		return false, fmt.Errorf("world init %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(3)
	if err != nil && len(names) == 0 && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("world init %s: %w", dir, err)
	}
	if len(names) > 0 {
		slices.Sort(names)
		return false, fmt.Errorf("%s holds %s: %w", dir, strings.Join(names, ", "), errNotEmpty)
	}
	return true, nil
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m.IsRegular():
		return "regular file"
	}
	return "special file"
}

// writeTemplate writes every template file into stage and returns their
// world-relative paths, sorted.
func writeTemplate(stage, label string) ([]string, error) {
	var files []string
	err := fs.WalkDir(template, "template", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(p, "template/")
		switch {
		case strings.HasPrefix(rel, "package/"):
			rel = path.Join(label, strings.TrimPrefix(rel, "package/"))
		case strings.HasPrefix(rel, "world/"):
			rel = strings.TrimPrefix(rel, "world/")
		default:
			return fmt.Errorf("template file %s is neither under package/ nor world/", p)
		}
		b, err := template.ReadFile(p)
		if err != nil {
			return err
		}
		b = []byte(strings.ReplaceAll(string(b), packagePlaceholder, label))
		dst := filepath.Join(stage, filepath.FromSlash(rel))
		if err := durable.MkdirAll(filepath.Dir(dst)); err != nil {
			return err
		}
		if err := durable.CreateFile(dst, b, 0o644); err != nil {
			return err
		}
		files = append(files, rel)
		return nil
	})
	if err == nil && label != experiment.PackageDirName {
		// Where the run commands find the package (experiment.OpenWorld);
		// absent, they read experiment.PackageDirName.
		err = durable.CreateFile(filepath.Join(stage, experiment.PackageMarkerName), []byte(label+"\n"), 0o644)
		files = append(files, experiment.PackageMarkerName)
	}
	slices.Sort(files)
	return files, err
}
