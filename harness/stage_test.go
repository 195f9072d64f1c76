package harness

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// copyExecutable copies this test binary (a Go ELF executable with a
// build ID) to dir/name with mode perm and returns the path.
func copyExecutable(t *testing.T, dir, name string, perm os.FileMode) string {
	t.Helper()
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	p := filepath.Join(dir, name)
	dst, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // the umask may have cut perm
		t.Fatal(err)
	}
	return p
}

// TestGoBuildID: the build ID read from the ELF note is the one the Go
// toolchain itself reports for the same file.
func TestGoBuildID(t *testing.T) {
	p := copyExecutable(t, t.TempDir(), "prog", 0o755)
	out, err := exec.Command("go", "tool", "buildid", p).Output()
	if err != nil {
		t.Skipf("go tool buildid: %v", err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := goBuildID(f)
	if want := strings.TrimSpace(string(out)); err != nil || got != want {
		t.Fatalf("goBuildID = %q, %v; go tool buildid says %q", got, err, want)
	}
}

// TestOpenStageAt: the room binary is used only when it is a regular
// executable file of this binary's owner, writable by nobody else, from
// the build this binary was linked with; each other case names its rule.
func TestOpenStageAt(t *testing.T) {
	dir := t.TempDir()
	good := copyExecutable(t, dir, "good", 0o755)
	f, err := os.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	id, err := goBuildID(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	owner := uint32(os.Geteuid())
	if err := os.Symlink(good, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyExecutable(t, dir, "noexec", 0o644)
	copyExecutable(t, dir, "groupwritable", 0o775)
	if err := os.WriteFile(filepath.Join(dir, "script"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, file, id string
		owner          uint32
		want           error
	}{
		{"matching build", "good", id, owner, nil},
		{"another build", "good", id + "x", owner, ErrStageBuildMismatch},
		{"missing", "absent", id, owner, ErrStageMissing},
		{"symlink to the right binary", "link", id, owner, ErrStageNotFile},
		{"fifo (must not block)", "fifo", id, owner, ErrStageNotFile},
		{"directory", ".", id, owner, ErrStageNotFile},
		{"not executable", "noexec", id, owner, ErrStageNotFile},
		{"group-writable", "groupwritable", id, owner, ErrStageWritable},
		{"another owner", "good", id, owner + 1, ErrStageOwner},
		{"not ELF", "script", id, owner, ErrStageBuildMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := openStageAt(filepath.Join(dir, c.file), c.id, c.owner)
			if f != nil {
				defer f.Close()
			}
			if c.want == nil {
				if err != nil || f == nil {
					t.Fatalf("refused: %v", err)
				}
				if !strings.HasPrefix(StageExe(f), "/proc/self/fd/") {
					t.Errorf("StageExe = %q", StageExe(f))
				}
				return
			}
			if !errors.Is(err, c.want) || f != nil {
				t.Fatalf("got %v (file %v), want %v", err, f, c.want)
			}
		})
	}
}

// TestOpenStageNotLinked: a binary built without a room binary's build ID
// (this test binary) runs the stages itself.
func TestOpenStageNotLinked(t *testing.T) {
	if f, err := OpenStage(); !errors.Is(err, ErrStageNotLinked) || f != nil {
		t.Fatalf("OpenStage = %v, %v; want %v", f, err, ErrStageNotLinked)
	}
}
