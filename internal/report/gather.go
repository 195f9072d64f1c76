package report

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom/adapter"
	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/harness"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/textsafe"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// Outcomes of one predicate for one implementation.
const (
	Pass       = "pass"
	Fail       = "fail"
	Unresolved = "UNRESOLVED"
	Missing    = "missing"
	NotScored  = "not scored"
)

// Options selects what Gather reads besides the world.
type Options struct {
	// Transcript is a clean-room transcript (JSON Lines written by
	// "room serve --transcript"); "" means none is shown.
	Transcript string
	// Now is the time stamped on the report (default time.Now).
	Now func() time.Time
	// Run selects the run to report (World.SelectRun); nil reports the
	// current record's run.
	Run *experiment.SelectedRun
}

// Report is everything a run report shows, gathered from the world.
type Report struct {
	World     string    `json:"world"`
	Generated time.Time `json:"generated"`

	RunID             string `json:"run_id"`
	PreviousRunID     string `json:"previous_run_id"`
	Status            string `json:"status"`
	SpecReleaseID     string `json:"spec_release_id"`
	BlindPackageID    string `json:"blind_package_id"`
	InstrumentDigest  string `json:"instrument_digest"`
	HoldoutCommitment string `json:"holdout_commitment"`
	HoldoutEntries    int    `json:"holdout_entries"`

	Verified bool    `json:"verified"`
	Checks   []Check `json:"checks"`
	Timeline []Event `json:"timeline"`

	// Headline sums up a run that is not COMPLETE but was measured
	// ("ABORTED after measurement: candidate 19/20, failing H2#2 …"); ""
	// otherwise.
	Headline string `json:"headline"`

	Subjects []Subject `json:"subjects"`
	// Source says where the scored tables come from: the RESULT's archive
	// (a COMPLETE run) or the latest measurement's archive (a run measured
	// but not COMPLETE: a measurement, not a result); "" if nothing was
	// scored.
	Source     string         `json:"source"`
	Challenges []ChallengeRow `json:"challenges"`
	Predicates []PredicateRow `json:"predicates"`
	Interop    *InteropView   `json:"interop"`
	// Findings are this run's: opened under one of its run_ids or seen by
	// one of its measurements. OtherFindings were opened in other runs of
	// the world and not seen by this one; they are listed apart and block
	// nothing here.
	Findings      []Finding `json:"findings"`
	OtherFindings []Finding `json:"other_findings"`
	Room          *Room     `json:"room"`
	// Measurement is the latest entry of the measurements log taken under
	// one of this run's run_ids (a run not yet COMPLETE); nil if none.
	Measurement *Measurement `json:"measurement"`
	Questions   []Question   `json:"questions"`

	// Notes say what could not be read or shown, and why.
	Notes []string `json:"notes"`
}

// Check is one verification check.
type Check struct {
	Name     string   `json:"name"`
	Skipped  string   `json:"skipped"`
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
}

// Event is one receipt of the chain, oldest first.
type Event struct {
	Status   string    `json:"status"`
	RunID    string    `json:"run_id"`
	Receipt  string    `json:"receipt"`
	SHA256   string    `json:"sha256"`
	Note     string    `json:"note"`
	Time     time.Time `json:"time"`
	Admitted []string  `json:"admitted"`
}

