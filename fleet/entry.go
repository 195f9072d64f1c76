package fleet

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cleanroom-dev/cleanroom/amber"
	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/internal/ident"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"k8s.io/apimachinery/pkg/util/validation"
)

// EntryFileName is the plan-entry sidecar a planned run leaves beside its
// record (`cleanroom fleet bind` at the end of the Job's command): the run
// name, the run's digest and the plan's digest, and the digest of the
// record it belongs to.
const EntryFileName = "fleet-entry.json"

// errPlanEntry: a result does not name its own plan entry (no sidecar, a
// sidecar naming another run, run digest or plan, or one bound to another
// record). Two runs with the same srel, bpkg and candidate but another
// image or command differ only here. A rule of the plan (internal/fault:
// refused), also for bind's flags, which name the entry.
var errPlanEntry = fault.New(fault.Refused, "plan entry")

// maxEntrySize bounds the sidecar read: four short strings.
const maxEntrySize = 4096

// Entry is the plan-entry sidecar.
type Entry struct {
	Run          string `json:"run"`
	RunSHA256    string `json:"run_sha256"`
	PlanSHA256   string `json:"plan_sha256"`
	RecordSHA256 string `json:"record_sha256"`
}

var entryMembers = []string{"run", "run_sha256", "plan_sha256", "record_sha256"}

// recordPath is the record a result of kind holds: the blind run record
// of a world, or an AMBER run.json.
func recordPath(kind, dir string) (string, error) {
	switch kind {
	case KindBlind:
		w, err := experiment.OpenWorld(dir)
		if err != nil {
			return "", err
		}
		return w.RecordPath(), nil
	case KindAmber:
		return filepath.Join(dir, amber.RecordFile), nil
	}
	return "", fmt.Errorf("%w: %q", errKind, kind)
}

func recordDigest(kind, dir string) (string, error) {
	p, err := recordPath(kind, dir)
	if err != nil {
		return "", err
	}
	b, err := evidence.ReadRegularFile(p, evidence.MaxSize)
	if err != nil {
		return "", err
	}
	return pkgwalk.SHA256Hex(b), nil
}

// Bind writes the plan-entry sidecar into the result directory dir of a run
// of kind (what its Job leaves under /results), once its record is final:
// the record's digest is taken now, so the record and the sidecar travel
// together or are refused together. An existing sidecar is never replaced.
func Bind(dir, kind, run, runSHA256, planSHA256 string) (*Entry, error) {
	e := &Entry{Run: run, RunSHA256: runSHA256, PlanSHA256: planSHA256}
	if err := e.check(); err != nil {
		return nil, err
	}
	var err error
	if e.RecordSHA256, err = recordDigest(kind, dir); err != nil {
		return nil, fmt.Errorf("bind %s: %w", dir, err)
	}
	o := &evidence.Object{}
	o.Set("run", e.Run)
	o.Set("run_sha256", e.RunSHA256)
	o.Set("plan_sha256", e.PlanSHA256)
	o.Set("record_sha256", e.RecordSHA256)
	b, err := evidence.Stringify(o, "  ")
	if err != nil {
		return nil, err
	}
	if err := durable.Create(dir, EntryFileName, append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("bind %s: %w", dir, err)
	}
	return e, nil
}

// check refuses an entry whose fields are not a run name and digests.
func (e *Entry) check() error {
	if err := checkName(e.Run); err != nil {
		return fmt.Errorf("%w: run: %w", errPlanEntry, err)
	}
	for _, d := range []struct{ name, v string }{{"run_sha256", e.RunSHA256}, {"plan_sha256", e.PlanSHA256}} {
		if !ident.IsDigest(d.v) {
			return fmt.Errorf("%w: %s %q: want 64 lowercase hex digits", errPlanEntry, d.name, d.v)
		}
	}
	return nil
}

// readEntry reads dir's sidecar through the strict reader (closed shape).
func readEntry(dir string) (*Entry, error) {
	p := filepath.Join(dir, EntryFileName)
	b, err := evidence.ReadRegularFile(p, maxEntrySize)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errPlanEntry, err)
	}
	v, err := evidence.Read(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errPlanEntry, p, err)
	}
	o, ok := v.(*evidence.Object)
	if !ok || len(o.Names()) != len(entryMembers) {
		return nil, fmt.Errorf("%w: %s: want an object of %v", errPlanEntry, p, entryMembers)
	}
	var f [4]string
	for i, n := range entryMembers {
		x, _ := o.Get(n)
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("%w: %s: %s: want a string", errPlanEntry, p, n)
		}
		f[i] = s
	}
	return &Entry{Run: f[0], RunSHA256: f[1], PlanSHA256: f[2], RecordSHA256: f[3]}, nil
}

// checkEntry refuses a collected result (in dst) whose sidecar does not
// name the planned run r: its name, its digest (which covers the image and
// the command) and the plan's digest, bound to the record dst holds.
func checkEntry(r Run, dst string) error {
	e, err := readEntry(dst)
	if err != nil {
		return err
	}
	// Each comparison closes one swap: another run's result renamed to this
	// run (name, run digest), the same name in another plan (plan digest),
	// another record put beside this sidecar (record digest).
	switch {
	case e.Run != r.Name:
		return fmt.Errorf("%w: the result names run %q, planned %q", errPlanEntry, e.Run, r.Name)
	case e.RunSHA256 != r.Digest:
		return fmt.Errorf("%w: the result names run_sha256 %s, planned %s (another image, command or pin)", errPlanEntry, e.RunSHA256, r.Digest)
	case e.PlanSHA256 != r.PlanSHA256:
		return fmt.Errorf("%w: the result names plan %s, this run list is %s", errPlanEntry, e.PlanSHA256, r.PlanSHA256)
	}
	got, err := recordDigest(r.Kind, dst)
	if err != nil {
		return fmt.Errorf("%w: %w", errPlanEntry, err)
	}
	if got != e.RecordSHA256 {
		return fmt.Errorf("%w: the record's sha256 is %s, the entry was bound to %s", errPlanEntry, got, e.RecordSHA256)
	}
	return nil
}

// checkName is the run-name rule of a run list (a DNS-1123 label).
func checkName(name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fmt.Errorf("%w: %q: %s", errName, name, strings.Join(errs, "; "))
	}
	return nil
}
