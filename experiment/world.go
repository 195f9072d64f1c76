package experiment

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/internal/fsx"
	"github.com/cleanroom-dev/cleanroom/internal/ident"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"golang.org/x/sys/unix"
)

// The world layout (TRVM-FORMATS §1): the release package and the state
// root sit at fixed places under the world root. The state root is not
// selectable: a selectable state root is a selectable authority (a REVEALED
// copy elsewhere would authorize the canonical candidate). The package
// directory may be named by the world root's cleanroom-package: it is the
// blind package's root label, so the pinned bpkg id binds it, and a marker
// edited after the pin names a package the run refuses.
const (
	PackageDirName  = "docs/spec/proof-wire"
	StateDirName    = "governance"
	RecordFileName  = "blind-run.json"
	ReceiptsDirName = "receipts"
	HoldoutDirName  = "holdout"
	// EvidenceDirName is governance/evidence/, where every measurement
	// archives its observation documents and scored results by digest.
	EvidenceDirName = "evidence"
	// PackageManifestName is the recorded package manifest in the state
	// root (governance/blind-package.json), when one was written.
	PackageManifestName = "blind-package.json"
	// PackageMarkerName is the world-root file naming a package directory
	// other than PackageDirName (`cleanroom world init --root-label`): the
	// label and a newline. Absent, the package is at PackageDirName, so the
	// reference worlds are read as they are.
	PackageMarkerName = "cleanroom-package"
)

// errPackageMarker: the world's cleanroom-package file does not name a
// package directory the world can use (not a clean relative path, the state
// root or beneath it, a path through a symbolic link, or not a file). The
// world cannot be used as one (internal/fault: unusable), as a world that is
// not there.
var errPackageMarker = fault.New(fault.Unusable, "world package marker unusable")

// Instrument names the reference protocol's measuring instrument file by
// file (TRVM-FORMATS §5.3), paths relative to the package root. A world
// that declares its own (experiment/world.json, Declaration) measures with
// its declared list instead. Every member lives under
// experiment/, so experiment_digest already covers it; the explicit list
// also catches a member being moved out, which would shrink that digest
// rather than move it.
var Instrument = []string{
	"experiment/evidence.mjs",
	"experiment/holdout_schema.mjs",
	"experiment/holdout_score_core.mjs",
	"experiment/holdout_runner.mjs",
	"experiment/run_state.mjs",
	"experiment/holdout-observation-v1.schema.json",
	"experiment/holdout-recipe-v1.schema.json",
	"experiment/fixtures",
}

// World is a world root: the package at docs/spec/proof-wire/ (or where
// cleanroom-package says) and the state root governance/ (blind-run.json, receipts/, holdout/).
type World struct {
	// Root is the absolute, symlink-resolved world root. Every path a run
	// names must resolve inside it.
	Root string
	// Package is the package's world-relative path (slash-separated), which
	// is also the blind package's root label: PackageDirName unless the
	// world root's cleanroom-package names another. "" reads as
	// PackageDirName.
	Package string
}

// OpenWorld returns the world rooted at dir (made absolute, symbolic links
// resolved once, so containment checks compare real paths).
func OpenWorld(dir string) (*World, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("world %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("world %s: %w", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("world %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("world %s: not a directory", dir)
	}
	label, err := readPackageMarker(real)
	if err != nil {
		return nil, fmt.Errorf("world %s: %w", dir, err)
	}
	return &World{Root: real, Package: label}, nil
}

// CheckPackageLabel checks a package label a world may name: a clean
// relative slash path (pkgwalk.CheckPath) that is neither the state root
// nor beneath it. A package inside governance/ would put the state, the
// holdout included, in the blind package.
func CheckPackageLabel(label string) error {
	if err := pkgwalk.CheckPath(label); err != nil {
		return fmt.Errorf("package label %q: %w: %w", label, errPackageMarker, err)
	}
	if first, _, _ := strings.Cut(label, "/"); first == StateDirName {
		return fmt.Errorf("package label %q is the state root %s/ or beneath it: %w", label, StateDirName, errPackageMarker)
	}
	return nil
}

