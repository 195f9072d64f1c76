package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/sandbox/seal"
	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// ErrGCIncomplete: GC found a stale run it could not (or must not) remove
// entirely; the run's Problems name what and why.
var ErrGCIncomplete = fault.New(fault.Refused, "stale sandbox run not removed")

// cgroupParent is the cgroup directory every run's cgroups are created in
// (Config.Spec's CgroupsPath), under each hierarchy.
const cgroupParent = "cleanroom-sandbox"

// runIDPattern is what newID makes; nothing else under the state root is
// taken for a run.
var runIDPattern = regexp.MustCompile(`^cr[0-9a-f]{12}$`)

// GCReport is what `cleanroom sandbox gc` prints.
type GCReport struct {
	StateRoot string `json:"state_root"`
	DryRun    bool   `json:"dry_run"`
	// Live are the runs whose owner still holds its lock (untouched).
	Live []string `json:"live"`
	// Stale are the runs whose owner is gone, with what was (or, with
	// DryRun, would be) removed.
	Stale []StaleRun `json:"stale"`
}

// StaleRun is one run whose owner is gone.
type StaleRun struct {
	ID string `json:"id"`
	// Dir is the run's directory under the state root.
	Dir string `json:"dir"`
	// Mounts are the mount points at and beneath Dir (the run's tmpfs,
	// the package view): detached together.
	Mounts []string `json:"mounts"`
	// Cgroups are the run's cgroup directories (one per hierarchy).
	Cgroups []string `json:"cgroups"`
	// Filter is the host-side nftables table of an allowlisted run
	// (inet cleanroom-<id>), when one is left.
	Filter string `json:"nft_table,omitempty"`
	// Removed is true when everything listed is gone.
	Removed bool `json:"removed"`
	// Problems name what could not be removed and why.
	Problems []string `json:"problems,omitempty"`
}

// GC removes what runs whose owner is gone left behind under stateDir
// (default /run/cleanroom-sandbox): the run's tmpfs (and the package view
// in it), its directory and its empty cgroups. A run is stale only if its
// owner lock (runLockName in its tmpfs) can be taken, or it has none; the
// state root is held with an exclusive flock meanwhile, so no run is caught
// between creating its directory and taking its lock. A stale run whose
// cgroup still has processes is left whole and named (nothing is killed).
// With dryRun nothing is removed. The error wraps ErrGCIncomplete when a
// stale run was not removed; the report is returned either way.
func GC(stateDir string, dryRun bool) (*GCReport, error) {
	if stateDir == "" {
		stateDir = DefaultStateDir
	}
	rep, err := gc(stateDir, dryRun)
	if err == nil && !dryRun {
		// The killed runs never released the state root's private bind
		// (their end did not run); with every run gone, it goes too.
		releaseStateRoot(stateDir)
	}
	return rep, err
}

// gc is GC under the state root's exclusive lock, released on return.
func gc(stateDir string, dryRun bool) (*GCReport, error) {
	rep := &GCReport{StateRoot: stateDir, DryRun: dryRun, Live: []string{}, Stale: []StaleRun{}}
	root, err := openStateRoot(stateDir, false)
	if errors.Is(err, unix.ENOENT) {
		return rep, nil // no run was ever made here
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(root)
	// Exclusive: a run holds the root shared from mkdir to its lock.
	if err := unix.Flock(root, unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("%w: %s: lock: %w", errStateRoot, stateDir, err)
	}
	names, err := readDirNames(root, stateDir)
	if err != nil {
		return nil, err
	}
	var stale []*StaleRun
	var locks []int
	defer func() {
		for _, fd := range locks {
			unix.Close(fd)
		}
	}()
	for _, name := range names {
		if !runIDPattern.MatchString(name) {
			continue
		}
		live, lock, err := runOwnerGone(root, stateDir, name)
		if err != nil {
			stale = append(stale, &StaleRun{ID: name, Dir: filepath.Join(stateDir, name), Problems: []string{err.Error()}})
			continue
		}
		if live {
			rep.Live = append(rep.Live, name)
			continue
		}
		if lock >= 0 {
			// Held until GC returns: the run stays ours while it is removed.
			locks = append(locks, lock)
		}
		stale = append(stale, &StaleRun{ID: name, Dir: filepath.Join(stateDir, name)})
	}
	if len(stale) > 0 {
		table, err := seal.ReadMountInfo(0)
		if err != nil {
			return nil, err
		}
		cgroups, err := runCgroups(table)
		if err != nil {
			return nil, err
		}
		for _, r := range stale {
			if len(r.Problems) == 0 {
				r.Cgroups = cgroups[r.ID]
				if t, err := leftFilterTable(r.ID); err != nil {
					// Without nf_tables there is no table to leave.
					if !errors.Is(err, unix.EPROTONOSUPPORT) && !errors.Is(err, unix.EAFNOSUPPORT) {
						r.Problems = append(r.Problems, fmt.Sprintf("nftables: %v", err))
					}
				} else {
					r.Filter = t
				}
				gcRun(root, r, table, dryRun)
			}
		}
	}
	incomplete := 0
	for _, r := range stale {
		rep.Stale = append(rep.Stale, *r)
		if len(r.Problems) > 0 {
			incomplete++
		}
	}
	if incomplete > 0 {
		return rep, fmt.Errorf("%w: %d of %d stale runs under %s", ErrGCIncomplete, incomplete, len(stale), stateDir)
	}
	return rep, nil
}

// readDirNames lists the directory fd (a duplicate is read, so fd's offset
// is left alone).
func readDirNames(fd int, name string) ([]string, error) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f := os.NewFile(uintptr(dup), name)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	slices.Sort(names)
	return names, nil
}

