package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"sigs.k8s.io/yaml"
)

// RunsFileName is the copy of the run list kept in a plan directory, so
// `fleet collect --runs` can name the exact list the manifests came from.
const RunsFileName = "runs.json"

// ManifestDir is the plan's subdirectory holding only the manifests, so
// `kubectl apply -f PLAN/k8s/` applies every file it finds (kubectl reads
// every .json and .yaml of a directory, and runs.json is no manifest).
const ManifestDir = "k8s"

// Planned is one run's manifest file in a plan.
type Planned struct {
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	File         string `json:"file"` // relative to the plan directory (k8s/<name>.yaml)
	RuntimeClass string `json:"runtime_class"`
	Allow        int    `json:"allow"` // allowlist entries (egress rules)
	RunSHA256    string `json:"run_sha256"`
}

// Plan is what WritePlan wrote.
type Plan struct {
	Dir        string    `json:"dir"`
	PlanSHA256 string    `json:"plan_sha256"` // the run list's bytes: every run's plan entry names it
	Runs       []Planned `json:"runs"`
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
// k8s/<name>.yaml per run and runs.json (the run list's bytes as given). The
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
	plan := &Plan{Dir: dir, PlanSHA256: pkgwalk.SHA256Hex(runList)}
	write := func(name string, b []byte) error {
		return durable.Create(tmp, name, b, 0o644)
	}
	k8s := filepath.Join(tmp, ManifestDir)
	if err := os.Mkdir(k8s, 0o755); err != nil {
		return nil, fmt.Errorf("plan dir: %w", err)
	}
	for _, r := range runs {
		b, err := Manifest(r)
		if err != nil {
			return nil, err
		}
		// The plan entry the Job's bind writes must name this list.
		if r.PlanSHA256 != plan.PlanSHA256 {
			return nil, fmt.Errorf("run %s: planned from another run list (plan %s, this list %s)", r.Name, r.PlanSHA256, plan.PlanSHA256)
		}
		name := r.Name + ".yaml"
		if err := durable.Create(k8s, name, b, 0o644); err != nil {
			return nil, err
		}
		name = ManifestDir + "/" + name
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