// Subject is one frozen implementation and its score.
type Subject struct {
	Implementation     string                 `json:"implementation"`
	Role               string                 `json:"role"`
	PackageDigest      string                 `json:"package_digest"`
	BinaryDigest       string                 `json:"binary_digest"`
	Binary             string                 `json:"binary"`
	Toolchain          string                 `json:"toolchain"`
	Model              string                 `json:"model"`
	Tool               string                 `json:"tool"`
	Observation        string                 `json:"observation"` // receipts-relative archive file, "" if none
	ObservationSHA256  string                 `json:"observation_sha256"`
	Scored             bool                   `json:"scored"`
	Refused            string                 `json:"refused"` // the scorer's refusal of the document
	Total              int                    `json:"total"`
	Pass               int                    `json:"pass"`
	Fail               int                    `json:"fail"`
	Unr                int                    `json:"unresolved"`
	Missing            []string               `json:"missing"`
	Verdict            string                 `json:"verdict"`
	ResultPredicates   *experiment.Predicates `json:"result_predicates"` // as the RESULT records them
	resultsByChallenge map[string][]holdout.Result
	countsByChallenge  map[string]holdout.Counts // the scorer's own tally
	missingSet         map[string]bool
	rows               []holdout.Result // every predicate (holdout.Report.Rows)
}

// ChallengeRow is one challenge's tally per implementation (Subjects order).
type ChallengeRow struct {
	ID    string   `json:"id"`
	Cells []string `json:"cells"`
	Class []string `json:"class"` // outcome class of each cell (pass, fail, unresolved, missing)
}

// PredicateRow is one predicate's outcome per implementation, with what it
// expected and what each implementation's document holds.
type PredicateRow struct {
	Challenge string `json:"challenge"`
	Index     int    `json:"index"`
	Op        string `json:"op"`
	Path      string `json:"path"`
	// Expected is what the predicate wanted when it is the same for every
	// implementation (a literal value); "" when it differs (HOLDS/MOVES
	// compare each document with its own baseline: see Expecteds).
	Expected  string   `json:"expected"`
	Outcomes  []string `json:"outcomes"`
	Details   []string `json:"details"`
	Observed  []string `json:"observed"`
	Expecteds []string `json:"expecteds"`
}

// InteropView is the interop comparison of the archived documents.
type InteropView struct {
	Measured     bool   `json:"measured"`
	Verdict      string `json:"verdict"`
	Unclassified int    `json:"unclassified"`
	Pairs        []Pair `json:"pairs"`
}

// Pair is the differences between two implementations, side by side.
type Pair struct {
	A           string       `json:"a"`
	B           string       `json:"b"`
	Differences []Difference `json:"differences"`
}

// Difference is one path where two documents disagree.
type Difference struct {
	Path      string `json:"path"`
	A         string `json:"a"`
	B         string `json:"b"`
	FindingID string `json:"finding_id"`
	Class     string `json:"class"`
	Ruling    string `json:"ruling"`
}

// Finding is one entry of the findings register with its classification.
type Finding struct {
	ID           string `json:"id"`
	RunID        string `json:"run_id"`
	Path         string `json:"path"`
	A            string `json:"a"`
	AValue       string `json:"a_value"`
	B            string `json:"b"`
	BValue       string `json:"b_value"`
	Class        string `json:"class"`
	Ruling       string `json:"ruling"`
	OpenedIn     string `json:"opened_in"`
	ClassifiedIn string `json:"classified_in"`
}

// Measurement is one entry of the measurements log
// (CLEANROOM-MEASUREMENT-v2, or v1 before measurements archived their
// evidence): what `run measure` or a refused `run complete` saw. It is not
// a result (no RESULT asserts it), but its observations and scored results
// are archived evidence.
type Measurement struct {
	File        string            `json:"file"`
	Status      string            `json:"status"`
	SelfTest    any               `json:"self_test"`
	Subjects    []MeasuredSubject `json:"subjects"`
	InteropLine string            `json:"interop"`
}

// MeasuredSubject is one subject of a measurement.
type MeasuredSubject struct {
	Implementation string `json:"implementation"`
	State          string `json:"state"`
	Runner         string `json:"runner"`
	Sandboxed      bool   `json:"sandboxed"`
	Predicates     string `json:"predicates"`
	Reason         string `json:"reason"`
}

// Question is one entry of the questions log.
type Question struct {
	File     string `json:"file"`
	Revision string `json:"frozen_spec_revision"`
	Question string `json:"question"`
	Why      string `json:"why_insufficient"`
	Ruling   string `json:"ruling"`
	Class    string `json:"classification"`
}

