package seal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCheckSealedEntry checks the mountinfo half of the assertion on lines
// written for the test, one per rule.
func TestCheckSealedEntry(t *testing.T) {
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
		{"bind-only ro: superblock rw", []string{line("ro,nosuid,nodev,noexec", "", "tmpfs", "rw,size=1024k")}, ErrSuperblockRW},
		{"superblock only: mount rw", []string{line("rw,nosuid,nodev,noexec", "", "tmpfs", "ro")}, ErrMountRW},
		{"flags cleared by a raw remount", []string{line("ro,relatime", "", "tmpfs", "ro")}, ErrMountFlags},
		{"shared peer group", []string{line("ro,nosuid,nodev,noexec", "shared:12 ", "tmpfs", "ro")}, ErrPeerGroup},
		{"not tmpfs", []string{line("ro,nosuid,nodev,noexec", "", "ext4", "ro")}, ErrNotTmpfs},
		{"stacked", []string{line("ro,nosuid,nodev,noexec", "", "tmpfs", "ro"), line("ro,nosuid,nodev,noexec", "", "tmpfs", "ro")}, ErrStacked},
		{"absent", nil, ErrNotMounted},
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
// must refuse as ErrSuperblockRW — the kernel agreeing that the difference
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
		if _, err := AssertSealed(dir); !errors.Is(err, ErrSuperblockRW) {
			return fmt.Errorf("bind-only view: %v, want %v", err, ErrSuperblockRW)
		}
		return nil
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

// TestSealInNamespaces seals real tmpfs views in fresh namespaces.
func TestSealInNamespaces(t *testing.T) {
	if err := SealedCommand("/bin/true", nil, nil).Run(); err != nil {
		t.Skipf("cannot create mount+network namespaces here: %v", err)
	}
	for _, mode := range []string{"full", "bind-only", "busy"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			cmd := SealedCommand(os.Args[0], []string{sealChild, mode, dir}, nil)
			out, err := cmd.CombinedOutput()
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
