package seal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cleanroom-dev/cleanroom/internal/deathsig"
)

// TestCheckSealedEntry checks the mountinfo half of the assertion on lines
// written for the test, one per rule.
func TestCheckSealedEntry(t *testing.T) {
	t.Parallel()
	const dir = "/run/view"
	line := func(opts, optional, fstype, super string) string {
		return fmt.Sprintf("63 43 0:39 / %s %s %s- %s cleanroom-view %s", dir, opts, optional, fstype, super)
	}
	cases := []struct {
		name  string
		lines []string
		want  error
	}{
		{"sealed", []string{line("ro,nosuid,nodev,noexec,relatime", "", "tmpfs", "ro,size=1024k,mode=755")}, nil},
		{"bind-only ro: superblock rw", []string{line("ro,nosuid,nodev,noexec", "", "tmpfs", "rw,size=1024k")}, errSuperblockRW},
		{"superblock only: mount rw", []string{line("rw,nosuid,nodev,noexec", "", "tmpfs", "ro")}, errMountRW},
		{"flags cleared by a raw remount", []string{line("ro,relatime", "", "tmpfs", "ro")}, errMountFlags},
		{"shared peer group", []string{line("ro,nosuid,nodev,noexec", "shared:12 ", "tmpfs", "ro")}, errPeerGroup},
		{"not tmpfs", []string{line("ro,nosuid,nodev,noexec", "", "ext4", "ro")}, errNotTmpfs},
		{"bind of a subtree", []string{strings.Replace(line("ro,nosuid,nodev,noexec", "", "tmpfs", "ro"), " / ", " /pkg ", 1)}, errNotFreshMount},
		{"stacked", []string{line("ro,nosuid,nodev,noexec", "", "tmpfs", "ro"), line("ro,nosuid,nodev,noexec", "", "tmpfs", "ro")}, errStacked},
		{"absent", nil, errNotMounted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			table, err := ParseMountInfo(strings.NewReader(strings.Join(c.lines, "\n")))
			if err != nil {
				t.Fatal(err)
			}
			_, err = CheckSealedEntry(dir, MountsAt(table, dir))
			if !errors.Is(err, c.want) {
				t.Errorf("got %v, want %v", err, c.want)
			}
		})
	}
}

func TestParseMountInfoRefusesMalformed(t *testing.T) {
	t.Parallel()
	for _, l := range []string{"63 43 0:39 / /x rw", "x 43 0:39 / /x rw - tmpfs t rw", "63 43 039 / /x rw - tmpfs t rw"} {
		if _, err := ParseMountInfo(strings.NewReader(l)); err == nil || !strings.Contains(err.Error(), "mountinfo line 1: ") {
			t.Errorf("%q: %v, want a refusal naming line 1", l, err)
		}
	}
	table, err := ParseMountInfo(strings.NewReader(`63 43 0:39 / /a\040b rw shared:1 master:2 - tmpfs src rw`))
	if err != nil || table[0].MountPoint != "/a b" || table[0].PeerGroup() != "shared:1" {
		t.Errorf("escaped line: %+v, %v", table, err)
	}
}

// The test binary re-executes itself into fresh namespaces to run a body.
const sealChild = "sandbox-test-seal-child"

