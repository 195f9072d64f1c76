package hosttree

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	link := filepath.Join(base, "etc-link")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/", false}, {"/etc", false}, {"/etc/cleanroom", false}, {"/usr/local/results", false},
		{"/proc/self/root", false}, {"/sys/fs/cgroup", false}, {"/dev/shm/x", false}, {"/var", false},
		{"/var/lib/results", false}, {"/tmp", false}, {"/home", false}, {"/root", false},
		{link, false}, {filepath.Join(link, "new", "dir"), false},
		{filepath.Join(base, "results"), true}, {"/home/operator/results", true}, {"/var/tmp/x", true},
	} {
		err := Check(tc.path)
		if tc.ok && err != nil {
			t.Errorf("Check(%s) = %v", tc.path, err)
		}
		if !tc.ok && !errors.Is(err, errSystemTree) {
			t.Errorf("Check(%s) = %v, want %v", tc.path, err, errSystemTree)
		}
	}
}
