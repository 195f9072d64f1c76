package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
)

const fleetRunList = `[
 {"name": "amber-case-1", "kind": "amber",
  "case_manifest_sha256": "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc",
  "candidate": "acme/model-7",
  "image": "registry.example/cleanroom@sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
  "command": ["cleanroom", "amber", "run"], "runtime_class": "gvisor", "allow": ["203.0.113.7:443"],
  "limits": {"cpu": "1", "memory": "1Gi", "ephemeral_storage": "1Gi", "deadline_seconds": 600}}
]`

func TestFleetCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs.json")
	if err := os.WriteFile(runs, []byte(fleetRunList), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(strings.Replace(fleetRunList, `"gvisor"`, `"kata"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(dir, "plan")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout+stderr
	}{
		{"plan", []string{"--json", "fleet", "plan", "--runs", runs, "--out", plan}, 0, `"file": "k8s/amber-case-1.yaml"`},
		{"plan again", []string{"fleet", "plan", "--runs", runs, "--out", plan}, 2, "file already exists"},
		{"bad run list", []string{"fleet", "plan", "--runs", bad, "--out", filepath.Join(dir, "p2")}, 1, bad + ": /0/runtime_class: runtime class"},
		{"no --runs", []string{"fleet", "plan", "--out", filepath.Join(dir, "p3")}, 2, `required flag(s) "runs" not set`},
		{"bind without a plan entry", []string{"fleet", "bind", "--results", dir}, 2, "bind needs --results, --kind, --run"},
		{"bind a bad entry", []string{"fleet", "bind", "--results", dir, "--kind", "amber", "--run", "x", "--run-sha256", "abc", "--plan-sha256", "abc"}, 1, "plan entry: run_sha256"},
		{"collect nothing", []string{"--json", "fleet", "collect", "--runs", runs, "--from", filepath.Join(dir, "none"), "--into", filepath.Join(dir, "results")}, 1, `"verdict": "missing"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(out+errs, tc.want) {
				t.Errorf("exit %d (want %d), want %q in:\n%s%s", code, tc.code, tc.want, out, errs)
			}
			if tc.code == 0 && strings.HasPrefix(tc.args[0], "--json") {
				if _, err := evidence.ReadObject([]byte(out)); err != nil {
					t.Errorf("--json output: %v", err)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "p2")); !os.IsNotExist(err) {
		t.Errorf("a refused run list left a plan: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(plan, "k8s", "amber-case-1.yaml"))
	if err != nil || !strings.Contains(string(b), "runtimeClassName: gvisor") || !strings.Contains(string(b), "cidr: 203.0.113.7/32") {
		t.Errorf("plan file: %v\n%s", err, b)
	}
}

// The demo's fleet stage plans the demo's revealed run and collects the
// world back, verified.
func TestDemoFleet(t *testing.T) {
	t.Parallel()
	env := &demoEnv{out: t.TempDir(), ids: map[string]string{}}
	ctx := t.Context()
	for _, stage := range []func() (string, error){
		func() (string, error) { return demoCopyWorld(ctx, env) },
		func() (string, error) { return demoIssueRelease(env, env.pkg(), env.holdout()) },
		func() (string, error) { return demoPin(ctx, env) },
		// The clean-room stage runs this binary's `room serve`, which a
		// test binary is not: put what its implementer writes where
		// demoFreeze freezes it.
		func() (string, error) {
			b, err := os.ReadFile(filepath.Join(env.world, "implementer", "tally-candidate"))
			if err != nil {
				return "", err
			}
			if err := os.MkdirAll(filepath.Join(env.world, demoWorkspace), 0o755); err != nil {
				return "", err
			}
			return "", os.WriteFile(filepath.Join(env.world, demoWorkspace, "tally-candidate"), b, 0o755)
		},
		func() (string, error) { return demoFreeze(ctx, env) },
		func() (string, error) { return demoReveal(ctx, env) },
	} {
		if _, err := stage(); err != nil {
			t.Fatal(err)
		}
	}
	got, err := demoFleet(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "REVEALED") {
		t.Errorf("demo stage: %s", got)
	}
	b, err := os.ReadFile(filepath.Join(env.out, "fleet", "plan", "k8s", "world.yaml"))
	if err != nil || !strings.Contains(string(b), env.ids["srel"]) {
		t.Errorf("plan: %v", err)
	}
	if _, err := os.Stat(filepath.Join(env.out, "fleet", "results", "world", "governance", "blind-run.json")); err != nil {
		t.Errorf("collected record: %v", err)
	}
}
