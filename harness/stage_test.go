package harness

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/deathsig"
	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
	"golang.org/x/sys/unix"
)

// copyExecutable copies this test binary (a Go ELF executable with a
// build ID) to dir/name with mode perm and returns the path.
func copyExecutable(t *testing.T, dir, name string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := copyFileMode("/proc/self/exe", p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

// buildIDOf is the Go build ID of the executable at p.
func buildIDOf(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return goBuildID(f)
}

// TestGoBuildID: the build ID read from the ELF note is the one the Go
// toolchain itself reports for the same file.
func TestGoBuildID(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	dir := t.TempDir()
	good := copyExecutable(t, dir, "good", 0o755)
	id, err := buildIDOf(good)
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
	copyExecutable(t, dir, "setuid", 0o755|os.ModeSetuid)
	copyExecutable(t, dir, "setgid", 0o755|os.ModeSetgid)
	if err := os.WriteFile(filepath.Join(dir, "script"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, file, id string
		owner          uint32
		want           error
	}{
		{"matching build", "good", id, owner, nil},
		{"another build", "good", id + "x", owner, errStageBuildMismatch},
		{"missing", "absent", id, owner, errStageMissing},
		{"symlink to the right binary", "link", id, owner, errStageNotFile},
		{"fifo (must not block)", "fifo", id, owner, errStageNotFile},
		{"directory", ".", id, owner, errStageNotFile},
		{"not executable", "noexec", id, owner, errStageNotFile},
		{"group-writable", "groupwritable", id, owner, errStageWritable},
		{"another owner", "good", id, owner + 1, errStageOwner},
		{"setuid", "setuid", id, owner, errStageSetID},
		{"setgid", "setgid", id, owner, errStageSetID},
		{"not ELF", "script", id, owner, errStageBuildMismatch},
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
	t.Parallel()
	if f, err := OpenStage(); !errors.Is(err, errStageNotLinked) || f != nil {
		t.Fatalf("OpenStage = %v, %v; want %v", f, err, errStageNotLinked)
	}
}

// TestOpenStageNotExecutableHere: a room binary with an execute bit that
// this process may still not execute (here: on a noexec mount) is refused
// by name, so the room runs in this binary instead of failing to start.
func TestOpenStageNotExecutableHere(t *testing.T) {
	t.Parallel()
	needSeal(t)
	cmd := seal.SealedCommand(os.Args[0], []string{childMarker, "stage-noexec", t.TempDir()}, nil)
	if out, err := deathsig.CombinedOutput(cmd); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func init() {
	childFuncs["stage-noexec"] = func(a []string) error {
		dir := a[0]
		if err := seal.MakeRootPrivate(); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOEXEC|unix.MS_NOSUID|unix.MS_NODEV, "size=64m"); err != nil {
			return fmt.Errorf("mounting a noexec tmpfs: %w", err)
		}
		p := filepath.Join(dir, StageName)
		if err := copyFileMode("/proc/self/exe", p, 0o755); err != nil {
			return err
		}
		id, err := buildIDOf(p)
		if err != nil {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		owner := st.Sys().(*syscall.Stat_t).Uid
		if f, err := openStageAt(p, id, owner); !errors.Is(err, errStageNotExecutable) || f != nil {
			return fmt.Errorf("openStageAt on a noexec mount = %v, %v; want %v", f, err, errStageNotExecutable)
		}
		return nil
	}
}

// copyFileMode copies src to a new file dst with mode perm.
func copyFileMode(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, perm) // the umask may have cut perm
}

// TestServeNamesTheRoomBinary: when the room binary cannot be executed at
// the last moment (here it is open for writing: ETXTBSY), Serve's error
// names the file, not only the descriptor it was executed through.
func TestServeNamesTheRoomBinary(t *testing.T) {
	t.Parallel()
	needSeal(t)
	dir := t.TempDir()
	p := copyExecutable(t, dir, StageName, 0o755)
	id, err := buildIDOf(p)
	if err != nil {
		t.Fatal(err)
	}
	stage, err := openStageAt(p, id, uint32(os.Geteuid()))
	if err != nil {
		t.Fatal(err)
	}
	defer stage.Close()
	w, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	pkg, pin := writePackage(t, testFiles())
	o := ServeOptions{PackageDir: pkg, Expect: pin, Workspace: filepath.Join(dir, "ws"), Stage: stage, StageArgs: []string{stageMarker}}
	err = Serve(t.Context(), o, strings.NewReader(""), io.Discard, io.Discard)
	if !errors.Is(err, errNoIsolation) || !errors.Is(err, syscall.ETXTBSY) || !strings.Contains(err.Error(), p) {
		t.Fatalf("Serve with a room binary open for writing = %v; want %v (ETXTBSY) naming %s", err, errNoIsolation, p)
	}
}