// runOwnerGone decides whether the run name's owner is alive: its lock is
// held (live), or was taken here (lock ≥ 0, to be held while the run is
// removed), or the run has no lock file (lock -1: its owner died before
// taking it, or ended and is removing an already unmounted directory).
func runOwnerGone(root int, stateDir, name string) (live bool, lock int, err error) {
	// O_NOFOLLOW: an entry that is not the run's directory is not followed.
	run, err := unix.Openat(root, name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, -1, fmt.Errorf("%s: not a run directory: %w", filepath.Join(stateDir, name), err)
	}
	defer unix.Close(run)
	lock, err = unix.Openat(run, runLockName, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return false, -1, nil
	}
	if err != nil {
		return false, -1, fmt.Errorf("%s: owner lock: %w", filepath.Join(stateDir, name, runLockName), err)
	}
	if err := unix.Flock(lock, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(lock)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return true, -1, nil
		}
		return false, -1, fmt.Errorf("%s: owner lock: %w", filepath.Join(stateDir, name, runLockName), err)
	}
	return false, lock, nil
}

// runCgroups finds the runs' cgroup directories: <hierarchy>/…/
// cleanroom-sandbox/<id> under every cgroup mount (libcontainer places
// them relative to the starting process's own cgroup, which gc does not
// know). Keyed by run id.
func runCgroups(table []seal.MountInfo) (map[string][]string, error) {
	out := map[string][]string{}
	seen := map[string]bool{}
	for _, m := range table {
		if (m.FSType != "cgroup" && m.FSType != "cgroup2") || seen[m.MountPoint] {
			continue
		}
		seen[m.MountPoint] = true
		err := filepath.WalkDir(m.MountPoint, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // a cgroup removed while walking
			}
			if !d.IsDir() || d.Name() != cgroupParent {
				return nil
			}
			ents, _ := os.ReadDir(p)
			for _, e := range ents {
				if e.IsDir() && runIDPattern.MatchString(e.Name()) {
					out[e.Name()] = append(out[e.Name()], filepath.Join(p, e.Name()))
				}
			}
			return fs.SkipDir
		})
		if err != nil {
			return nil, fmt.Errorf("walking cgroups under %s: %w", m.MountPoint, err)
		}
	}
	return out, nil
}

// gcRun removes one stale run: nothing at all if one of its cgroups still
// has processes; else its mounts (detached at the run's directory, which
// must carry the run tmpfs's source), its directory, its cgroups.
func gcRun(root int, r *StaleRun, table []seal.MountInfo, dryRun bool) {
	for _, cg := range r.Cgroups {
		// Nothing is killed: a process still there may be a candidate
		// that outlived its harness, for the operator to look at.
		b, err := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %v", filepath.Join(cg, "cgroup.procs"), err))
		} else if n := len(bytes.Fields(b)); n > 0 {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: cgroup still has %d processes (nothing killed, run left whole)", cg, n))
		}
	}
	var top *seal.MountInfo
	for i, m := range table {
		if m.MountPoint == r.Dir || strings.HasPrefix(m.MountPoint, r.Dir+"/") {
			r.Mounts = append(r.Mounts, m.MountPoint)
			if m.MountPoint == r.Dir {
				top = &table[i]
			}
		}
	}
	// Only a run tmpfs is detached: anything else mounted there is not
	// ours to remove.
	if len(r.Mounts) > 0 && (top == nil || top.FSType != "tmpfs" || top.Source != bundleSource) {
		r.Problems = append(r.Problems, fmt.Sprintf("%s: mounted, but not by a sandbox run (want tmpfs %s at the directory itself)", r.Dir, bundleSource))
	}
	if len(r.Problems) > 0 || dryRun {
		return
	}
	if len(r.Mounts) > 0 {
		// UMOUNT_NOFOLLOW: the directory is detached, never a link's
		// target; MNT_DETACH takes the package view beneath with it.
		if err := unix.Unmount(r.Dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: unmount: %v", r.Dir, err))
			return
		}
	}
	if err := unix.Unlinkat(root, r.ID, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		r.Problems = append(r.Problems, fmt.Sprintf("%s: remove: %v", r.Dir, err))
	}
	for _, cg := range r.Cgroups {
		// rmdir of a cgroup fails with EBUSY if a process joined since.
		if err := unix.Rmdir(cg); err != nil && !errors.Is(err, unix.ENOENT) {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: remove cgroup: %v", cg, err))
		}
	}
	if r.Filter != "" {
		if err := delFilterTable(r.Filter); err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("nftables table inet %s: remove: %v", r.Filter, err))
		}
	}
	r.Removed = len(r.Problems) == 0
}

// leftFilterTable names the host filter table of run id if it is still
// there (an allowlisted run whose owner was killed before its teardown).
// The name holds the run's random id, so no other table is ever named.
func leftFilterTable(id string) (string, error) {
	c, err := nftables.New()
	if err != nil {
		return "", err
	}
	name := (&egress{id: id}).tableName()
	if _, err := c.ListTableOfFamily(name, nftables.TableFamilyINet); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", nil
		}
		return "", err
	}
	return name, nil
}

// delFilterTable removes the host filter table inet name: a run's own
// teardown, or gc's for a run killed before it.
func delFilterTable(name string) error {
	c, err := nftables.New()
	if err != nil {
		return err
	}
	c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: name})
	return c.Flush()
}