// (An init, not TestMain: the package's TestMain belongs to another file.)
func init() {
	if len(os.Args) > 3 && os.Args[1] == sealChild {
		if err := sealChildMain(os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// sealChildMain runs in fresh namespaces. "full" seals and asserts;
// "bind-only" makes the view read-only per mount only, which the assertion
// must refuse as errSuperblockRW — the kernel agreeing that the difference
// is real, not just our parser.
func sealChildMain(mode, dir string) error {
	if err := AssertIsolatedFrom(os.Getppid()); err != nil {
		return err
	}
	if err := MakeRootPrivate(); err != nil {
		return err
	}
	if err := AssertNoNetwork(); err != nil {
		return err
	}
	emit := func(d string) error { return os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644) }
	switch mode {
	case "full":
		a, err := Seal(dir, 1<<20, emit)
		if err != nil {
			return err
		}
		if a.ProbeErrno != "EROFS" {
			return fmt.Errorf("probe %q", a.ProbeErrno)
		}
		return nil
	case "bind-only":
		if err := MountView(dir, 1<<20); err != nil {
			return err
		}
		if err := emit(dir); err != nil {
			return err
		}
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return err
		}
		if _, _, err := OpenSealed(dir); !errors.Is(err, errSuperblockRW) {
			return fmt.Errorf("bind-only view: %v, want %v", err, errSuperblockRW)
		}
		return nil
	case "descriptors":
		return assertDescriptors(dir)
	case "busy":
		if err := MountView(dir, 1<<20); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(dir, "open-for-writing"))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := RemountReadOnly(dir); !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("remount with a write fd open: %v, want EBUSY", err)
		}
		return nil
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// assertDescriptors seals a view at dir and hands AssertSealedAt
// descriptors that are not that view while the mountinfo entry at dir is
// sealed: each must be refused naming the rule that tells them apart, and
// the view's own descriptor must pass. Run in fresh namespaces.
func assertDescriptors(dir string) error {
	// Opened before the mount: the directory the view covers.
	under, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer under.Close()
	emit := func(d string) error {
		if err := os.Mkdir(filepath.Join(d, "sub"), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(d, "sub", "f"), []byte("x"), 0o644)
	}
	if _, err := Seal(dir, 1<<20, emit); err != nil {
		return err
	}
	other, bind := dir+"-other", dir+"-bind"
	for _, d := range []string{other, bind} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	// Another view, sealed the same way: everything but the device agrees.
	if _, err := Seal(other, 1<<20, emit); err != nil {
		return err
	}
	// The view bound elsewhere: same superblock and device, another mount.
	if err := unix.Mount(dir, bind, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	open := func(p string) func() (*os.File, error) { return func() (*os.File, error) { return os.Open(p) } }
	cases := []struct {
		name string
		open func() (*os.File, error)
		want error // nil: the view itself, accepted
	}{
		{"the view", open(dir), nil},
		{"a directory on another file system", open(filepath.Dir(dir)), errStatfsRW},
		{"the directory under the mount", func() (*os.File, error) { return under, nil }, errStatfsRW},
		{"another sealed view", open(other), errDeviceMismatch},
		{"a bind of the view elsewhere", open(bind), errNotMountRoot},
		{"a subdirectory of the view", open(filepath.Join(dir, "sub")), errNotMountRoot},
	}
	var errs []error
	for _, c := range cases {
		f, err := c.open()
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		_, err = AssertSealedAt(f, dir)
		if f != under {
			f.Close()
		}
		switch {
		case c.want == nil && err != nil:
			errs = append(errs, fmt.Errorf("%s: %v, want it accepted", c.name, err))
		case c.want != nil && (!errors.Is(err, c.want) || !strings.Contains(fmt.Sprint(err), c.want.Error())):
			errs = append(errs, fmt.Errorf("%s: %v, want a refusal naming %q", c.name, err, c.want))
		}
	}
	return errors.Join(errs...)
}

// TestSealInNamespaces seals real tmpfs views in fresh namespaces.
func TestSealInNamespaces(t *testing.T) {
	t.Parallel()
	if err := deathsig.Run(SealedCommand("/bin/true", nil, nil)); err != nil {
		t.Skipf("cannot create mount+network namespaces here: %v", err)
	}
	for _, mode := range []string{"full", "bind-only", "busy", "descriptors"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			cmd := SealedCommand(os.Args[0], []string{sealChild, mode, dir}, nil)
			out, err := deathsig.CombinedOutput(cmd)
			if err != nil {
				t.Fatalf("%s: %v\n%s", mode, err, out)
			}
			// The host saw nothing: the directory is still empty here.
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Errorf("host sees %d entries in the view's mount point", len(ents))
			}
		})
	}
}