// readPackageMarker returns the package label root's cleanroom-package
// names, or PackageDirName when there is none.
func readPackageMarker(root string) (string, error) {
	file := filepath.Join(root, PackageMarkerName)
	// Lstat first: a symbolic link as the marker would let a file outside
	// the world choose the package.
	if fi, err := os.Lstat(file); errors.Is(err, fs.ErrNotExist) {
		return PackageDirName, nil
	} else if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	} else if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file: %w", file, errPackageMarker)
	}
	b, err := evidence.ReadRegularFile(file, 4096)
	if err != nil {
		return "", fmt.Errorf("%s: %w: %w", file, errPackageMarker, err)
	}
	label, ok := strings.CutSuffix(string(b), "\n")
	if !ok || strings.Contains(label, "\n") {
		return "", fmt.Errorf("%s: not one line ending in a newline: %w", file, errPackageMarker)
	}
	if err := CheckPackageLabel(label); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	// Every component a real directory: a symbolic link on the way would
	// put the package (and what pin measures) outside the world.
	cur := root
	for seg := range strings.SplitSeq(label, "/") {
		cur = filepath.Join(cur, seg)
		fi, err := os.Lstat(cur)
		if err != nil {
			return "", fmt.Errorf("%s names %s: %w: %w", file, label, errPackageMarker, err)
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("%s names %s, and %s is not a directory (a symbolic link is refused): %w", file, label, cur, errPackageMarker)
		}
	}
	return label, nil
}

// PackageLabel is the package's world-relative path and root label.
func (w *World) PackageLabel() string {
	if w.Package == "" {
		return PackageDirName
	}
	return w.Package
}

// errNoWorld: no directory from the start up to the filesystem's boundary
// holds a world.
var errNoWorld = errors.New("not inside a world")

// FindWorld finds the world that holds dir, as git finds the repository
// holding a directory: dir itself, then each parent, up to the root or the
// first mount point crossed (a world never spans filesystems, and a
// marker on another filesystem is someone else's). A world root is the
// nearest directory holding the release package docs/spec/proof-wire/
// (a directory, not a symbolic link), a package marker cleanroom-package
// (a regular file; OpenWorld checks what it names) or a run record
// governance/blind-run.json; a bare governance/ directory is not enough,
// because an unrelated project's governance/ must never become the state
// root a transition writes to. Without one, the error matches errNoWorld.
func FindWorld(dir string) (*World, error) {
	start, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("world %s: %w", dir, err)
	}
	if start, err = filepath.EvalSymlinks(start); err != nil {
		return nil, fmt.Errorf("world %s: %w", dir, err)
	}
	var dev uint64
	for cur, first := start, true; ; first = false {
		var st unix.Stat_t
		if err := unix.Stat(cur, &st); err != nil {
			return nil, fmt.Errorf("world %s: %w", cur, err)
		}
		if !first && st.Dev != dev {
			break
		}
		dev = st.Dev
		if isWorldRoot(cur) {
			return OpenWorld(cur)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			break
		}
		cur = parent
	}
	return nil, fmt.Errorf("%w: neither %s nor a directory above it holds %s/, %s or %s/%s", errNoWorld, start, PackageDirName, PackageMarkerName, StateDirName, RecordFileName)
}

// isWorldRoot reports whether dir holds the release package directory or a
// run record, neither reached through a symbolic link.
func isWorldRoot(dir string) bool {
	if fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(PackageDirName))); err == nil && fi.IsDir() {
		return true
	}
	if fi, err := os.Lstat(filepath.Join(dir, PackageMarkerName)); err == nil && fi.Mode().IsRegular() {
		return true
	}
	if gi, err := os.Lstat(filepath.Join(dir, StateDirName)); err != nil || !gi.IsDir() {
		return false
	}
	fi, err := os.Lstat(filepath.Join(dir, StateDirName, RecordFileName))
	return err == nil && fi.Mode().IsRegular()
}

// PackageDir is the release package root.
func (w *World) PackageDir() string {
	return filepath.Join(w.Root, filepath.FromSlash(w.PackageLabel()))
}

// StateDir is the state root governance/.
func (w *World) StateDir() string { return filepath.Join(w.Root, StateDirName) }

// RecordPath is governance/blind-run.json.
func (w *World) RecordPath() string { return filepath.Join(w.StateDir(), RecordFileName) }

// ReceiptsDir is governance/receipts/.
func (w *World) ReceiptsDir() string { return filepath.Join(w.StateDir(), ReceiptsDirName) }

// HoldoutDir is governance/holdout/, where the committed challenge set lives.
func (w *World) HoldoutDir() string { return filepath.Join(w.StateDir(), HoldoutDirName) }

