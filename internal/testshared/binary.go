package testshared

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// stageName is harness.StageName (this package imports nothing of the
// module): the room binary `make build` puts beside the command line.
// cmd/cleanroom's TestRoomStageBinary fails if the two drift apart.
const stageName = "cleanroom-room"

var built = sync.OnceValues(buildCleanroom)

// Cleanroom returns the cleanroom binary built as `make build` builds it
// (cmd/cleanroom-room without cgo, then cmd/cleanroom with that binary's
// build ID linked in, stamped with the checkout's revision), and the
// directory holding both.
//
// The directory is the same for every test package and every run from this
// checkout, so `go build -o` finds the binaries up to date and links
// nothing when no source changed: the test packages that run the binary
// (cmd/cleanroom, docs, bench/compare) share one build instead of linking
// two 40 MB binaries each on every run. A lock file serialises the packages
// that `go test ./...` runs at once; the first builds, the others find the
// result. The directory is kept between runs, like the build cache
// (`make clean` does not remove it; deleting it is always safe).
func Cleanroom(t testing.TB) (bin, dir string) {
	t.Helper()
	dir, err := built()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "cleanroom"), dir
}

func buildCleanroom() (string, error) {
	root, err := findRoot()
	if err != nil {
		return "", err
	}
	dir, err := binaryDir(root)
	if err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return "", fmt.Errorf("test binaries: %w", err)
	}
	defer lock.Close() // closing the descriptor releases the lock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("test binaries: locking %s: %w", lock.Name(), err)
	}
	goCmd := func(env []string, args ...string) ([]byte, error) {
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		return cmd.CombinedOutput()
	}
	stage := filepath.Join(dir, stageName)
	if out, err := goCmd([]string{"CGO_ENABLED=0"}, "build", "-o", stage, "./cmd/cleanroom-room"); err != nil {
		return "", fmt.Errorf("go build ./cmd/cleanroom-room: %v\n%s", err, out)
	}
	id, err := goCmd(nil, "tool", "buildid", stage)
	if err != nil {
		return "", fmt.Errorf("go tool buildid %s: %v\n%s", stage, err, id)
	}
	ldflags := "-X github.com/cleanroom-dev/cleanroom/harness.stageBuildID=" + strings.TrimSpace(string(id))
	bin := filepath.Join(dir, "cleanroom")
	// -buildvcs=true: the version names the checkout's revision (this
	// machine's go env may say false; the flag overrides it).
	if out, err := goCmd(nil, "build", "-buildvcs=true", "-ldflags", ldflags, "-o", bin, "./cmd/cleanroom"); err != nil {
		// Outside a git checkout (a source tarball) there is nothing to stamp.
		if out2, err2 := goCmd(nil, "build", "-buildvcs=false", "-ldflags", ldflags, "-o", bin, "./cmd/cleanroom"); err2 != nil {
			return "", fmt.Errorf("go build ./cmd/cleanroom: %v\n%s\n%s", err2, out, out2)
		}
	}
	return dir, nil
}

// binaryDir returns the checkout's directory for built binaries, in the
// temporary directory so that a test running the binary as nobody can
// reach it: one per user and checkout (the checkout's path names it).
func binaryDir(root string) (string, error) {
	sum := sha256.Sum256([]byte(root))
	euid := os.Geteuid()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("cleanroom-test-bin-%d-%s", euid, hex.EncodeToString(sum[:6])))
	if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("test binaries: %w", err)
	}
	// The name is predictable in a shared directory: use it only if it is
	// a real directory (not a link planted there), ours, and writable by
	// nobody else, or another user could swap the binaries the tests run.
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return "", fmt.Errorf("test binaries: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != euid || st.Mode&0o022 != 0 {
		return "", fmt.Errorf("test binaries: %s is not a directory of uid %d writable only by it (mode %o, owner %d): remove it", dir, euid, st.Mode, st.Uid)
	}
	return dir, nil
}

// findRoot returns the module root (the directory holding go.mod), found
// by walking up from the working directory.
func findRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		dir = parent
	}
}
