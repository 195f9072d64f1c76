package holdout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// Classes are the reference protocol's six classes a person may give a
// finding or a question (the blind implementation contract §7). There is no
// seventh and no default. A world may declare its own
// (experiment.Declaration.FindingClasses; experiment.World.FindingsRegister).
var Classes = []string{
	"SPEC_GAP",
	"SPEC_IMPLEMENTATION_CONFLICT",
	"JS_CHECKER_DEFECT",
	"GO_PRODUCER_DEFECT",
	"VECTOR_ORACLE_DEFECT",
	"JCS_DEPENDENCY_DIVERGENCE",
}

// Entry types of the two logs.
const (
	TypeFinding        = "CLEANROOM-FINDING-v1"
	TypeClassification = "CLEANROOM-FINDING-CLASSIFICATION-v1"
	TypeQuestion       = "CLEANROOM-QUESTION-v1"
)

// State-root directories of the two logs.
const (
	FindingsDirName  = "findings"
	QuestionsDirName = "questions"
)

// Rules of the logs.
var (
	// errLog: an entry is unreadable, out of sequence, of an unknown type
	// or not linked to the entry before it — the log was edited.
	errLog = fault.New(fault.Refused, "log chain broken")
	// errClass: not one of the world's finding classes (the reference
	// protocol's six, or the world's declared ones).
	errClass = fault.New(fault.Unusable, "not one of the world's finding classes")
	// errUnknownFinding: no opened finding has this id.
	errUnknownFinding = fault.New(fault.Unusable, "no such finding")
	// errAlreadyClassified: a classification is immutable; a finding is
	// classified once.
	errAlreadyClassified = fault.New(fault.Refused, "finding already classified")
	// errEntry: a required field of an entry to append is missing or
	// malformed: the arguments that make it cannot be used (an entry
	// read back that breaks the chain is errLog).
	errEntry = fault.New(fault.Unusable, "log entry incomplete")
)

// Log is an append-only log of immutable entries in one directory:
// 000001.json, 000002.json, … Each entry is JSON.stringify(entry, null, 1)
// + "\n" and carries its sequence number and the SHA-256 of the previous
// entry's bytes (null for the first), so changing, removing or inserting any
// entry breaks every link after it.
type Log struct {
	Dir string
}

// LogEntry is one read entry.
type LogEntry struct {
	File   string
	SHA256 string
	Value  *evidence.Object
}

// Type returns the entry's type member.
func (e LogEntry) Type() string { s, _ := resolve(e.Value, "type").(string); return s }

// Str returns a string member of the entry ("" if absent).
func (e LogEntry) Str(name string) string { s, _ := resolve(e.Value, name).(string); return s }

const seqWidth = 6

// Read returns every entry in order after checking the chain.
func (l Log) Read() ([]LogEntry, error) {
	root, err := os.OpenRoot(l.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	des, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", l.Dir, err)
	}
	var out []LogEntry
	prev := any(nil)
	for _, de := range des {
		name := de.Name()
		// A temporary file of an interrupted append (durable's prefix) is
		// never an entry; it is not counted either.
		if strings.HasPrefix(name, durable.TempPrefix) {
			continue
		}
		i := len(out)
		want := fmt.Sprintf("%0*d.json", seqWidth, i+1)
		if name != want || !de.Type().IsRegular() {
			return nil, fmt.Errorf("%s: %s where %s was expected: %w", l.Dir, name, want, errLog)
		}
		// Read through the descriptor of the directory listed, not a path:
		// an entry swapped for a symlink or FIFO after the listing is
		// refused, not followed.
		b, err := readRegular(root, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", l.Dir, errLog, err)
		}
		o, err := evidence.ReadObject(b)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w: %w", l.Dir, name, errLog, err)
		}
		seq, _ := resolve(o, "seq").(float64)
		p, _ := o.Get("previous_sha256")
		if int(seq) != i+1 || !sameValue(p, prev) {
			return nil, fmt.Errorf("%s/%s: sequence or previous_sha256 does not link to the entry before: %w", l.Dir, name, errLog)
		}
		sum := pkgwalk.SHA256Hex(b)
		out = append(out, LogEntry{File: name, SHA256: sum, Value: o})
		prev = sum
	}
	return out, nil
}