// Room is the clean-room transcript summary.
type Room struct {
	File           string    `json:"file"`
	BlindPackageID string    `json:"blind_package_id"`
	SealDigest     string    `json:"seal_digest"`
	ServedFiles    any       `json:"served_files"`
	Calls          int       `json:"calls"`
	FilesRead      []string  `json:"files_read"`
	RefusedReads   []string  `json:"refused_reads"`
	FilesWritten   []Written `json:"files_written"`
	Model          any       `json:"model"`
	Stop           any       `json:"stop"`
	Turns          any       `json:"turns"`
}

// Written is one file the implementer wrote.
type Written struct {
	Path   string `json:"path"`
	Size   any    `json:"size"`
	SHA256 string `json:"sha256"`
}

// Gather reads the run of w and everything it witnessed. It fails only when
// the world has no readable run record; every other unreadable part is a
// note.
func Gather(ctx context.Context, w *experiment.World, opt Options) (*Report, error) {
	now := time.Now
	if opt.Now != nil {
		now = opt.Now
	}
	r := &Report{World: w.Root, Generated: now().UTC()}
	vopt := experiment.VerifyOptions{Evidence: true}
	var rec *experiment.Record
	if opt.Run != nil {
		rec, vopt = opt.Run.Record, opt.Run.VerifyOptions(vopt)
	} else {
		var err error
		if rec, err = w.ReadRecord(); err != nil {
			return nil, fmt.Errorf("reading the run record: %w", err)
		}
	}
	r.RunID, r.Status = rec.RunID, string(rec.Status)
	r.SpecReleaseID, r.BlindPackageID, r.InstrumentDigest = rec.SpecReleaseID, rec.BlindPackageID, rec.InstrumentDigest

	rep, err := experiment.Verify(ctx, w, vopt)
	if err != nil {
		return nil, fmt.Errorf("verifying the run: %w", err)
	}
	r.Verified = rep.OK()
	runIDs := experiment.ChainRunIDs(rec, rep.Chain)
	failed := 0
	for _, c := range rep.Checks {
		r.Checks = append(r.Checks, Check{Name: c.Name, OK: c.OK, Skipped: c.Skipped, Problems: c.Details})
		if !c.OK {
			failed++
		}
	}
	if !r.Verified {
		// What follows is rendered from the run's files all the same (a
		// broken run can be looked at); without this note its status and
		// re-scored verdicts would read as results run verify accepts.
		r.note("run verify refuses this run (%d check(s) failed, see Verification): the status, results and findings shown are what its files claim, not verified results", failed)
	}
	r.gatherTimeline(rep.Chain)
	r.gatherSubjects(w, rec)
	ms, err := experiment.ReadMeasurements(w, runIDs)
	if err != nil {
		r.note("measurements log governance/%s: %v", experiment.MeasurementsDirName, err)
	}
	// The findings any measurement of this run saw are this run's, even
	// when another run opened them first.
	seen := map[string]bool{}
	for _, l := range ms {
		for _, f := range l.Findings {
			seen[f] = true
		}
	}
	if rec.Status == experiment.StatusComplete {
		r.gatherResult(w, rec, rep.Release)
	} else {
		r.gatherMeasurement(w, rec, rep.Release, ms)
		switch {
		case rec.Status == experiment.StatusAborted && r.Measurement != nil:
			r.note("the run was ABORTED after measurement: it has no result; the tables show its latest measurement (see the last receipt's note for why it was aborted)")
		case rec.Status == experiment.StatusAborted:
			r.note("the run was ABORTED: it has no result (see the last receipt's note for why)")
		case r.Measurement != nil:
			r.note("the run is %s: the tables show its latest measurement, not a result; a RESULT exists once the run is COMPLETE (cleanroom run complete)", rec.Status)
		default:
			r.note("the run is %s and was not measured: cleanroom run measure shows what completion would see, cleanroom run complete asserts a result", rec.Status)
		}
	}
	r.gatherFindings(w, runIDs, seen)
	r.joinFindings()
	r.gatherQuestions(w)
	if opt.Transcript != "" {
		r.gatherRoom(opt.Transcript)
	}
	return r, nil
}

