package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// roomBinary builds the cleanroom binary: the room re-executes itself, so
// it cannot run inside the test binary.
func roomBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cleanroom")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestRoomServeCLI(t *testing.T) {
	if err := exec.Command("unshare", "-m", "-n", "true").Run(); err != nil {
		t.Skipf("cannot create mount+network namespaces here: %v", err)
	}
	bin := roomBinary(t)
	ws := filepath.Join(t.TempDir(), "ws")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no package", []string{"room", "serve", "--workspace", ws}, 2, "--world DIR, or --package DIR"},
		{"world and package", []string{"room", "serve", "--world", "w", "--package", "p", "--workspace", ws}, 2, "--world excludes"},
		{"bad pin", []string{"room", "serve", "--package", ".", "--expect", "bpkg-xyz", "--workspace", ws}, 2, "bpkg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, c.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.Stdin = strings.NewReader("")
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			if code != c.code || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d naming %q", code, stderr.String(), c.code, c.want)
			}
			if _, err := os.Stat(ws); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("workspace created by a refused room")
			}
		})
	}
}

// TestRoomServeWorld: the reference world lacks its .mjs files by design,
// so its tree is not the pinned bpkg of its run record, and the room must
// refuse to emit it (exit 1, naming the rule).
func TestRoomServeWorld(t *testing.T) {
	world := testshared.World(t, "world")
	if err := exec.Command("unshare", "-m", "-n", "true").Run(); err != nil {
		t.Skipf("cannot create mount+network namespaces here: %v", err)
	}
	bin := roomBinary(t)
	ws := filepath.Join(t.TempDir(), "ws")
	cmd := exec.Command(bin, "room", "serve", "--world", world, "--workspace", ws)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), string(pkgwalk.ErrNotPinned)) {
		t.Errorf("room serve --world: %v, stderr %q; want exit 1 naming %q", err, stderr.String(), pkgwalk.ErrNotPinned)
	}
}