func sameValue(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	as, ok1 := a.(string)
	bs, ok2 := b.(string)
	return ok1 && ok2 && as == bs
}

// Append writes the next entry: typ and the members of body follow seq and
// previous_sha256. The entry is published with durable.Create, which never
// replaces a name: of two concurrent appenders only one wins the sequence
// number, the other gets errLog.
func (l Log) Append(typ string, body []evidence.Member) (LogEntry, error) {
	entries, err := l.Read()
	if err != nil {
		return LogEntry{}, err
	}
	var prev any
	if len(entries) > 0 {
		prev = entries[len(entries)-1].SHA256
	}
	seq := len(entries) + 1
	members := append([]evidence.Member{
		{Name: "type", Value: typ},
		{Name: "seq", Value: seq},
		{Name: "previous_sha256", Value: prev},
	}, body...)
	o := evidence.NewObject(members...)
	b, err := evidence.Stringify(o, " ")
	if err != nil {
		return LogEntry{}, err
	}
	// durable.MkdirAll fsyncs the parent of each directory it creates: an
	// entry published in a new log directory survives a crash with it.
	if err := durable.MkdirAll(l.Dir); err != nil {
		return LogEntry{}, err
	}
	name := fmt.Sprintf("%0*d.json", seqWidth, seq)
	if err := writeExclusive(l.Dir, name, b); err != nil {
		return LogEntry{}, err
	}
	ro, _ := evidence.ReadObject(b)
	return LogEntry{File: name, SHA256: pkgwalk.SHA256Hex(b), Value: ro}, nil
}

// writeExclusive publishes b as dir/name without ever replacing a file
// (durable.Create).
func writeExclusive(dir, name string, b []byte) error {
	if err := durable.Create(dir, name, b, 0o644); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s/%s exists (another append won the race): %w", dir, name, errLog)
		}
		return err
	}
	return nil
}

// FindingRecord is one finding of the register with its classification.
type FindingRecord struct {
	ID, RunID, SpecReleaseID string
	A, B                     string // implementation labels
	Path                     string
	AValue, BValue           string // quoted values (first 40 code units), or ABSENT
	OpenedIn                 string // entry file
	Class, Ruling            string // "" while unclassified
	ClassifiedIn             string
	// openedSHA is the SHA-256 of the entry that opened it, which its
	// classification names.
	openedSHA string
}

// Register is the findings register of a state root (governance/findings).
//
// It is cleanroom's own format (CLEANROOM-FINDING-v1 and
// CLEANROOM-FINDING-CLASSIFICATION-v1; the reference keeps no register),
// and each opening entry records in run_id the run_id of the record the
// measurement that opened it was taken under: the finding belongs to the
// run whose receipt chain holds that run_id. A finding's id does not name
// a run (the same disagreement found again has the same id, and one
// classification rules on it), so a later run that sees it again makes it
// that run's concern too; one it does not see stays the other run's
// (OutstandingIn, and the report lists it apart).
type Register struct {
	Log Log
	// Classes are the classes a finding may be given (nil: the reference
	// protocol's six, Classes).
	Classes []string
}

// classes is r.Classes, or the reference protocol's.
func (r Register) classes() []string { return classesOr(r.Classes) }

func classesOr(cs []string) []string {
	if cs == nil {
		return Classes
	}
	return cs
}

// OpenRegister returns the register under stateDir.
func OpenRegister(stateDir string) Register {
	return Register{Log: Log{Dir: filepath.Join(stateDir, FindingsDirName)}}
}

