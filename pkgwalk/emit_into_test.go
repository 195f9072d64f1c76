package pkgwalk_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// entries lists dir's names ("" when dir is absent).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// EmitInto delivers whole: into an absent destination (created) and into
// an existing empty one (filled, its mode kept), with the manifest record
// written beside; what an interrupted emit left beside the destination is
// removed first, and nothing but the destination and the record remain.
func TestEmitIntoDelivers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		exists bool
	}{{"absent destination", false}, {"empty destination", true}} {
		t.Run(tc.name, func(t *testing.T) {
			src := copySynthetic(t)
			parent := t.TempDir()
			dest := filepath.Join(parent, "pkg")
			if tc.exists {
				if err := os.Mkdir(dest, 0o750); err != nil {
					t.Fatal(err)
				}
			}
			// A staging directory an interrupted emit left (its holder gone).
			stale, release, err := durable.StageDirHeld(dest)
			if err != nil {
				t.Fatal(err)
			}
			release()
			record := filepath.Join(t.TempDir(), "emitted.json")
			m, err := pkgwalk.EmitInto(t.Context(), src, dest, syntheticID, pkgwalk.EmitIntoOptions{ManifestOut: record, Note: "n"})
			if err != nil {
				t.Fatalf("EmitInto: %v", err)
			}
			if id, _ := m.ID(); id != syntheticID {
				t.Errorf("emitted %s, want %s", id, syntheticID)
			}
			if _, err := pkgwalk.VerifyView(dest, m); err != nil {
				t.Errorf("the destination is not the package: %v", err)
			}
			if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the stale staging directory %s is still there: %v", stale, err)
			}
			if got := entries(t, parent); len(got) != 1 || got[0] != "pkg" {
				t.Errorf("beside the destination: %v, want only pkg", got)
			}
			if b, err := os.ReadFile(record); err != nil || !strings.Contains(string(b), syntheticID) {
				t.Errorf("manifest record: %v %q", err, b)
			}
			if tc.exists {
				fi, err := os.Stat(dest)
				if err != nil || fi.Mode().Perm() != 0o750 {
					t.Errorf("destination mode %v (%v), want the operator's 0750", fi.Mode().Perm(), err)
				}
			}
		})
	}
}

// EmitInto's refusals leave the destination as it was found: a record
// that exists or would land inside the source is refused before the copy;
// a record that cannot be written after the copy removes the copy again
// (the manifest of what was removed comes back with the error); a refused
// emit leaves no staging directory.
func TestEmitIntoRefusalsLeaveTheDestination(t *testing.T) {
	for _, tc := range []struct {
		name     string
		exists   bool
		expect   string
		record   func(src, work string) string
		rule     error
		manifest bool // the copy was made, then removed
	}{
		{"record exists", false, syntheticID, func(_, work string) string { return filepath.Join(work, "there") }, fs.ErrExist, false},
		{"record inside the source", true, syntheticID, func(src, _ string) string { return filepath.Join(src, "m.json") }, pkgwalk.ErrOutputInside, false},
		{"record in a missing directory", false, syntheticID, func(_, work string) string { return filepath.Join(work, "nowhere", "m.json") }, fs.ErrNotExist, false},
		{"record on a full file system, absent destination", false, syntheticID, func(_, work string) string { return filepath.Join(work, "full", "m.json") }, syscall.ENOSPC, true},
		{"record on a full file system, empty destination", true, syntheticID, func(_, work string) string { return filepath.Join(work, "full", "m.json") }, syscall.ENOSPC, true},
		{"another package", false, "bpkg-" + strings.Repeat("0", 64), func(_, work string) string { return "" }, pkgwalk.ErrNotPinned, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := copySynthetic(t)
			work := t.TempDir()
			writeFile(t, filepath.Join(work, "there"), "an earlier record\n")
			if tc.manifest {
				// Mounted only where needed: it skips without root.
				if err := os.Symlink(testshared.FullFS(t), filepath.Join(work, "full")); err != nil {
					t.Fatal(err)
				}
			}
			parent := t.TempDir()
			dest := filepath.Join(parent, "pkg")
			if tc.exists {
				if err := os.Mkdir(dest, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			m, err := pkgwalk.EmitInto(t.Context(), src, dest, tc.expect, pkgwalk.EmitIntoOptions{ManifestOut: tc.record(src, work)})
			if !errors.Is(err, tc.rule) {
				t.Fatalf("err = %v, want %v", err, tc.rule)
			}
			if (m != nil) != tc.manifest {
				t.Errorf("manifest returned: %v, want %v", m != nil, tc.manifest)
			}
			want := []string(nil)
			if tc.exists {
				want = []string{"pkg"}
			}
			if got := entries(t, parent); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("beside the destination: %v, want %v", got, want)
			}
			if got := entries(t, dest); len(got) != 0 {
				t.Errorf("the destination holds %v after a refusal", got)
			}
		})
	}
}

// A destination that is not empty is refused by Emit's rule
// (errDestNotEmpty), with nothing written into it or beside it.
func TestEmitIntoDirtyDestination(t *testing.T) {
	src := copySynthetic(t)
	parent := t.TempDir()
	dest := filepath.Join(parent, "pkg")
	writeFile(t, filepath.Join(dest, "mine.txt"), "the operator's\n")
	_, err := pkgwalk.EmitInto(t.Context(), src, dest, syntheticID, pkgwalk.EmitIntoOptions{})
	if !errors.Is(err, pkgwalk.ErrDestNotEmpty) {
		t.Fatalf("err = %v, want %v", err, pkgwalk.ErrDestNotEmpty)
	}
	if got := entries(t, dest); strings.Join(got, " ") != "mine.txt" {
		t.Errorf("the destination holds %v, want only mine.txt", got)
	}
	if got := entries(t, parent); strings.Join(got, " ") != "pkg" {
		t.Errorf("beside the destination: %v, want only pkg", got)
	}
}
