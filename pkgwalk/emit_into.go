package pkgwalk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"golang.org/x/sys/unix"
)

// EmitIntoOptions are EmitInto's: Emit's, and the manifest record to write
// beside the delivered copy.
type EmitIntoOptions struct {
	EmitOptions
	// ManifestOut, when set, is the file the manifest record is written to
	// (WriteManifestFile, with Note) once the copy is verified: beside the
	// source and the destination, never inside either, never over an
	// existing file.
	ManifestOut string
	Note        string
}

// EmitInto is Emit for a destination an operator names (`cleanroom package
// emit`), delivered whole or not at all.
//
// The destination is filled in a held staging directory beside it and
// published by one rename: one that replaces nothing when it is absent,
// one that replaces it only while it is still empty when it exists (its
// mode and owner carried over). A kill at any point leaves the name as it
// was found (absent or empty) or whole, never partial, so a retry is not
// refused for a destination that is not empty; the staging directories
// killed emits left beside it are removed first (never one a live emit
// holds). Only a destination no rename can replace — a mount point, or a
// directory of another user's this process cannot give the copy to — is
// filled in place.
//
// With ManifestOut, an existing file there or one inside the source or the
// destination is refused before anything is delivered (ErrOutputInside for
// the latter). If the record still cannot be written after the copy, the
// emit fails as a whole: what it delivered is removed (the destination
// itself when it was absent, else everything in it), so the destination is
// as it was found and the same command can be run again; the manifest of
// the removed copy is returned with that error, so a caller can tell the
// failure of the record from the failure of the copy.
func EmitInto(ctx context.Context, src, dest, expect string, opts EmitIntoOptions) (*Manifest, error) {
	if out := opts.ManifestOut; out != "" {
		// A record is never overwritten, and a bad --manifest-out costs
		// nothing: refused before the copy, not after.
		if _, err := os.Lstat(out); err == nil {
			return nil, fmt.Errorf("%s already exists (records are never overwritten): %w", out, fs.ErrExist)
		}
		for _, t := range []string{src, dest} {
			if _, err := os.Stat(t); err != nil {
				continue // an absent destination is created by the emit; WriteManifestFile checks again
			}
			if inside, err := IsInside(t, out); err != nil {
				return nil, err
			} else if inside {
				return nil, &RefusalError{Path: out, Rule: ErrOutputInside, Detail: "inside " + t}
			}
		}
	}
	_, statErr := os.Lstat(dest)
	existed := statErr == nil
	m, err := emitWhole(ctx, src, dest, expect, existed, opts.EmitOptions)
	if err != nil {
		return nil, err
	}
	if opts.ManifestOut != "" {
		if err := WriteManifestFile(opts.ManifestOut, m, opts.Note, src, dest); err != nil {
			if uerr := undoEmit(dest, existed); uerr != nil {
				err = fmt.Errorf("%w (and removing the delivered copy: %v)", err, uerr)
			}
			return m, err
		}
	}
	return m, nil
}

// emitWhole is EmitInto's delivery: see there.
func emitWhole(ctx context.Context, src, dest, expect string, existed bool, opts EmitOptions) (*Manifest, error) {
	var keep *unix.Statx_t
	if existed {
		var st unix.Statx_t
		err := unix.Statx(unix.AT_FDCWD, dest, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MODE|unix.STATX_UID|unix.STATX_GID, &st)
		mountRoot := err == nil && st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
		ownable := err == nil && (int(st.Uid) == os.Geteuid() || os.Geteuid() == 0)
		// Not a directory, a link, or not empty: Emit refuses it by its
		// rule, before anything is copied.
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || mountRoot || !ownable || !emptyDir(dest) {
			return Emit(ctx, src, dest, expect, opts)
		}
		keep = &st
	}
	if _, err := durable.RemoveStaleStages(dest); err != nil {
		return nil, fmt.Errorf("removing what an interrupted emit into %s left: %w", dest, err)
	}
	stage, release, err := durable.StageDirHeld(dest)
	if err != nil {
		return nil, err
	}
	defer release()
	m, err := Emit(ctx, src, stage, expect, opts)
	switch {
	case err != nil:
	case keep == nil:
		err = durable.CreateDir(stage, dest, 0o755)
	default:
		// The copy takes the place of the empty directory as the operator
		// made it: same owner, group and mode.
		if err = os.Lchown(stage, int(keep.Uid), int(keep.Gid)); err == nil {
			err = durable.ReplaceEmptyDir(stage, dest, os.FileMode(keep.Mode&0o777))
		}
		if errors.Is(err, durable.ErrDirNotEmpty) {
			// Something was put there meanwhile: refused as Emit refuses a
			// destination that is not empty.
			err = &RefusalError{Path: dest, Rule: errDestNotEmpty, Detail: "an entry appeared while the copy was staged"}
		}
	}
	if err != nil {
		// Emit removed what it wrote on a refusal; the staging directory
		// itself (and a copy whose rename failed) goes here.
		if rerr := os.RemoveAll(stage); rerr != nil {
			err = fmt.Errorf("%w (and removing %s: %v)", err, stage, rerr)
		}
		return nil, err
	}
	return m, nil
}

// emptyDir reports whether dir can be read and holds no entry.
func emptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && errors.Is(err, io.EOF)
}

// undoEmit removes what a successful emit delivered into dest: dest itself
// when it did not exist before, else everything in it (emit delivers only
// into an empty directory). os.RemoveAll follows no symbolic link.
func undoEmit(dest string, existed bool) error {
	if !existed {
		return os.RemoveAll(dest)
	}
	ents, err := os.ReadDir(dest)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dest, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
