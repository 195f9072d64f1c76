package sha2x_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/pkgwalk/internal/sha2x"
)

// Available's rule: the CPU first (the assembly is never run where it
// would fault), then the environment switch, then the known-answer
// self-check, which a block function off by one bit fails.
func TestDecide(t *testing.T) {
	t.Parallel()
	mustNotRun1 := func(*[8]uint32, *byte, int) {
		t.Error("a block function ran although the rule said no before the self-check")
	}
	mustNotRun2 := func(_, _ *[8]uint32, _, _ *byte, _ int) {
		t.Error("a block function ran although the rule said no before the self-check")
	}
	// A faulty implementation: right except for one bit of h7.
	off1 := func(h *[8]uint32, p *byte, n int) { sha2x.Generic1(h, p, n); h[7] ^= 1 }
	off2 := func(h, g *[8]uint32, p, q *byte, n int) { sha2x.Generic2(h, g, p, q, n); g[7] ^= 1 }
	cases := []struct {
		name string
		cpu  bool
		env  string
		b1   func(*[8]uint32, *byte, int)
		b2   func(_, _ *[8]uint32, _, _ *byte, _ int)
		want bool
		why  string
	}{
		{"no SHA-NI", false, "", mustNotRun1, mustNotRun2, false, "no SHA-NI"},
		{"switched off", true, "off", mustNotRun1, mustNotRun2, false, "CLEANROOM_SHA2X=off"},
		{"switched off, any case", true, " OFF ", mustNotRun1, mustNotRun2, false, "CLEANROOM_SHA2X=off"},
		{"one-stream function wrong", true, "", off1, sha2x.Generic2, false, "self-check failed"},
		{"two-stream function wrong", true, "on", sha2x.Generic1, off2, false, "self-check failed"},
		{"right answers", true, "", sha2x.Generic1, sha2x.Generic2, true, ""},
		{"right answers, other value", true, "yes", sha2x.Generic1, sha2x.Generic2, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why := sha2x.Decide(c.cpu, c.env, c.b1, c.b2)
			if got != c.want || !strings.Contains(why, c.why) || (c.why == "") != (why == "") {
				t.Errorf("Decide = %v, %q; want %v, %q", got, why, c.want, c.why)
			}
		})
	}
}

// On a CPU with SHA-NI the real assembly passes the self-check.
func TestAssemblyPassesSelfCheck(t *testing.T) {
	t.Parallel()
	need(t)
	if ok, why := sha2x.Decide(true, "", sha2x.Asm1, sha2x.Asm2); !ok {
		t.Fatalf("the assembly fails the self-check: %s", why)
	}
}

// CLEANROOM_SHA2X=off in the environment of a process turns the assembly
// off there (the test binary re-runs itself with it).
func TestEnvironmentSwitch(t *testing.T) {
	// Not parallel: it reads or forces the package-wide choice of
	// implementation (ForceFallback), which parallel tests would see change.
	if os.Getenv("SHA2X_TEST_CHILD") == "1" {
		fmt.Println("implementation: " + sha2x.Implementation())
		return
	}
	for _, c := range []struct{ env, want string }{
		{"off", "crypto/sha256 ("},
		{"", ""},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestEnvironmentSwitch$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SHA2X_TEST_CHILD=1", sha2x.EnvVar+"="+c.env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s=%q: %v\n%s", sha2x.EnvVar, c.env, err, out)
		}
		want := c.want
		if want == "" {
			// Unset or empty: whatever this process decided.
			want = sha2x.Implementation()
		}
		if !strings.Contains(string(out), "implementation: "+want) {
			t.Errorf("%s=%q: child says %q, want %q", sha2x.EnvVar, c.env, out, want)
		}
	}
}
