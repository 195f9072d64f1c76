package main

import (
	"context"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/amber"
)

// demoAmberStage is the demo's AMBER stage: a small case built, verified,
// indexed and summarised in env.out/amber, and, where the sandbox runs, a
// scripted candidate run whose signed record is verified by value.
func demoAmberStage(ctx context.Context, env *demoEnv) (string, error) {
	var iso amber.Isolation
	if si := (&amber.SandboxIsolation{}); si.Available() == nil {
		iso = si
	}
	res, err := amber.Demo(ctx, filepath.Join(env.out, "amber"), iso)
	if err != nil {
		return "", err
	}
	return res.String(), nil
}