func (r *Report) note(format string, a ...any) { r.Notes = append(r.Notes, fmt.Sprintf(format, a...)) }

// gatherTimeline lists the receipts the verification's chain walk reached,
// oldest first (experiment.TimelineOf); it takes the chain from the Verify
// Gather already ran (experiment.Timeline would verify, and replay a
// COMPLETE run's RESULT, a second time). A subject is listed at the first
// receipt that admits it.
func (r *Report) gatherTimeline(chain []experiment.ChainLink) {
	for _, e := range experiment.TimelineOf(chain) {
		r.Timeline = append(r.Timeline, Event{Status: string(e.Status), RunID: e.RunID, Receipt: e.Receipt, SHA256: e.ReceiptSHA256,
			Note: e.Note, Time: e.Time.UTC(), Admitted: e.AdmittedTexts()})
	}
}

func (r *Report) gatherSubjects(w *experiment.World, rec *experiment.Record) {
	for _, a := range rec.Adapters {
		s := Subject{Implementation: a.Implementation, Role: a.Role, PackageDigest: a.PackageDigest}
		if a.BinaryDigest != nil {
			s.BinaryDigest = *a.BinaryDigest
		}
		if a.BinaryPath != nil {
			s.Binary = *a.BinaryPath
		}
		if a.Environment != nil {
			s.Toolchain, s.Model, s.Tool = a.Environment.Toolchain, a.Environment.Model, a.Environment.ToolVersion
		}
		s.Verdict = "NOT MEASURED"
		r.Subjects = append(r.Subjects, s)
	}
}

// gatherResult reads the RESULT and re-scores every archived observation
// with the frozen scorer over the committed challenge set.
func (r *Report) gatherResult(w *experiment.World, rec *experiment.Record, rel *experiment.Release) {
	file := experiment.ResultFile(rec.RunID)
	b, err := readReceipt(w, file)
	if err != nil {
		r.note("RESULT governance/receipts/%s: %v", file, err)
		return
	}
	res, err := experiment.ParseResult(b, "governance/receipts/"+file)
	if err != nil {
		r.note("RESULT governance/receipts/%s: %v", file, err)
		return
	}
	r.PreviousRunID = res.PreviousRunID
	r.HoldoutCommitment, r.HoldoutEntries = res.HoldoutCommitment, res.HoldoutEntries
	for _, rs := range res.Subjects {
		if s := r.subject(rs.Implementation); s != nil {
			p := rs.Predicates
			s.ResultPredicates = &p
			s.ObservationSHA256 = rs.ObservationSHA256
		}
	}
	var docs []archivedDoc
	for _, o := range res.Observations {
		s := r.subject(o.Implementation)
		if s == nil {
			r.note("RESULT names an observation of %q, which the record does not freeze", o.Implementation)
			continue
		}
		s.Observation = o.File
		b, err := readReceipt(w, o.File)
		if err != nil {
			r.note("observation governance/receipts/%s: %v", o.File, err)
			continue
		}
		if got := pkgwalk.SHA256Hex(b); got != o.SHA256 {
			r.note("observation governance/receipts/%s: sha256 %s, the RESULT records %s", o.File, got, o.SHA256)
			continue
		}
		docs = append(docs, archivedDoc{impl: o.Implementation, file: "governance/receipts/" + o.File, bytes: b})
	}
	r.Source = "the RESULT's archived observations (governance/receipts/), re-scored by the frozen scorer"
	r.score(w, rec, rel, docs)
}

