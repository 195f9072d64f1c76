package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// The delegation point is the highest ancestor of this process's cgroup
// that the user owns (with its cgroup.procs and cgroup.subtree_control)
// and that already enables memory and pids for its children; a subtree
// without them, or owned by someone else, is none.
func TestDelegatedBelow(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the fixture chowns files to another uid")
	}
	const uid = 4242
	tests := []struct {
		name    string
		control string // the delegated directory's cgroup.subtree_control
		owner   int    // owner of user.slice/user-4242.slice/user@4242.service and below
		want    string // relative to root; "" = none
	}{
		{"delegated", "cpu memory pids\n", uid, "user.slice/user-4242.slice/user@4242.service"},
		{"no pids", "cpu memory\n", uid, ""},
		{"someone else's", "cpu memory pids\n", 1000, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			top := filepath.Join(root, "user.slice/user-4242.slice/user@4242.service")
			leaf := filepath.Join(top, "app.slice/term.scope")
			if err := os.MkdirAll(leaf, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{top, filepath.Dir(leaf), leaf} {
				for _, f := range []string{"cgroup.procs", "cgroup.subtree_control"} {
					if err := os.WriteFile(filepath.Join(d, f), nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte(tc.control), 0o644); err != nil {
					t.Fatal(err)
				}
				for _, p := range []string{d, filepath.Join(d, "cgroup.procs"), filepath.Join(d, "cgroup.subtree_control")} {
					if err := os.Lchown(p, tc.owner, tc.owner); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, ok := delegatedBelow(root, "/user.slice/user-4242.slice/user@4242.service/app.slice/term.scope", uid)
			want := ""
			if tc.want != "" {
				want = filepath.Join(root, tc.want)
			}
			if got != want || ok != (want != "") {
				t.Errorf("got %q %v, want %q", got, ok, want)
			}
		})
	}
}

// Each sysctl that forbids unprivileged user namespaces is named with the
// value that forbids; the others are not.
func TestForbiddingSysctls(t *testing.T) {
	tests := []struct {
		files map[string]string
		want  []string
	}{
		{map[string]string{"user/max_user_namespaces": "0\n", "kernel/unprivileged_userns_clone": "1\n"}, []string{"user.max_user_namespaces=0"}},
		{map[string]string{"kernel/unprivileged_userns_clone": "0\n", "kernel/apparmor_restrict_unprivileged_userns": "1\n"},
			[]string{"kernel.unprivileged_userns_clone=0", "kernel.apparmor_restrict_unprivileged_userns=1"}},
		{map[string]string{"user/max_user_namespaces": "96362\n", "kernel/apparmor_restrict_unprivileged_userns": "0\n"}, nil},
	}
	old := procSys
	defer func() { procSys = old }()
	for _, tc := range tests {
		procSys = t.TempDir()
		for f, v := range tc.files {
			if err := os.MkdirAll(filepath.Join(procSys, filepath.Dir(f)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(procSys, f), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := forbiddingSysctls(); !slices.Equal(got, tc.want) {
			t.Errorf("%v: got %q, want %q", tc.files, got, tc.want)
		}
	}
}

// uid_map lines map an id one level up; the initial namespace is the
// identity over every id.
func TestIDMap(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "uid_map")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	maps, err := readIDMap(write("         0      65534          1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if h, ok := outside(maps, 0); !ok || h != 65534 {
		t.Errorf("0 maps to %d %v, want 65534", h, ok)
	}
	if _, ok := outside(maps, 1); ok {
		t.Error("1 is not mapped")
	}
	if initialUserNS(maps) {
		t.Error("a one-id map is not the initial namespace")
	}
	maps, err = readIDMap(write("         0          0 4294967295\n"))
	if err != nil || !initialUserNS(maps) {
		t.Errorf("identity map: %v %v", maps, err)
	}
	if _, err := readIDMap(write("0 0\n")); err == nil {
		t.Error("a malformed line was accepted")
	}
}

// In rootless mode with rlimits, the memory and task limits are the
// limits stage's (sandboxinit.LimitsArg, set at the command's exec), never
// the process rlimits libcontainer sets on the container's init before
// the exec: those would bound the init's own Go runtime, which a small
// memory limit kills. The file and core limits stay libcontainer's.
func TestRootlessLimitsAtExec(t *testing.T) {
	saved := rootless
	t.Cleanup(func() { rootless = saved })
	rootless = func() rootlessState { return rootlessState{on: true, hostUID: 65534, limits: LimitsRlimits} }
	var data, nproc unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_DATA, &data) != nil || unix.Getrlimit(unix.RLIMIT_NPROC, &nproc) != nil {
		t.Skip("getrlimit failed")
	}
	if data.Max < 16<<20 || nproc.Max < 8 {
		t.Skipf("this process's own hard limits (data %d, nproc %d) are below the test's", data.Max, nproc.Max)
	}
	root := t.TempDir()
	for _, tc := range []struct {
		name, exe, stage string
	}{
		{"exec", "", "/proc/self/exe"},
		{"bundle", "/usr/bin/cleanroom", shimPath},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Args: []string{"/bin/sh", "-c", "true"}, Memory: 16 << 20, Pids: 8}
			spec, err := cfg.spec(filepath.Join(root, "rootfs"), "", "x", tc.exe)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{tc.stage, "sandbox-limits", "16777216", "8"}
			if tc.exe != "" {
				want = append(want, shimPath, ShimArg)
			}
			want = append(want, "/bin/sh", "-c", "true")
			if !slices.Equal(spec.Process.Args, want) {
				t.Errorf("args %q, want %q", spec.Process.Args, want)
			}
			var types []string
			for _, r := range spec.Process.Rlimits {
				types = append(types, r.Type)
			}
			if !slices.Equal(types, []string{"RLIMIT_NOFILE", "RLIMIT_CORE"}) {
				t.Errorf("the init's rlimits %v, want RLIMIT_NOFILE and RLIMIT_CORE only", types)
			}
			if spec.Linux.Resources != nil || spec.Linux.CgroupsPath != "" {
				t.Errorf("cgroup limits in rlimits mode: %+v %q", spec.Linux.Resources, spec.Linux.CgroupsPath)
			}
		})
	}
}
