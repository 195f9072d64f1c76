package experiment

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom/internal/ident"
	"golang.org/x/sys/unix"
)

// Every run of a world is addressable (`--run brun-…`), not only the one the
// record governance/blind-run.json names. The receipts already witness every
// transition of every run; what they do not carry is the whole record (a
// receipt names each subject's digests, not its command, package files or
// binary path), so each transition also archives the record it writes at
// governance/receipts/<run_id>/blind-run.json. That file needs no new trust:
// run_id hashes every member of the record (TRVM-FORMATS §5.2), so an
// archived record is accepted only when its content recomputes the run_id
// its directory is named by.
//
// run_id is content-derived and the record's shape is closed, so a pin of
// content identical to an earlier pin IS that earlier PINNED state: same
// run_id, same receipt bytes (shared, never rewritten). The format has no
// member in which a nonce or a time could make it another identity, and one
// added would break the reference reader. Two runs that share a prefix of
// states are told apart by where their histories end: a run is named by the
// run_id of its latest state, which `run list` prints.

// ArchivedRecordFile is the receipts-relative path of the record a
// transition wrote at runID.
func ArchivedRecordFile(runID string) string { return path.Join(runID, RecordFileName) }

// RunState is one witnessed state of a run's history.
type RunState struct {
	Status  Status    `json:"status"`
	RunID   string    `json:"run_id"`
	Time    time.Time `json:"time"`    // the receipt file's modification time
	Receipt string    `json:"receipt"` // world-relative
	Note    string    `json:"note"`
	// Shared: this receipt is on the history of more than one run (a later
	// pin, freeze, … of identical content reached the same state).
	Shared bool `json:"shared,omitempty"`
}

// RunSummary is one run of a world: its history from PINNED to the state it
// reached, oldest first.
type RunSummary struct {
	// RunID is the run_id of the run's latest state: the name --run takes.
	RunID  string     `json:"run_id"`
	Status Status     `json:"status"`
	States []RunState `json:"states"`
	// Current: governance/blind-run.json is this run's record.
	Current bool `json:"current"`
	// Outcome says in words how the run ended or where it stands.
	Outcome string `json:"outcome"`
	// RecordArchived: the run's whole record can be read (the current
	// record, or the archived one), so it can be verified and reported.
	RecordArchived bool `json:"record_archived"`
	// Problems name what could not be read along the history.
	Problems []string `json:"problems,omitempty"`
}

// Contains reports whether the run's history passes through runID.
func (s *RunSummary) Contains(runID string) bool {
	return slices.ContainsFunc(s.States, func(st RunState) bool { return st.RunID == runID })
}

// RunIDs lists the run_ids of the run's history, oldest first.
func (s *RunSummary) RunIDs() []string {
	var out []string
	for _, st := range s.States {
		out = append(out, st.RunID)
	}
	return out
}

type receiptNode struct {
	rc   *Receipt
	file string // state-root-relative
	mod  time.Time
}

func nodeKey(id string, s Status) string { return id + "|" + string(s) }