// archivedDoc is an archived observation document, read and re-digested.
type archivedDoc struct {
	impl, file string // the subject's label; the world-relative archive file
	bytes      []byte
}

// score re-scores archived observation documents with the frozen scorer
// over the committed challenge set, tabulates every predicate and compares
// the documents pairwise (the RESULT's archive or a measurement's: the same
// reading either way).
func (r *Report) score(w *experiment.World, rec *experiment.Record, rel *experiment.Release, archived []archivedDoc) {
	if rel == nil {
		r.note("the run's release could not be read: the observations are not re-scored")
		return
	}
	pkg := w.PackageDir()
	schemas, err := holdout.LoadPackageSchemas(pkg)
	if err != nil {
		r.note("the package's schemas: %v", err)
		return
	}
	h, err := holdout.LoadCommitted(pkg, w.HoldoutDir(), rel.Committed(), schemas)
	if err != nil {
		r.note("the committed challenge set: %v", err)
		return
	}
	sc, err := holdout.NewScorer(schemas, h.Challenges)
	if err != nil {
		r.note("the scorer: %v", err)
		return
	}
	var docs []holdout.Document
	for _, o := range archived {
		s := r.subject(o.impl)
		if s == nil {
			continue
		}
		doc, err := evidence.Read(o.bytes)
		if err != nil {
			r.note("observation %s: %v", o.file, err)
			continue
		}
		rp, err := sc.Score(doc, holdout.Options{ExpectRelease: rec.SpecReleaseID, ExpectImplementation: o.impl})
		if err != nil {
			s.Refused = err.Error()
			s.Verdict = "REFUSED"
			continue
		}
		s.Scored = true
		s.Total, s.Pass, s.Fail, s.Unr, s.Missing, s.Verdict = rp.Total, rp.Pass, rp.Fail, rp.Unresolved, rp.Missing, rp.Verdict()
		s.countsByChallenge = rp.ByChallenge()
		s.resultsByChallenge = map[string][]holdout.Result{}
		for _, x := range rp.Results {
			s.resultsByChallenge[x.ID] = append(s.resultsByChallenge[x.ID], x)
		}
		s.missingSet = map[string]bool{}
		for _, m := range rp.Missing {
			s.missingSet[m] = true
		}
		s.rows = rp.Rows(h.Challenges)
		docs = append(docs, holdout.Document{Implementation: o.impl, Value: doc})
	}
	r.tabulate(h.Challenges)
	io, err := holdout.CompareAll(docs)
	if err != nil {
		r.note("interop: %v", err)
		return
	}
	v := &InteropView{Measured: io.Measured, Verdict: io.Verdict()}
	for _, p := range io.Pairs {
		pv := Pair{A: p.A, B: p.B}
		for _, f := range p.Findings {
			pv.Differences = append(pv.Differences, Difference{Path: f.Path, A: f.A, B: f.B, FindingID: f.ID(rec.SpecReleaseID, p.A, p.B)})
		}
		v.Pairs = append(v.Pairs, pv)
	}
	r.Interop = v
}

