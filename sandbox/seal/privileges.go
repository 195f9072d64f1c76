package seal

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Securebits (linux/securebits.h); x/sys/unix does not define them.
const (
	secbitNoRoot                  = 1 << 0
	secbitNoRootLocked            = 1 << 1
	secbitNoSetuidFixup           = 1 << 2
	secbitNoSetuidFixupLocked     = 1 << 3
	secbitKeepCapsLocked          = 1 << 5
	secbitNoCapAmbientRaise       = 1 << 6
	secbitNoCapAmbientRaiseLocked = 1 << 7
)

// ExecUnprivileged replaces this process with argv (argv[0] is the program
// path) holding no capability at all and with no_new_privs set, and does
// not return on success.
//
// Capability sets belong to threads, not processes, so dropping them in a
// running Go program would leave the runtime's other threads privileged.
// Instead the calling thread is locked, cleared (bounding set emptied,
// ambient set cleared, securebits locked so uid 0 regains nothing on exec,
// inheritable/permitted/effective set to zero, no_new_privs) and then
// execs: the new image is built from this thread's credentials, and every
// thread the new runtime starts inherits them.
func ExecUnprivileged(argv []string, env []string) error {
	runtime.LockOSThread()
	// Never unlocked: on failure this thread's credentials are half-dropped,
	// and a goroutine that exits locked takes its thread with it.
	last, err := capLastCap()
	if err != nil {
		return err
	}
	// Lock uid 0 out of regaining capabilities through execve (SECBIT_NOROOT)
	// or through setuid transitions, and forbid raising ambient capabilities.
	bits := secbitNoRoot | secbitNoRootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
		secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLocked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
		return fmt.Errorf("setting securebits: %w", err)
	}
	// An empty bounding set means no file capability can be gained on exec.
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	// Ambient capabilities survive execve of an unprivileged program.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	// no_new_privs: nothing this process execs can gain privileges
	// (setuid bits, file capabilities).
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData // all zero: effective, permitted, inheritable
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset to zero: %w", err)
	}
	if err := syscall.Exec(argv[0], argv, env); err != nil {
		return fmt.Errorf("exec %s: %w", argv[0], err)
	}
	return nil
}

func capLastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("reading cap_last_cap: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 || n > 63 {
		return 0, fmt.Errorf("cap_last_cap %q is not a capability number", strings.TrimSpace(string(b)))
	}
	return n, nil
}

// Privileges is what /proc says about one thread's privileges.
type Privileges struct {
	Task                   int
	CapInh, CapPrm, CapEff uint64
	CapBnd, CapAmb         uint64
	NoNewPrivs             bool
	Seccomp                string
}

// Unprivileged reports whether every capability set is empty and
// no_new_privs is set.
func (p Privileges) Unprivileged() bool {
	return p.CapInh == 0 && p.CapPrm == 0 && p.CapEff == 0 && p.CapBnd == 0 && p.CapAmb == 0 && p.NoNewPrivs
}

// ReadPrivileges reads the privileges of every thread of process pid (0 for
// this process) from /proc/<pid>/task/*/status.
func ReadPrivileges(pid int) ([]Privileges, error) {
	base := "/proc/self/task"
	if pid != 0 {
		base = fmt.Sprintf("/proc/%d/task", pid)
	}
	ents, err := os.ReadDir(base)
	if err != nil {
		return nil, fmt.Errorf("listing threads: %w", err)
	}
	var out []Privileges
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, err := readTaskPrivileges(filepath.Join(base, e.Name(), "status"))
		if err != nil {
			// A thread may exit between the listing and the read.
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		p.Task = tid
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no thread of process %d could be read", pid)
	}
	return out, nil
}

func readTaskPrivileges(path string) (Privileges, error) {
	f, err := os.Open(path)
	if err != nil {
		return Privileges{}, err
	}
	defer f.Close()
	var p Privileges
	seen := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		hex := func(dst *uint64) error {
			n, err := strconv.ParseUint(v, 16, 64)
			if err != nil {
				return fmt.Errorf("%s: %s %q: %w", path, k, v, err)
			}
			*dst = n
			seen++
			return nil
		}
		var err error
		switch k {
		case "CapInh":
			err = hex(&p.CapInh)
		case "CapPrm":
			err = hex(&p.CapPrm)
		case "CapEff":
			err = hex(&p.CapEff)
		case "CapBnd":
			err = hex(&p.CapBnd)
		case "CapAmb":
			err = hex(&p.CapAmb)
		case "NoNewPrivs":
			p.NoNewPrivs = v == "1"
			seen++
		case "Seccomp":
			p.Seccomp = v
		}
		if err != nil {
			return Privileges{}, err
		}
	}
	if err := sc.Err(); err != nil {
		return Privileges{}, fmt.Errorf("reading %s: %w", path, err)
	}
	// A kernel that does not report every set cannot be asserted from.
	if seen != 6 {
		return Privileges{}, fmt.Errorf("%s: %d of 6 privilege fields present", path, seen)
	}
	return p, nil
}

// AssertUnprivileged checks, for every thread of this process, that all
// capability sets are empty and no_new_privs is set.
func AssertUnprivileged() error {
	ps, err := ReadPrivileges(0)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if !p.Unprivileged() {
			return fmt.Errorf("%w: thread %d: CapInh=%x CapPrm=%x CapEff=%x CapBnd=%x CapAmb=%x NoNewPrivs=%v",
				errPrivileged, p.Task, p.CapInh, p.CapPrm, p.CapEff, p.CapBnd, p.CapAmb, p.NoNewPrivs)
		}
	}
	return nil
}