// Runs lists every run whose receipts are in the state root, and the
// current record's run: a run is a history that no other receipt continues
// (or the current record's), walked back to PINNED. Sorted by when each
// run's latest state was written, the current run last. Receipts that do
// not cross the strict reader are named in the problems of the runs that
// need them, never silently skipped.
func (w *World) Runs() ([]RunSummary, error) {
	if p := w.stateRootProblem(); p != nil {
		return nil, p
	}
	nodes := map[string]*receiptNode{}
	bad := map[string]string{}
	d, err := openBeneath(w.StateDir(), ReceiptsDirName, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, &RunProblem{Rule: errReceiptBytes, File: w.stateRel(ReceiptsDirName), Err: err}
	default:
		names, rerr := d.Readdirnames(-1)
		d.Close()
		if rerr != nil {
			return nil, &RunProblem{Rule: errReceiptBytes, File: w.stateRel(ReceiptsDirName), Err: rerr}
		}
		slices.Sort(names)
		for _, name := range names {
			m := receiptNameRE().FindStringSubmatch(name)
			if m == nil || !Status(m[2]).Valid() {
				continue // a RESULT, a run's archive directory, a signature
			}
			rel := path.Join(ReceiptsDirName, name)
			b, mod, err := w.readStateFile(rel)
			if err != nil {
				bad[nodeKey(m[1], Status(m[2]))] = (&RunProblem{Rule: errReceiptBytes, File: w.stateRel(rel), Err: err}).Error()
				continue
			}
			rc, ps := parseReceipt(b, w.stateRel(rel))
			if len(ps) > 0 || rc.RunID != m[1] || string(rc.Status) != m[2] {
				msg := fmt.Sprintf("%s: not the receipt its name says", w.stateRel(rel))
				if len(ps) > 0 {
					msg = ps[0].Error()
				}
				bad[nodeKey(m[1], Status(m[2]))] = msg
				continue
			}
			nodes[nodeKey(m[1], Status(m[2]))] = &receiptNode{rc: rc, file: rel, mod: mod}
		}
	}
	continued := map[string]bool{}
	for _, n := range nodes {
		if n.rc.PreviousRunID != nil && n.rc.PreviousStatus != nil {
			continued[nodeKey(*n.rc.PreviousRunID, Status(*n.rc.PreviousStatus))] = true
		}
	}
	var tips []string
	for k := range nodes {
		if !continued[k] {
			tips = append(tips, k)
		}
	}
	slices.Sort(tips)
	cur, curErr := w.ReadRecord()
	curKey := ""
	if curErr == nil {
		curKey = nodeKey(cur.RunID, cur.Status)
		if !slices.Contains(tips, curKey) {
			tips = append(tips, curKey)
		}
	}

	var runs []RunSummary
	for _, tip := range tips {
		id, st, _ := strings.Cut(tip, "|")
		s := RunSummary{RunID: id, Status: Status(st), Current: tip == curKey}
		seen := map[string]bool{}
		for k := tip; k != ""; {
			if seen[k] || len(seen) >= maxChain {
				s.Problems = append(s.Problems, "the history revisits a state or exceeds "+fmt.Sprint(maxChain)+" transitions")
				break
			}
			seen[k] = true
			n, ok := nodes[k]
			if !ok {
				kid, kst, _ := strings.Cut(k, "|")
				if msg, isBad := bad[k]; isBad {
					s.Problems = append(s.Problems, msg)
				} else {
					s.Problems = append(s.Problems, fmt.Sprintf("no receipt %s: the history is broken there", w.stateRel(path.Join(ReceiptsDirName, ReceiptFile(kid, Status(kst))))))
				}
				break
			}
			s.States = append(s.States, RunState{Status: n.rc.Status, RunID: n.rc.RunID, Time: n.mod, Receipt: w.stateRel(n.file), Note: n.rc.Note})
			k = ""
			if n.rc.PreviousRunID != nil && n.rc.PreviousStatus != nil {
				k = nodeKey(*n.rc.PreviousRunID, Status(*n.rc.PreviousStatus))
			}
		}
		slices.Reverse(s.States)
		runs = append(runs, s)
	}
	uses := map[string]int{}
	for _, r := range runs {
		for _, st := range r.States {
			uses[st.RunID]++
		}
	}
	for i := range runs {
		r := &runs[i]
		for j := range r.States {
			r.States[j].Shared = uses[r.States[j].RunID] > 1
		}
		r.RecordArchived = r.Current || w.hasArchivedRecord(r.RunID)
		r.Outcome = w.outcome(r)
	}
	last := func(r RunSummary) time.Time {
		if len(r.States) == 0 {
			return time.Time{}
		}
		return r.States[len(r.States)-1].Time
	}
	slices.SortStableFunc(runs, func(a, b RunSummary) int {
		if a.Current != b.Current {
			if a.Current {
				return 1
			}
			return -1
		}
		if c := last(a).Compare(last(b)); c != 0 {
			return c
		}
		return strings.Compare(a.RunID, b.RunID)
	})
	return runs, nil
}