// Findings reads the register: every opened finding with its class (if any).
func (r Register) Findings() ([]*FindingRecord, error) {
	entries, err := r.Log.Read()
	if err != nil {
		return nil, err
	}
	var out []*FindingRecord
	byID := map[string]*FindingRecord{}
	for _, e := range entries {
		switch e.Type() {
		case TypeFinding:
			f := &FindingRecord{ID: e.Str("finding_id"), RunID: e.Str("run_id"), SpecReleaseID: e.Str("spec_release_id"),
				A: e.Str("a"), B: e.Str("b"), Path: e.Str("path"), AValue: e.Str("a_value"), BValue: e.Str("b_value"), OpenedIn: e.File, openedSHA: e.SHA256}
			if f.ID == "" || byID[f.ID] != nil {
				return nil, fmt.Errorf("%s: finding id empty or opened twice: %w", e.File, errLog)
			}
			byID[f.ID] = f
			out = append(out, f)
		case TypeClassification:
			f := byID[e.Str("finding_id")]
			if f == nil || e.Str("finding_sha256") != f.openedSHA {
				return nil, fmt.Errorf("%s: classifies a finding not opened before it: %w", e.File, errLog)
			}
			if f.Class != "" {
				return nil, fmt.Errorf("%s: %s classified twice: %w", e.File, f.ID, errLog)
			}
			if !slices.Contains(r.classes(), e.Str("class")) || e.Str("ruling") == "" {
				return nil, fmt.Errorf("%s: class %q / empty ruling: %w", e.File, e.Str("class"), errLog)
			}
			f.Class, f.Ruling, f.ClassifiedIn = e.Str("class"), e.Str("ruling"), e.File
		default:
			return nil, fmt.Errorf("%s: entry type %q: %w", e.File, e.Type(), errLog)
		}
	}
	return out, nil
}

// Open records findings not yet in the register (by id) and returns the
// register's records for all of them, in the given order.
func (r Register) Open(runID, srel string, pairs []PairFindings) ([]*FindingRecord, error) {
	known, err := r.Findings()
	if err != nil {
		return nil, err
	}
	byID := map[string]*FindingRecord{}
	for _, f := range known {
		byID[f.ID] = f
	}
	var out []*FindingRecord
	for _, p := range pairs {
		for _, f := range p.Findings {
			id := f.ID(srel, p.A, p.B)
			if rec := byID[id]; rec != nil {
				out = append(out, rec)
				continue
			}
			e, err := r.Log.Append(TypeFinding, []evidence.Member{
				{Name: "finding_id", Value: id}, {Name: "run_id", Value: runID}, {Name: "spec_release_id", Value: srel},
				{Name: "a", Value: p.A}, {Name: "b", Value: p.B}, {Name: "path", Value: f.Path},
				{Name: "a_value", Value: f.A}, {Name: "b_value", Value: f.B},
				{Name: "classification", Value: Unclassified},
			})
			if err != nil {
				return nil, err
			}
			rec := &FindingRecord{ID: id, RunID: runID, SpecReleaseID: srel, A: p.A, B: p.B, Path: f.Path, AValue: f.A, BValue: f.B, OpenedIn: e.File, openedSHA: e.SHA256}
			byID[id] = rec
			out = append(out, rec)
		}
	}
	return out, nil
}

// Classify records a person's classification of an opened finding. id may
// be the full id or a unique prefix of at least 12 characters.
func (r Register) Classify(id, class, ruling string) (*FindingRecord, error) {
	if !slices.Contains(r.classes(), class) {
		return nil, fmt.Errorf("class %q (one of %s): %w", class, strings.Join(r.classes(), ", "), errClass)
	}
	if strings.TrimSpace(ruling) == "" {
		return nil, fmt.Errorf("a classification needs a ruling: %w", errEntry)
	}
	fs, err := r.Findings()
	if err != nil {
		return nil, err
	}
	var match *FindingRecord
	for _, f := range fs {
		if f.ID == id || (len(id) >= 12 && strings.HasPrefix(f.ID, id)) {
			if match != nil {
				return nil, fmt.Errorf("%q names more than one finding: %w", id, errUnknownFinding)
			}
			match = f
		}
	}
	if match == nil {
		return nil, fmt.Errorf("%q: %w", id, errUnknownFinding)
	}
	if match.Class != "" {
		return nil, fmt.Errorf("%s is %s (%s): %w", match.ID, match.Class, match.ClassifiedIn, errAlreadyClassified)
	}
	e, err := r.Log.Append(TypeClassification, []evidence.Member{
		{Name: "finding_id", Value: match.ID}, {Name: "finding_sha256", Value: match.openedSHA},
		{Name: "class", Value: class}, {Name: "ruling", Value: ruling},
	})
	if err != nil {
		return nil, err
	}
	match.Class, match.Ruling, match.ClassifiedIn = class, ruling, e.File
	return match, nil
}