// tabulate builds the per-challenge and per-predicate tables.
func (r *Report) tabulate(chs []*holdout.Challenge) {
	for _, c := range chs {
		row := ChallengeRow{ID: c.ID}
		for i := range r.Subjects {
			s := &r.Subjects[i]
			cell, class := NotScored, "none"
			switch {
			case !s.Scored:
			case s.missingSet[c.ID]:
				cell, class = Missing, "missing"
			default:
				n := s.countsByChallenge[c.ID]
				cell = fmt.Sprintf("%d pass, %d fail, %d unresolved", n.Pass, n.Fail, n.Unresolved)
				switch {
				case n.Fail > 0:
					class = "fail"
				case n.Unresolved > 0:
					class = "unresolved"
				default:
					class = "pass"
				}
			}
			row.Cells, row.Class = append(row.Cells, cell), append(row.Class, class)
		}
		r.Challenges = append(r.Challenges, row)
		for k, p := range c.Predicates() {
			op, _ := p.Get("op")
			path, _ := p.Get("path")
			where := str(path)
			if where == "" {
				// A comparison of two roots (LT, REFUSAL_SET_EQ, …) has no path.
				left, _ := p.Get("left")
				right, _ := p.Get("right")
				if left != nil || right != nil {
					where = str(left) + " vs " + str(right)
				}
			}
			pr := PredicateRow{Challenge: c.ID, Index: k + 1, Op: str(op), Path: where}
			for i := range r.Subjects {
				s := &r.Subjects[i]
				out, detail, observed, expected := NotScored, "", "", ""
				switch {
				case !s.Scored:
				case s.missingSet[c.ID]:
					out, observed = Missing, "ABSENT"
					if x, ok := s.row(c.ID, k+1); ok {
						detail, expected = x.Detail, x.ExpectedText()
					}
				case k < len(s.resultsByChallenge[c.ID]):
					x := s.resultsByChallenge[c.ID][k]
					detail, observed, expected = x.Detail, x.Observed, x.ExpectedText()
					switch x.Outcome() {
					case "PASS":
						out = Pass
					case "FAIL":
						out = Fail
					default:
						out = Unresolved
					}
				}
				pr.Outcomes, pr.Details = append(pr.Outcomes, out), append(pr.Details, detail)
				pr.Observed, pr.Expecteds = append(pr.Observed, observed), append(pr.Expecteds, expected)
			}
			// One expected value for the row when every scored document was
			// held to the same one; otherwise each cell shows its own.
			for i, e := range pr.Expecteds {
				if !r.Subjects[i].Scored {
					continue
				}
				if pr.Expected == "" {
					pr.Expected = e
				} else if pr.Expected != e {
					pr.Expected = ""
					break
				}
			}
			if pr.Expected != "" {
				for i := range pr.Expecteds {
					pr.Expecteds[i] = ""
				}
			}
			r.Predicates = append(r.Predicates, pr)
		}
	}
}

// gatherFindings reads the findings register and splits it: this run's
// findings (opened under one of its run_ids, seen by one of its
// measurements, or among the differences of its archived documents) and
// the others, which other runs opened.
func (r *Report) gatherFindings(w *experiment.World, runIDs []string, seen map[string]bool) {
	reg, err := w.FindingsRegister()
	var fs []*holdout.FindingRecord
	if err == nil {
		fs, err = reg.Findings()
	}
	if err != nil {
		r.note("findings register governance/%s: %v", holdout.FindingsDirName, err)
		return
	}
	if r.Interop != nil {
		for _, p := range r.Interop.Pairs {
			for _, d := range p.Differences {
				seen[d.FindingID] = true
			}
		}
	}
	for _, f := range fs {
		v := Finding{ID: f.ID, RunID: f.RunID, Path: f.Path, A: f.A, AValue: f.AValue,
			B: f.B, BValue: f.BValue, Class: f.Class, Ruling: f.Ruling, OpenedIn: f.OpenedIn, ClassifiedIn: f.ClassifiedIn}
		if slices.Contains(runIDs, f.RunID) || seen[f.ID] {
			r.Findings = append(r.Findings, v)
		} else {
			r.OtherFindings = append(r.OtherFindings, v)
		}
	}
}

// joinFindings puts the register's classification beside each interop
// difference.
func (r *Report) joinFindings() {
	if r.Interop == nil {
		return
	}
	byID := map[string]Finding{}
	for _, f := range r.Findings {
		byID[f.ID] = f
	}
	for i := range r.Interop.Pairs {
		for j := range r.Interop.Pairs[i].Differences {
			d := &r.Interop.Pairs[i].Differences[j]
			if f, ok := byID[d.FindingID]; ok {
				d.Class, d.Ruling = f.Class, f.Ruling
			}
			if d.Class == "" {
				d.Class = holdout.Unclassified
				r.Interop.Unclassified++
			}
		}
	}
	if r.Interop.Measured && r.Interop.Verdict == holdout.Unclassified && r.Interop.Unclassified == 0 {
		r.Interop.Verdict = "ALL FINDINGS CLASSIFIED"
	}
}