func (w *World) hasArchivedRecord(runID string) bool {
	f, err := openBeneath(w.ReceiptsDir(), ArchivedRecordFile(runID), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// outcome says how a run ended, or where it stands, in words.
func (w *World) outcome(r *RunSummary) string {
	var note string
	if n := len(r.States); n > 0 {
		note = r.States[n-1].Note
	}
	switch {
	case r.Status == StatusComplete:
		b, _, err := w.readStateFile(path.Join(ReceiptsDirName, ResultFile(r.RunID)))
		if err != nil {
			return "COMPLETE (RESULT unreadable: run verify --run " + r.RunID + " says why)"
		}
		res, err := ParseResult(b, ResultFile(r.RunID))
		if err != nil {
			return "COMPLETE (RESULT refused: run verify --run " + r.RunID + " says why)"
		}
		var parts []string
		for _, s := range res.Subjects {
			parts = append(parts, fmt.Sprintf("%s %d/%d satisfied", s.Implementation, s.Predicates.Satisfied, s.Predicates.Total))
		}
		return "COMPLETE: " + strings.Join(parts, ", ")
	case r.Status == StatusAborted:
		return "ABORTED (" + note + ")"
	case r.Current:
		return "in progress at " + string(r.Status)
	default:
		// A non-terminal state no record names and no receipt continues:
		// a transition interrupted after its receipt, or a run superseded
		// before pins refused runs in flight.
		return "stopped at " + string(r.Status) + " (no record names it and nothing continues it)"
	}
}

// SelectedRun is the run a reading command looks at: its record bytes and
// where they were read.
type SelectedRun struct {
	Record  *Record
	Bytes   []byte
	File    string // world-relative
	Current bool
	// Summary is the run as Runs lists it (nil for the current run of a
	// world whose receipts could not be listed).
	Summary *RunSummary
}

// VerifyOptions returns opt set to verify this run's record.
func (s *SelectedRun) VerifyOptions(opt VerifyOptions) VerifyOptions {
	opt.RecordBytes, opt.RecordFile = s.Bytes, s.File
	return opt
}

// SelectRun selects a run by the run_id of any of its states (empty: the
// current record). A run_id several runs' histories share, and which is the
// latest state of none of them, is ambiguous (errRunAmbiguous); one no
// receipt names is errRunUnknown; a run whose record was never archived
// (written before records were archived) is errRunNotArchived.
func (w *World) SelectRun(id string) (*SelectedRun, error) {
	if p := w.stateRootProblem(); p != nil {
		return nil, p
	}
	current := func() (*SelectedRun, error) {
		b, err := w.readRecordBytes()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &RunProblem{Rule: errNoRecord, File: w.stateRel(RecordFileName), Detail: "no run is pinned"}
		}
		if err != nil {
			return nil, &RunProblem{Rule: errRecordBytes, File: w.stateRel(RecordFileName), Err: err}
		}
		r, err := ParseRecord(b, w.stateRel(RecordFileName))
		if err != nil {
			return nil, err
		}
		return &SelectedRun{Record: r, Bytes: b, File: w.stateRel(RecordFileName), Current: true}, nil
	}
	if id == "" {
		return current()
	}
	if !ident.Is(ident.Brun, id) {
		return nil, problem(errRunUnknown, "", "%q is not a run_id (brun- and 64 lowercase hex digits; cleanroom run list shows them)", id)
	}
	runs, err := w.Runs()
	if err != nil {
		return nil, err
	}
	var pick *RunSummary
	var through []string
	for i := range runs {
		if runs[i].RunID == id {
			pick = &runs[i]
			break
		}
		if runs[i].Contains(id) {
			through = append(through, runs[i].RunID)
			if pick == nil {
				pick = &runs[i]
			}
		}
	}
	switch {
	case pick == nil:
		return nil, problem(errRunUnknown, w.stateRel(ReceiptsDirName), "no receipt names %s (cleanroom run list shows the runs of this world)", id)
	case pick.RunID != id && len(through) > 1:
		return nil, problem(errRunAmbiguous, w.stateRel(ReceiptsDirName), "%s is a state on the histories of %d runs (%s): name one by its latest state", id, len(through), strings.Join(through, ", "))
	case pick.Current:
		sel, err := current()
		if err != nil {
			return nil, err
		}
		sel.Summary = pick
		return sel, nil
	}
	rel := path.Join(ReceiptsDirName, ArchivedRecordFile(pick.RunID))
	b, _, err := w.readStateFile(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, problem(errRunNotArchived, w.stateRel(rel), "run %s (%s) has receipts but its record was not archived (the run was made before records were archived); cleanroom run list shows its history", pick.RunID, pick.Status)
	}
	if err != nil {
		return nil, &RunProblem{Rule: errRecordBytes, File: w.stateRel(rel), Err: err}
	}
	r, err := ParseRecord(b, w.stateRel(rel))
	if err != nil {
		return nil, err
	}
	// The archived record is believed only as the content its name hashes.
	if got := r.ComputeRunID(); got != pick.RunID || r.RunID != pick.RunID || r.Status != pick.Status {
		return nil, problem(errRunID, w.stateRel(rel), "archived as %s (%s) and its content implies %s (%s)", pick.RunID, pick.Status, got, r.Status)
	}
	return &SelectedRun{Record: r, Bytes: b, File: w.stateRel(rel), Summary: pick}, nil
}

// earlierRuns lists the runs whose histories already pass through the
// state (runID, status) a transition is about to write, excluding a run
// that ends exactly there (a retried transition, or an identical one).
func (w *World) earlierRuns(runID string, status Status) []EarlierRun {
	runs, err := w.Runs()
	if err != nil {
		return nil
	}
	var out []EarlierRun
	for _, r := range runs {
		if r.RunID == runID {
			continue
		}
		for _, st := range r.States {
			if st.RunID == runID && st.Status == status {
				out = append(out, EarlierRun{RunID: r.RunID, Status: r.Status, Outcome: r.Outcome})
			}
		}
	}
	return out
}

// EarlierRun is an earlier run that passed through the state a transition
// reached again.
type EarlierRun struct {
	RunID   string `json:"run_id"`
	Status  Status `json:"status"`
	Outcome string `json:"outcome"`
}