// stateRootProblem refuses a state root that is a symbolic link or not a
// directory: the authority is the world's own governance/, never a name that
// can be re-pointed at a state revealed elsewhere. A missing state root is
// not a problem here (nothing is pinned yet).
func (w *World) stateRootProblem() *RunProblem {
	fi, err := os.Lstat(w.StateDir())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return &RunProblem{Rule: errStateRoot, File: StateDirName, Err: err}
	case !fi.IsDir():
		return problem(errStateRoot, StateDirName, "is a %s, not a directory", fi.Mode().Type())
	}
	return nil
}

// stateRel names a state-root-relative path as a world-relative one, for
// problems and output.
func (w *World) stateRel(rel string) string { return path.Join(StateDirName, rel) }

// openBeneath opens rel beneath the directory dir with fsx.OpenFile:
// nothing in the state root (or the package) resolves outside it, no link
// of any kind is followed and no mount is entered, so a planted symlink or
// bind mount cannot stand in for a receipt or the record.
func openBeneath(dir, rel string, flags int, mode uint32) (*os.File, error) {
	return fsx.OpenFile(dir, rel, flags, mode)
}

// readRegularBeneath reads rel beneath dir with evidence.ReadRegularBeneath
// (openat2 beneath dir, a regular file by fstat, at most evidence.MaxSize
// bytes) and returns the file's modification time too.
func readRegularBeneath(dir, rel string) ([]byte, time.Time, error) {
	b, fi, err := evidence.ReadRegularBeneath(dir, rel)
	if err != nil {
		return nil, time.Time{}, err
	}
	return b, fi.ModTime(), nil
}

// readStateFile reads a state-root-relative file.
func (w *World) readStateFile(rel string) ([]byte, time.Time, error) {
	return readRegularBeneath(w.StateDir(), rel)
}

// ReadStateFile reads rel (slash-separated, state-root-relative) as the
// receipts are read: beneath the state root with openat2 (no "..", no
// link of any kind followed), a regular file of bounded size. For
// evidence other packages keep in the state root (the measurements'
// archive): a planted symlink cannot stand in for it.
func (w *World) ReadStateFile(rel string) ([]byte, error) {
	b, _, err := w.readStateFile(rel)
	return b, err
}

// readRecordBytes reads governance/blind-run.json; a missing record is
// fs.ErrNotExist.
func (w *World) readRecordBytes() ([]byte, error) {
	b, _, err := w.readStateFile(RecordFileName)
	return b, err
}

// ReadRecord reads and parses the world's run record (see ParseRecord).
// With no record the error matches errNoRecord.
func (w *World) ReadRecord() (*Record, error) {
	b, err := w.readRecordBytes()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &RunProblem{Rule: errNoRecord, File: w.stateRel(RecordFileName), Detail: "no run is pinned"}
	}
	if err != nil {
		return nil, &RunProblem{Rule: errRecordBytes, File: w.stateRel(RecordFileName), Err: err}
	}
	return ParseRecord(b, w.stateRel(RecordFileName))
}

// containedPath reports whether the world-relative path p names no "." or
// ".." segment and resolves, symbolic links and all, strictly inside the
// world. A path a run names is a path that could authorize a subject in
// another tree otherwise, and a path with two spellings is two names for
// one subject. This is the early, nameable refusal: the bytes themselves
// are only ever read by pkgwalk.DigestOfPaths beneath a descriptor of the
// root (openat2 RESOLVE_BENEATH, no symlink), so a path re-pointed after
// this check still cannot deliver bytes from outside.
func (w *World) containedPath(p string) bool {
	if p == "" || filepath.IsAbs(p) || strings.ContainsRune(p, 0) {
		return false
	}
	for seg := range strings.SplitSeq(strings.TrimSuffix(p, "/"), "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	abs := filepath.Join(w.Root, filepath.FromSlash(p))
	target := abs
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		target = real
	}
	return strings.HasPrefix(target, w.Root+string(filepath.Separator))
}

// protectedState are the world-relative paths no subject may name: the
// record, the receipts (with the RESULTs and archived observations), the
// challenge set and the measurements' archive (the reference's observation
// there answers the challenges).
var protectedState = []string{
	StateDirName + "/" + RecordFileName,
	StateDirName + "/" + ReceiptsDirName,
	StateDirName + "/" + HoldoutDirName,
	StateDirName + "/" + EvidenceDirName,
}