func (r *Report) gatherQuestions(w *experiment.World) {
	es, err := holdout.Questions(w.StateDir())
	if err != nil {
		r.note("questions log: %v", err)
		return
	}
	for _, e := range es {
		rev, _ := e.Value.Get("frozen_spec_revision")
		r.Questions = append(r.Questions, Question{File: e.File, Revision: str(rev), Question: e.Str("question"),
			Why: e.Str("why_insufficient"), Ruling: e.Str("ruling"), Class: e.Str("classification")})
	}
}

// gatherMeasurement takes the latest of the run's measurements (the
// measurements log's entries taken under one of its run_ids,
// experiment.ReadMeasurements), re-reads the observations it archived
// (re-digested: experiment.ReadArchived) and scores them as a COMPLETE run's
// archive is scored.
func (r *Report) gatherMeasurement(w *experiment.World, rec *experiment.Record, rel *experiment.Release, ms []experiment.Logged) {
	if len(ms) == 0 {
		return
	}
	e := ms[len(ms)-1]
	m := &Measurement{File: e.File, Status: e.Status, SelfTest: e.SelfTest}
	var docs []archivedDoc
	for _, ls := range e.Subjects {
		sub := MeasuredSubject{Implementation: ls.Implementation, State: ls.State, Runner: ls.Runner, Sandboxed: ls.Sandboxed, Reason: ls.Reason}
		if p := ls.Predicates; p != nil {
			g := func(k string) string { v, _ := p.Get(k); return str(v) }
			sub.Predicates = fmt.Sprintf("%s: %s satisfied, %s unsatisfied, %s unresolved, %s missing", g("total"), g("satisfied"), g("unsatisfied"), g("unresolved"), g("missing"))
		}
		m.Subjects = append(m.Subjects, sub)
		s := r.subject(ls.Implementation)
		if s == nil {
			continue
		}
		if ls.State != adapter.Measured {
			s.Verdict = ls.State
			s.Refused = ls.Reason
		}
		if ls.Observation == nil {
			continue
		}
		b, err := experiment.ReadArchived(w, ls.Observation)
		if err != nil {
			r.note("measurement %s, %s: %v", e.File, ls.Implementation, err)
			continue
		}
		s.Observation = ls.Observation.File
		docs = append(docs, archivedDoc{impl: ls.Implementation, file: "governance/" + ls.Observation.File, bytes: b})
	}
	if e.Interop != nil {
		g := func(k string) string { v, _ := e.Interop.Get(k); return str(v) }
		m.InteropLine = fmt.Sprintf("measured %s, %s pair(s), %s finding(s), %s unclassified", g("measured"), g("pairs"), g("findings"), g("unclassified"))
	}
	r.Measurement = m
	if len(docs) > 0 {
		r.Source = "the latest measurement's archived observations (governance/" + experiment.MeasurementsDirName + "/" + e.File + "), re-scored by the frozen scorer: a measurement, not a result"
		r.score(w, rec, rel, docs)
	}
	r.Headline = r.headline(rec.Status)
}

// headline sums up a measured run that is not COMPLETE: each subject's
// satisfied/total and the first predicates it did not pass, by name.
func (r *Report) headline(status experiment.Status) string {
	lead := string(status) + ", measured, not complete"
	if status == experiment.StatusAborted {
		lead = "ABORTED after measurement"
	}
	var parts []string
	for _, s := range r.Subjects {
		if !s.Scored {
			parts = append(parts, s.Implementation+" "+s.Verdict)
			continue
		}
		part := fmt.Sprintf("%s %d/%d", s.Implementation, s.Pass, s.Total)
		var failing []string
		for _, x := range s.rows {
			if x.Outcome() != "PASS" {
				failing = append(failing, x.Describe())
			}
		}
		const shown = 3
		if len(failing) > shown {
			failing = append(failing[:shown], fmt.Sprintf("and %d more", len(failing)-shown))
		}
		if len(failing) > 0 {
			part += ", failing " + strings.Join(failing, "; ")
		}
		parts = append(parts, part)
	}
	return lead + ": " + strings.Join(parts, " · ")
}