// Outstanding counts the findings of pairs that the register has not
// classified (a finding never opened counts too).
func (r Register) Outstanding(srel string, pairs []PairFindings) (int, error) {
	return r.OutstandingIn(nil, srel, pairs)
}

// OutstandingIn counts the unclassified findings of one run: those of
// pairs (what the measurement saw now; a finding never opened counts too)
// and those the register records as opened under any of runIDs (the
// run_ids of the run's receipt chain) — a disagreement an earlier
// measurement of the same run saw is not forgotten because this one did
// not see it again. Findings opened in other runs and not seen now are
// theirs, not this run's.
func (r Register) OutstandingIn(runIDs []string, srel string, pairs []PairFindings) (int, error) {
	fs, err := r.Findings()
	if err != nil {
		return 0, err
	}
	classified := map[string]bool{}
	counted := map[string]bool{}
	for _, f := range fs {
		if f.Class != "" {
			classified[f.ID] = true
		}
	}
	n := 0
	for _, p := range pairs {
		for _, f := range p.Findings {
			id := f.ID(srel, p.A, p.B)
			if !classified[id] && !counted[id] {
				counted[id] = true
				n++
			}
		}
	}
	for _, f := range fs {
		if f.Class == "" && !counted[f.ID] && slices.Contains(runIDs, f.RunID) {
			counted[f.ID] = true
			n++
		}
	}
	return n, nil
}

// Question is one entry of the questions log (the contract's fields).
type Question struct {
	FrozenSpecRevision  int
	Question            string // verbatim
	WhyInsufficient     string
	Ruling              string
	Classification      string
	SupersedingRevision *int
	// Classes are the world's finding classes (nil: the reference
	// protocol's six); Classification must be one of them.
	Classes []string
}

// AskQuestion appends a question to the questions log under stateDir.
func AskQuestion(stateDir string, q Question) (LogEntry, error) {
	if q.FrozenSpecRevision < 1 || q.Question == "" || q.WhyInsufficient == "" || q.Ruling == "" {
		return LogEntry{}, fmt.Errorf("frozen_spec_revision (≥ 1), question, why_insufficient and ruling are required: %w", errEntry)
	}
	if cs := classesOr(q.Classes); !slices.Contains(cs, q.Classification) {
		return LogEntry{}, fmt.Errorf("classification %q (one of %s): %w", q.Classification, strings.Join(cs, ", "), errClass)
	}
	var sup any
	if q.SupersedingRevision != nil {
		if *q.SupersedingRevision <= q.FrozenSpecRevision {
			return LogEntry{}, fmt.Errorf("superseding revision %d is not after %d: %w", *q.SupersedingRevision, q.FrozenSpecRevision, errEntry)
		}
		sup = *q.SupersedingRevision
	}
	return Log{Dir: filepath.Join(stateDir, QuestionsDirName)}.Append(TypeQuestion, []evidence.Member{
		{Name: "frozen_spec_revision", Value: q.FrozenSpecRevision},
		{Name: "question", Value: q.Question},
		{Name: "why_insufficient", Value: q.WhyInsufficient},
		{Name: "ruling", Value: q.Ruling},
		{Name: "classification", Value: q.Classification},
		{Name: "superseding_revision", Value: sup},
	})
}

// Questions reads the questions log under stateDir.
func Questions(stateDir string) ([]LogEntry, error) {
	es, err := Log{Dir: filepath.Join(stateDir, QuestionsDirName)}.Read()
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		if e.Type() != TypeQuestion {
			return nil, fmt.Errorf("%s: entry type %q: %w", e.File, e.Type(), errLog)
		}
	}
	return es, nil
}
