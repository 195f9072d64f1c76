package experiment

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sync"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// The measurements log is part of the state root, so its format and its
// reader live here with the rest of the state root's; adapter, which takes
// the measurements, writes it (adapter.MeasureRun), and Verify re-digests
// what it archived (VerifyOptions.Evidence) without importing the package
// that runs the sandbox.

// Entry types of the measurements log. A v1 entry (written before
// measurements archived their evidence) records digests and counts only;
// a v2 entry also links, per subject, the archived observation document
// and its scored results, and lists the findings the measurement saw.
const (
	TypeMeasurementV1 = "CLEANROOM-MEASUREMENT-v1"
	TypeMeasurement   = "CLEANROOM-MEASUREMENT-v2"
)

// TypeScored is the archived per-predicate results of one observation
// document (adapter writes it: its scoredDocument).
const TypeScored = "CLEANROOM-SCORED-v1"

// MeasurementsDirName is the measurements log's directory in the state root.
const MeasurementsDirName = "measurements"

// Link is an archived file named from a log entry: its state-root-relative
// path (evidence/<sha256>.json) and the SHA-256 of its bytes.
type Link struct {
	File   string
	SHA256 string
}

// Logged is one entry of the measurements log, read.
type Logged struct {
	File     string // the entry's file name in governance/measurements/
	Type     string // TypeMeasurement or TypeMeasurementV1
	RunID    string
	Status   string
	SelfTest bool
	Subjects []LoggedSubject
	// Interop is the entry's interop block (nil when not compared).
	Interop *evidence.Object
	// Findings are the ids of the findings the measurement saw (v2).
	Findings []string
	Value    *evidence.Object
}

// LoggedSubject is one subject of a logged measurement.
type LoggedSubject struct {
	Implementation, Role, State, Runner, Rule, Reason string
	Sandboxed                                         bool
	ObservationSHA256                                 string
	// Predicates is the logged totals block (nil when nothing was scored).
	Predicates *evidence.Object
	// Observation and Scored link the archived files (v2; nil if none).
	Observation, Scored *Link
}

// ReadMeasurements reads the measurements log of w (its chain checked by
// holdout.Log) and returns the entries taken under any of runIDs (every
// entry when runIDs is nil), oldest first.
func ReadMeasurements(w *World, runIDs []string) ([]Logged, error) {
	es, err := holdout.Log{Dir: filepath.Join(w.StateDir(), MeasurementsDirName)}.Read()
	if err != nil {
		return nil, err
	}
	var out []Logged
	for _, e := range es {
		if runIDs != nil && !slices.Contains(runIDs, e.Str("run_id")) {
			continue
		}
		l := Logged{File: e.File, Type: e.Type(), RunID: e.Str("run_id"), Status: e.Str("status"), Value: e.Value}
		l.SelfTest, _ = get(e.Value, "self_test").(bool)
		l.Interop, _ = get(e.Value, "interop").(*evidence.Object)
		if fs, ok := get(e.Value, "findings").([]any); ok {
			for _, f := range fs {
				if s, ok := f.(string); ok {
					l.Findings = append(l.Findings, s)
				}
			}
		}
		subs, _ := get(e.Value, "subjects").([]any)
		for _, x := range subs {
			o, _ := x.(*evidence.Object)
			s := LoggedSubject{Implementation: getStr(o, "implementation"), Role: getStr(o, "role"), State: getStr(o, "state"),
				Runner: getStr(o, "runner"), Rule: getStr(o, "rule"), Reason: getStr(o, "reason"), ObservationSHA256: getStr(o, "observation_sha256")}
			s.Sandboxed, _ = get(o, "sandboxed").(bool)
			s.Predicates, _ = get(o, "predicates").(*evidence.Object)
			s.Observation, s.Scored = linkOf(get(o, "observation")), linkOf(get(o, "scored"))
			l.Subjects = append(l.Subjects, s)
		}
		out = append(out, l)
	}
	return out, nil
}

func get(o *evidence.Object, name string) any {
	if o == nil {
		return nil
	}
	v, _ := o.Get(name)
	return v
}

func getStr(o *evidence.Object, name string) string { s, _ := get(o, name).(string); return s }

func linkOf(v any) *Link {
	o, ok := v.(*evidence.Object)
	if !ok {
		return nil
	}
	return &Link{File: getStr(o, "file"), SHA256: getStr(o, "sha256")}
}