// overlapsState reports whether the world-relative path p is, contains, or
// lies inside a protected state path.
func overlapsState(p string) bool {
	c := path.Clean(p)
	if c == "." || c == "/" {
		return true
	}
	for _, q := range protectedState {
		if c == q || strings.HasPrefix(q, c+"/") || strings.HasPrefix(c, q+"/") {
			return true
		}
	}
	return false
}

// instrumentDigest is digestOfPaths(package, instrument members): the
// members the world declares (Declaration), or Instrument for a
// reference-protocol world.
func (w *World) instrumentDigest() (string, []pkgwalk.FileDigest, error) {
	d, err := w.Declaration()
	if err != nil {
		return "", nil, err
	}
	return pkgwalk.DigestOfPaths(w.PackageDir(), d.Instrument)
}

// tempPrefix starts every temporary file a transition writes (the durable
// writer's), so verify can recognise the leftovers of an interrupted one.
const tempPrefix = durable.TempPrefix

// createExclusive publishes data at dir/name only if nothing is there
// (durable.Create: the name never exists with partial bytes). When name
// already exists with exactly these bytes (a retried transition after a
// crash) it reports existed=true and changes nothing; with other bytes it
// refuses with errReceiptExists — evidence is never rewritten.
func createExclusive(dir, name string, data []byte, file string) (existed bool, err error) {
	err = durable.Create(dir, name, data, 0o644)
	if !errors.Is(err, fs.ErrExist) {
		return false, err
	}
	have, _, readErr := readRegularBeneath(dir, name)
	if readErr == nil && string(have) == string(data) {
		return true, nil
	}
	return false, receiptExists(name, file)
}

// receiptExists is the refusal to rewrite evidence at name.
func receiptExists(name, file string) *RunProblem {
	return problem(errReceiptExists, file, "%s already exists with other bytes; evidence is never rewritten (remove nothing by hand without reading it)", name)
}

// replaceAtomic replaces dir/name with data (durable.Replace): a crash
// leaves either the old or the new bytes.
func replaceAtomic(dir, name string, data []byte) error {
	return durable.Replace(dir, name, data, 0o644)
}

// mkdirDurable creates dir and its missing parents, fsyncing each parent.
func mkdirDurable(dir string) error { return durable.MkdirAll(dir) }

// leftovers lists the temporary files an interrupted transition left in the
// state root and the receipts directory (state-root-relative).
func (w *World) leftovers() []string {
	var out []string
	w.eachLeftover(func(_ *os.File, rel string) { out = append(out, rel) })
	return out
}

// removeLeftovers deletes the temporary files of interrupted transitions,
// and the staging directory of an interrupted holdout install. Only called
// under the state lock, so no live transition owns them.
func (w *World) removeLeftovers() {
	w.eachLeftover(func(d *os.File, rel string) {
		if err := unix.Unlinkat(int(d.Fd()), path.Base(rel), 0); errors.Is(err, unix.EISDIR) {
			// os.RemoveAll opens each level beneath the last with no
			// symlink followed, so a link planted in the stage cannot
			// make it delete outside.
			_ = os.RemoveAll(filepath.Join(w.StateDir(), filepath.FromSlash(rel)))
		}
	})
}

// eachLeftover calls fn with an open descriptor of the directory and the
// state-root-relative name of every temporary file in the state root, the
// receipts directory and each run's observations. Directories are opened
// beneath the state root with no symlink followed, so a receipts/ re-pointed
// by a symlink cannot make verify list, or a transition delete, files of
// another directory.
func (w *World) eachLeftover(fn func(d *os.File, rel string)) {
	visit := func(rel string, sub func(e os.DirEntry)) {
		d, err := openBeneath(w.StateDir(), orDot(rel), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return
		}
		defer d.Close()
		ents, err := d.ReadDir(-1)
		if err != nil {
			return
		}
		slices.SortFunc(ents, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tempPrefix) {
				fn(d, path.Join(rel, e.Name()))
			}
			if sub != nil {
				sub(e)
			}
		}
	}
	visit("", nil)
	var runs []string
	visit(ReceiptsDirName, func(e os.DirEntry) {
		if e.IsDir() && ident.Is(ident.Brun, e.Name()) {
			// The run's archived record is written here, its observations below.
			runs = append(runs, path.Join(ReceiptsDirName, e.Name()), path.Join(ReceiptsDirName, e.Name(), "observations"))
		}
	})
	for _, r := range runs {
		visit(r, nil)
	}
}

func orDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}
