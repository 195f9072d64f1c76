package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"sigs.k8s.io/yaml"
)

// RunsFileName is the copy of the run list kept in a plan directory, so
// `fleet collect --runs` can name the exact list the manifests came from.
const RunsFileName = "runs.json"

// Planned is one run's manifest file in a plan.
type Planned struct {
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	File         string `json:"file"` // relative to the plan directory
	RuntimeClass string `json:"runtime_class"`
	Allow        int    `json:"allow"` // allowlist entries (egress rules)
	RunSHA256    string `json:"run_sha256"`
}

// Plan is what WritePlan wrote.
type Plan struct {
	Dir  string    `json:"dir"`
	Runs []Planned `json:"runs"`
}

// Manifest renders one run as a YAML stream: its NetworkPolicy, then its
// Job (applied in this order, the policy exists before the pod is
// created).
func Manifest(r Run) ([]byte, error) {
	np, err := yaml.Marshal(NetworkPolicy(r))
	if err != nil {
		return nil, fmt.Errorf("run %s: NetworkPolicy: %w", r.Name, err)
	}
	job, err := yaml.Marshal(Job(r))
	if err != nil {
		return nil, fmt.Errorf("run %s: Job: %w", r.Name, err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# cleanroom fleet plan: run %s (%s), run_sha256 %s\n", r.Name, r.Kind, r.Digest)
	b.WriteString("---\n")
	b.Write(np)
	b.WriteString("---\n")
	b.Write(job)
	return b.Bytes(), nil
}

// WritePlan renders every run into dir, which must not exist: one
// <name>.yaml per run and runs.json (the run list's bytes as given). The
// directory appears whole or not at all: it is written as a temporary
// sibling, every file fsync'd, and renamed into place without replacing
// anything.
func WritePlan(runs []Run, runList []byte, dir string) (*Plan, error) {
	dir = filepath.Clean(dir)
	// Create-exclusive: an existing plan is never overwritten or merged into.
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("plan dir %s: %w", dir, os.ErrExist)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("plan dir %s: %w", dir, err)
	}
	tmp, err := durable.StageDir(dir)
	if err != nil {
		return nil, fmt.Errorf("plan dir: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	plan := &Plan{Dir: dir}
	write := func(name string, b []byte) error {
		return durable.Create(tmp, name, b, 0o644)
	}
	for _, r := range runs {
		b, err := Manifest(r)
		if err != nil {
			return nil, err
		}
		name := r.Name + ".yaml"
		if err := write(name, b); err != nil {
			return nil, err
		}
		plan.Runs = append(plan.Runs, Planned{Name: r.Name, Kind: r.Kind, File: name,
			RuntimeClass: r.RuntimeClass, Allow: len(r.Allow), RunSHA256: r.Digest})
	}
	if err := write(RunsFileName, runList); err != nil {
		return nil, err
	}
	// RENAME_NOREPLACE: if dir appeared meanwhile, it is not replaced.
	if err := durable.CreateDir(tmp, dir, 0o755); err != nil {
		return nil, fmt.Errorf("plan dir %s: %w", dir, err)
	}
	done = true
	return plan, nil
}
