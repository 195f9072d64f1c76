package harness

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// StageName is the file name of the room's own binary (cmd/cleanroom-room),
// looked for beside the running executable. It holds the sealed stages and
// nothing else: the harness, pkgwalk, the seal and the MCP server, built
// without cgo, a third of the command line's size. Each of the two stages is
// a start of a binary, and a small binary starts sooner and keeps fewer of
// its own pages resident while it serves.
const StageName = "cleanroom-room"

// stageBuildID is the Go build ID of the cleanroom-room the Makefile built
// together with this binary, set at link time:
//
//	-ldflags "-X github.com/cleanroom-dev/cleanroom/harness.stageBuildID=$(go tool buildid bin/cleanroom-room)"
//
// It is empty in a binary built without it (go build, go install, a test
// binary), which then runs the stages itself.
var stageBuildID string

// Why a dedicated room binary is not used; each leaves the stages to the
// running binary (StageArgs), which is always correct, only slower.
var (
	errStageNotLinked     = errors.New("this binary was not built with a room binary (make build links one)")
	errStageMissing       = errors.New("no room binary beside this one")
	errStageNotFile       = errors.New("room binary is not a regular executable file")
	errStageWritable      = errors.New("room binary is writable by group or others")
	errStageOwner         = errors.New("room binary has another owner than this binary")
	errStageBuildMismatch = errors.New("room binary is from another build")
	errStageSetID         = errors.New("room binary is setuid or setgid")
	errStageNotExecutable = errors.New("room binary may not be executed by this user here")
)

// OpenStage opens the room binary beside the running executable if it is
// the one this binary was built with. The file is opened once, checked on
// that descriptor, and executed through it (StageExe), so the program that
// runs is the one that was checked. On error the caller runs the stages in
// its own binary; the error says why.
func OpenStage() (*os.File, error) {
	if stageBuildID == "" {
		return nil, errStageNotLinked
	}
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, fmt.Errorf("opening this binary: %w", err)
	}
	defer self.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(self.Fd()), &st); err != nil {
		return nil, fmt.Errorf("fstat of this binary: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating this binary: %w", err)
	}
	return openStageAt(filepath.Join(filepath.Dir(exe), StageName), stageBuildID, st.Uid)
}

// openStageAt opens path and accepts it as the room binary only if it is a
// regular file owned by owner, writable by nobody else, without a set-ID
// bit, that this process may execute, whose Go build ID is wantID.
func openStageAt(path, wantID string, owner uint32) (*os.File, error) {
	// O_NOFOLLOW: a symlink planted at the name is refused, not followed
	// to a binary elsewhere. O_NONBLOCK: a FIFO planted there is refused
	// by fstat instead of blocking the open.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("%w: %s", errStageMissing, path)
		}
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symbolic link", errStageNotFile, path)
		}
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o111 == 0 {
		return nil, fmt.Errorf("%w: %s (mode %o)", errStageNotFile, path, st.Mode)
	}
	// Anyone who may rewrite the file may choose what runs as the room,
	// with this process's privileges: only the binary's own owner may.
	if st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("%w: %s (mode %o)", errStageWritable, path, st.Mode&0o7777)
	}
	if st.Uid != owner {
		return nil, fmt.Errorf("%w: %s is owned by uid %d, this binary by uid %d", errStageOwner, path, st.Uid, owner)
	}
	// The room runs with this process's credentials: a set-ID bit would
	// run the seal stage as the file's owner or group instead.
	if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		return nil, fmt.Errorf("%w: %s (mode %o)", errStageSetID, path, st.Mode&0o7777)
	}
	// Some execute bit is not enough: the kernel decides the exec to come
	// for this process's ids (0744 owned by another user, an ACL, a noexec
	// mount), and a refused exec would fail the room where this binary's
	// own stages serve.
	if err := unix.Faccessat(unix.AT_FDCWD, StageExe(f), unix.X_OK, unix.AT_EACCESS); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errStageNotExecutable, path, err)
	}
	// A room binary left from another build speaks another version of the
	// stages' command line and checks: only the one built with this binary
	// is used.
	id, err := goBuildID(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errStageBuildMismatch, path, err)
	}
	if id != wantID {
		return nil, fmt.Errorf("%w: %s has build ID %s, this binary was built with %s", errStageBuildMismatch, path, id, wantID)
	}
	ok = true
	return f, nil
}

// StageExe is the path that executes the open file f: the kernel resolves
// /proc/self/fd/N to the very file that was opened and checked, whatever
// the name points to by then.
func StageExe(f *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", f.Fd()) }

// goBuildID reads the Go build ID from the ELF note the Go linker writes
// (section .note.go.buildid: name "Go", type 4), the string `go tool
// buildid` prints.
func goBuildID(f *os.File) (string, error) {
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", fmt.Errorf("not an ELF file: %w", err)
	}
	sec := ef.Section(".note.go.buildid")
	if sec == nil || sec.Size > 1<<10 {
		return "", errors.New("no Go build ID note")
	}
	data, err := sec.Data()
	if err != nil {
		return "", fmt.Errorf("reading the build ID note: %w", err)
	}
	const goBuildIDType = 4
	if len(data) < 16 {
		return "", errors.New("build ID note is truncated")
	}
	order := ef.ByteOrder
	namesz, descsz, typ := order.Uint32(data), order.Uint32(data[4:]), order.Uint32(data[8:])
	if namesz != 4 || typ != goBuildIDType || !bytes.Equal(data[12:16], []byte("Go\x00\x00")) || uint64(descsz) > uint64(len(data)-16) {
		return "", errors.New("build ID note is not Go's")
	}
	return string(data[16 : 16+descsz]), nil
}
