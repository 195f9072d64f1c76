package experiment

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/cleanroom-dev/cleanroom/internal/fsx"
	"golang.org/x/sys/unix"
)

// stateLock is an exclusive flock(2) on the state root directory itself, so
// two operators cannot transition one run at once, and a lock file cannot
// be left behind to wedge the world. The kernel releases it when the holder
// dies, so a crashed transition never leaves the world locked.
type stateLock struct{ f *os.File }

// lockPoll is how often a waiting transition retries the lock.
const lockPoll = 20 * time.Millisecond

// lockState takes the exclusive lock on the state root, creating the state
// root if it does not exist. It waits until ctx is done; a context without
// a deadline that is already done, or one that expires, gives errLocked.
func (w *World) lockState(ctx context.Context, create bool) (*stateLock, error) {
	if p := w.stateRootProblem(); p != nil {
		return nil, p
	}
	if !create {
		// Only a pin starts a state root: a transition of a world that has
		// none refuses without leaving an empty one behind (in the current
		// directory, with the default --world).
		if _, err := os.Lstat(w.StateDir()); errors.Is(err, fs.ErrNotExist) {
			return nil, &RunProblem{Rule: errNoRecord, File: w.stateRel(RecordFileName), Detail: "no run is pinned"}
		}
	} else if err := mkdirDurable(w.StateDir()); err != nil {
		return nil, fmt.Errorf("state root %s: %w", w.StateDir(), err)
	}
	// A symlink at the state root is refused (fsx.OpenDir: on gVisor too).
	fd, err := fsx.OpenDir(w.StateDir())
	if err != nil {
		return nil, fmt.Errorf("state root %s: %w", w.StateDir(), err)
	}
	f := os.NewFile(uintptr(fd), w.StateDir())
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return &stateLock{f: f}, nil
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", w.StateDir(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, &RunProblem{Rule: errLocked, File: StateDirName, Detail: "another transition holds the lock", Err: ctx.Err()}
		case <-time.After(lockPoll):
		}
	}
}

// unlock releases the lock.
func (l *stateLock) unlock() {
	if l == nil || l.f == nil {
		return
	}
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	_ = l.f.Close()
	l.f = nil
}