func (r *Report) gatherRoom(path string) {
	// A regular file of bounded size: a FIFO named as the transcript would
	// hang the report, /dev/zero exhaust its memory.
	b, err := evidence.ReadRegularFile(path, harness.MaxTranscriptBytes)
	if err != nil {
		r.note("clean-room transcript %s: %v", path, err)
		return
	}
	doc, err := harness.ReadTranscript(b)
	if err != nil {
		r.note("clean-room transcript %s: %v", path, err)
		return
	}
	// The transcript records what the model sent, raw: a refused path
	// (or a model name, a written path) may hold bidirectional controls,
	// zero-width characters or terminal escapes that would reorder or hide
	// what the report shows. Every string taken from it is shown escaped.
	get := func(k string) any {
		v, _ := doc.Get(k)
		if s, ok := v.(string); ok {
			return textsafe.Visible(s)
		}
		return v
	}
	strs := func(k string) []string {
		a, _ := get(k).([]any)
		out := []string{}
		for _, x := range a {
			out = append(out, textsafe.Visible(str(x)))
		}
		return out
	}
	room := &Room{File: textsafe.Visible(path), BlindPackageID: str(get("blind_package_id")), SealDigest: str(get("seal_digest")),
		ServedFiles: get("served_file_count"), FilesRead: strs("files_read"), RefusedReads: strs("refused_reads"),
		Model: get("model"), Stop: get("stop"), Turns: get("turns")}
	if a, ok := get("access").([]any); ok {
		room.Calls = len(a)
	}
	fw, _ := get("files_written").([]any)
	for _, x := range fw {
		o, ok := x.(*evidence.Object)
		if !ok {
			continue
		}
		p, _ := o.Get("path")
		sz, _ := o.Get("size")
		sum, _ := o.Get("sha256")
		room.FilesWritten = append(room.FilesWritten, Written{Path: textsafe.Visible(str(p)), Size: sz, SHA256: textsafe.Visible(str(sum))})
	}
	if room.BlindPackageID != "" && room.BlindPackageID != r.BlindPackageID {
		r.note("the transcript served %s, but the run pins %s", room.BlindPackageID, r.BlindPackageID)
	}
	r.Room = room
}

// readReceipt reads the receipts-relative file rel as run verify reads it:
// opened beneath the receipts directory with openat2 (no "..", no symbolic
// or magic link, no mount crossing), a regular file checked by fstat on
// that descriptor, at most evidence.MaxSize bytes. rel comes from a RESULT
// a candidate's run may have forged: a link or ".." would otherwise show
// bytes from outside the world, a FIFO hang the report, /dev/zero exhaust
// its memory.
func readReceipt(w *experiment.World, rel string) ([]byte, error) {
	b, _, err := evidence.ReadRegularBeneath(w.ReceiptsDir(), rel)
	return b, err
}

// row returns the subject's result for predicate index (1-based) of
// challenge id, MISSING ones included.
func (s *Subject) row(id string, index int) (holdout.Result, bool) {
	for _, x := range s.rows {
		if x.ID == id && x.Index == index {
			return x, true
		}
	}
	return holdout.Result{}, false
}

func (r *Report) subject(impl string) *Subject {
	i := slices.IndexFunc(r.Subjects, func(s Subject) bool { return s.Implementation == impl })
	if i < 0 {
		return nil
	}
	return &r.Subjects[i]
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	return fmt.Sprint(v)
}
