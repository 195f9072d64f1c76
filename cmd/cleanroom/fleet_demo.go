package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/fleet"
)

// demoFleetImage is the demo's image reference: a placeholder in the
// reserved .invalid domain (the demo builds no image; an operator names
// the digest of the image they pushed).
const demoFleetImage = "registry.invalid/cleanroom-room@sha256:0000000000000000000000000000000000000000000000000000000000000000"

// demoFleet is a demo stage (after the run is revealed): the demo's run as
// a fleet plan — one Job and one NetworkPolicy, runtime class runc, no
// egress — in env.out/fleet/plan, then the world collected back into
// env.out/fleet/results as a cluster's results volume would hand it over,
// and verified there.
func demoFleet(ctx context.Context, env *demoEnv) (string, error) {
	w, err := experiment.OpenWorld(env.world)
	if err != nil {
		return "", err
	}
	// The plan only needs the record's pins; Collect verifies the world
	// (chain, package, replay) where it lands.
	rec, err := w.ReadRecord()
	if err != nil {
		return "", err
	}
	if len(rec.Candidates()) != 1 {
		return "", errors.New("fleet: the demo's run has no single frozen candidate")
	}
	// The Job's results directory is named by the run: the world's own
	// directory name, so collect finds it beside the world.
	name := filepath.Base(env.world)
	run := &evidence.Object{}
	for _, m := range []evidence.Member{
		{Name: "name", Value: name}, {Name: "kind", Value: fleet.KindBlind},
		{Name: "srel", Value: rec.SpecReleaseID}, {Name: "bpkg", Value: rec.BlindPackageID},
		{Name: "candidate", Value: rec.Candidates()[0].Implementation},
		{Name: "image", Value: demoFleetImage},
		{Name: "command", Value: []any{"sh", "-c", "cleanroom room drive && cleanroom fleet bind"}},
		{Name: "runtime_class", Value: "runc"}, {Name: "allow", Value: []any{}},
		{Name: "limits", Value: map[string]any{"cpu": "1", "memory": "2Gi", "ephemeral_storage": "1Gi", "deadline_seconds": 3600}},
	} {
		run.Set(m.Name, m.Value)
	}
	list, err := evidence.Stringify([]any{run}, " ")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(env.out, "fleet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	runs, err := fleet.ParseRuns(list, "fleet/runs.json")
	if err != nil {
		return "", err
	}
	plan, err := fleet.WritePlan(runs, list, filepath.Join(dir, "plan"))
	if err != nil {
		return "", err
	}
	// What the Job's command ends with: the world names its plan entry.
	if _, err := fleet.Bind(env.world, fleet.KindBlind, name, runs[0].Digest, runs[0].PlanSHA256); err != nil {
		return "", err
	}
	col, err := fleet.Collect(ctx, runs, filepath.Dir(env.world), filepath.Join(dir, "results"),
		fleet.CollectOptions{Verify: experiment.VerifyOptions{}})
	if err != nil {
		return "", err
	}
	c := col.Runs[0]
	if c.Verdict != fleet.Verified {
		return "", fmt.Errorf("fleet collect: %s %s: %s", c.Name, c.Verdict, strings.Join(c.Problems, "; "))
	}
	return fmt.Sprintf("plan %s (Job + NetworkPolicy, runtime runc, no egress); collected %s: %s, %d files, %d checks passed",
		filepath.Join(plan.Dir, plan.Runs[0].File), c.Dir, c.Status, c.Files, len(c.Passed)), nil
}
