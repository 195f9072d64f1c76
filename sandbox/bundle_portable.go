package sandbox

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/sys/mountinfo"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// BundleOCIVersion is the ociVersion a bundle declares: the newest every
// common runtime here accepts. Debian bookworm's crun 1.8.1 refuses a
// version it does not know (the specs-go module's 1.3.0 among them),
// runsc implements 1.0.2-dev and runc 1.1 accepts any 1.0.x; the bundle
// uses nothing a 1.0.2 runtime lacks (rro, the one newer option, is
// rewritten by portableMounts).
const BundleOCIVersion = "1.0.2"

// recursiveRO is the mount option for a recursive read-only bind
// (mount_setattr AT_RECURSIVE): libcontainer honours it, runsc refuses
// it and crun 1.8 predates it.
const recursiveRO = "rro"

// portableMounts rewrites the spec's recursive read-only binds for every
// runtime: "rro" is dropped and each mount found below the bind's source
// (in mountinfo, now) gets its own read-only bind on top, so a submount
// of /usr is no more writable than /usr under runc, crun or runsc. A
// mount made below such a source after the bundle was written is not
// covered (libcontainer's rro would cover it): bundles are written just
// before they run.
func portableMounts(spec *specs.Spec) error {
	var mounts []specs.Mount
	for _, m := range spec.Mounts {
		if !slices.Contains(m.Options, recursiveRO) {
			mounts = append(mounts, m)
			continue
		}
		m.Options = slices.DeleteFunc(slices.Clone(m.Options), func(o string) bool { return o == recursiveRO })
		mounts = append(mounts, m)
		subs, err := mountinfo.GetMounts(mountinfo.PrefixFilter(m.Source))
		if err != nil {
			return fmt.Errorf("bundle: mounts below %s: %w", m.Source, err)
		}
		// Parents before children (a child's bind must land on the
		// parent's, not be hidden by it).
		slices.SortFunc(subs, func(a, b *mountinfo.Info) int { return strings.Compare(a.Mountpoint, b.Mountpoint) })
		for _, s := range subs {
			rel, err := filepath.Rel(m.Source, s.Mountpoint)
			// Outside is ".." or "../…" only: a submount named "..x" below
			// the source is inside and must get its read-only bind, or it
			// would stay writable in the bundle.
			if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
				continue // the source's own mount, or a sibling sharing its prefix (/usr2)
			}
			// Without this bind the submount would keep its own
			// (writable) flags inside the read-only tree.
			opts := []string{"bind", "ro"}
			for _, o := range m.Options {
				if o == "nosuid" || o == "nodev" || o == "noexec" {
					opts = append(opts, o)
				}
			}
			mounts = append(mounts, specs.Mount{Destination: filepath.Join(m.Destination, rel), Type: "bind", Source: s.Mountpoint, Options: opts})
		}
	}
	spec.Mounts = mounts
	spec.Version = BundleOCIVersion
	return nil
}