// archiveName is the only name an archived file may have: the evidence
// directory and the file's own SHA-256.
var archiveName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^` + EvidenceDirName + `/[0-9a-f]{64}\.json$`)
})

// ReadArchived reads the file a log entry links and re-digests it. A link
// naming anything but evidence/<sha256>.json is refused before anything is
// opened (a log entry cannot steer a read elsewhere), and the file is read
// beneath the state root without following a link (experiment's
// ReadStateFile). Every error names ErrMeasurementEvidence.
func ReadArchived(w *World, l *Link) ([]byte, error) {
	file := path.Join(StateDirName, l.File)
	if !archiveName().MatchString(l.File) || path.Base(l.File) != l.SHA256+".json" {
		return nil, &RunProblem{Rule: ErrMeasurementEvidence, File: file,
			Detail: fmt.Sprintf("linked as %q with sha256 %s, not evidence/<its sha256>.json", l.File, l.SHA256)}
	}
	b, err := w.ReadStateFile(l.File)
	if err != nil {
		return nil, &RunProblem{Rule: ErrMeasurementEvidence, File: file, Detail: "the archived file cannot be read", Err: err}
	}
	if got := pkgwalk.SHA256Hex(b); got != l.SHA256 {
		return nil, &RunProblem{Rule: ErrMeasurementEvidence, File: file,
			Detail: fmt.Sprintf("digests %s and the measurements log records %s", got, l.SHA256)}
	}
	return b, nil
}

// verifyEvidence is the check VerifyOptions.Evidence asks for: for every measurement taken under runIDs, every linked observation
// document and scored result re-digests to the sha256 the log records, and
// each scored result names the run, the subject and the observation that
// link it. A log that does not read (an entry edited, removed or inserted)
// is a problem too.
func verifyEvidence(ctx context.Context, w *World, runIDs []string) []*RunProblem {
	logDir := path.Join(StateDirName, MeasurementsDirName)
	ms, err := ReadMeasurements(w, runIDs)
	if err != nil {
		return []*RunProblem{{Rule: ErrMeasurementEvidence, File: logDir, Err: err}}
	}
	var ps []*RunProblem
	bad := func(file, format string, a ...any) {
		ps = append(ps, &RunProblem{Rule: ErrMeasurementEvidence, File: file, Detail: fmt.Sprintf(format, a...)})
	}
	for _, m := range ms {
		if ctx.Err() != nil {
			return append(ps, &RunProblem{Rule: ErrMeasurementEvidence, File: logDir, Err: ctx.Err()})
		}
		entry := path.Join(logDir, m.File)
		switch m.Type {
		case TypeMeasurementV1:
			continue // written before measurements archived anything
		case TypeMeasurement:
		default:
			bad(entry, "entry type %q is not a measurement", m.Type)
			continue
		}
		for _, s := range m.Subjects {
			if s.ObservationSHA256 != "" && (s.Observation == nil || s.Observation.SHA256 != s.ObservationSHA256) {
				bad(entry, "%s: the observation digested %s is not linked to its archive", s.Implementation, s.ObservationSHA256)
				continue
			}
			if s.Observation == nil {
				continue
			}
			if _, err := ReadArchived(w, s.Observation); err != nil {
				ps = append(ps, asProblem(err))
			}
			if s.Scored == nil {
				bad(entry, "%s: the observation is archived without its scored results", s.Implementation)
				continue
			}
			b, err := ReadArchived(w, s.Scored)
			if err != nil {
				ps = append(ps, asProblem(err))
				continue
			}
			file := path.Join(StateDirName, s.Scored.File)
			o, err := evidence.ReadObject(b)
			if err != nil {
				ps = append(ps, &RunProblem{Rule: ErrMeasurementEvidence, File: file, Err: err})
				continue
			}
			// The scored results belong to the measurement that links them:
			// a digest-true file of another run or subject is not evidence
			// of this one.
			for _, c := range [][3]string{
				{"type", getStr(o, "type"), TypeScored},
				{"run_id", getStr(o, "run_id"), m.RunID},
				{"implementation", getStr(o, "implementation"), s.Implementation},
				{"observation_sha256", getStr(o, "observation_sha256"), s.Observation.SHA256},
			} {
				if c[1] != c[2] {
					bad(file, "%s is %q and the measurement %s links it for %q", c[0], c[1], m.File, c[2])
				}
			}
		}
	}
	return ps
}

func asProblem(err error) *RunProblem {
	if p, ok := err.(*RunProblem); ok {
		return p
	}
	return &RunProblem{Rule: ErrMeasurementEvidence, Err: err}
}
