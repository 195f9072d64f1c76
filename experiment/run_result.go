package experiment

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// ResultType is the type of the terminal RESULT record.
const ResultType = "TRVM-BLIND-RUN-RESULT-v3"

// Result is the RESULT record TRVM-BLIND-RUN-RESULT-v3 at
// governance/receipts/<run_id>.RESULT.json (TRVM-FORMATS §5.6), written
// create-exclusive before the COMPLETE receipt and never rewritten.
//
// Its bytes are JSON.stringify(result, null, 1) + "\n" with the members in
// this order: type, run_id, previous_run_id, spec_release_id,
// blind_package_id, instrument_digest, holdout_commitment, holdout_entries,
// subjects [{implementation, role, package_digest, binary_digest,
// observation_sha256, predicates{total, satisfied, unsatisfied,
// unresolved}}], observations [{implementation, file, sha256}],
// interop{measured, pairs, findings}. The shape is closed.
type Result struct {
	RunID             string
	PreviousRunID     string
	SpecReleaseID     string
	BlindPackageID    string
	InstrumentDigest  string
	HoldoutCommitment string
	HoldoutEntries    int
	Subjects          []ResultSubject
	Observations      []ResultObservation
	Interop           Interop
}

// ResultSubject is one measured subject.
type ResultSubject struct {
	Implementation    string
	Role              string
	PackageDigest     string
	BinaryDigest      *string
	ObservationSHA256 string
	Predicates        Predicates
}

// ResultObservation names an archived observation document.
type ResultObservation struct {
	Implementation string
	File           string // "<run_id>/observations/<impl>.json", receipts-relative
	SHA256         string
}

// Interop is the interoperability claim: measured, over n(n-1)/2 pairs,
// with zero outstanding findings.
type Interop struct {
	Measured bool
	Pairs    int
	Findings int
}

// ResultFile returns the RESULT file name of a run.
func ResultFile(runID string) string { return runID + ".RESULT.json" }

// ObservationFile returns the receipts-relative archive path of a subject's
// observation document.
func ObservationFile(runID, impl string) string {
	return runID + "/observations/" + impl + ".json"
}

// Object returns the RESULT in the reference's member order.
func (res *Result) Object() *evidence.Object {
	subjects := make([]any, len(res.Subjects))
	for i, s := range res.Subjects {
		subjects[i] = evidence.NewObject(
			evidence.Member{Name: "implementation", Value: s.Implementation},
			evidence.Member{Name: "role", Value: s.Role},
			evidence.Member{Name: "package_digest", Value: s.PackageDigest},
			evidence.Member{Name: "binary_digest", Value: nullable(s.BinaryDigest)},
			evidence.Member{Name: "observation_sha256", Value: s.ObservationSHA256},
			evidence.Member{Name: "predicates", Value: evidence.NewObject(
				evidence.Member{Name: "total", Value: s.Predicates.Total},
				evidence.Member{Name: "satisfied", Value: s.Predicates.Satisfied},
				evidence.Member{Name: "unsatisfied", Value: s.Predicates.Unsatisfied},
				evidence.Member{Name: "unresolved", Value: s.Predicates.Unresolved},
			)},
		)
	}
	obs := make([]any, len(res.Observations))
	for i, o := range res.Observations {
		obs[i] = evidence.NewObject(
			evidence.Member{Name: "implementation", Value: o.Implementation},
			evidence.Member{Name: "file", Value: o.File},
			evidence.Member{Name: "sha256", Value: o.SHA256},
		)
	}
	return evidence.NewObject(
		evidence.Member{Name: "type", Value: ResultType},
		evidence.Member{Name: "run_id", Value: res.RunID},
		evidence.Member{Name: "previous_run_id", Value: res.PreviousRunID},
		evidence.Member{Name: "spec_release_id", Value: res.SpecReleaseID},
		evidence.Member{Name: "blind_package_id", Value: res.BlindPackageID},
		evidence.Member{Name: "instrument_digest", Value: res.InstrumentDigest},
		evidence.Member{Name: "holdout_commitment", Value: res.HoldoutCommitment},
		evidence.Member{Name: "holdout_entries", Value: res.HoldoutEntries},
		evidence.Member{Name: "subjects", Value: subjects},
		evidence.Member{Name: "observations", Value: obs},
		evidence.Member{Name: "interop", Value: evidence.NewObject(
			evidence.Member{Name: "measured", Value: res.Interop.Measured},
			evidence.Member{Name: "pairs", Value: res.Interop.Pairs},
			evidence.Member{Name: "findings", Value: res.Interop.Findings},
		)},
	)
}

// Bytes renders the RESULT: JSON.stringify(result, null, 1) + "\n".
func (res *Result) Bytes() ([]byte, error) { return evidence.Stringify(res.Object(), " ") }

var (
	resultMembers            = []string{"type", "run_id", "previous_run_id", "spec_release_id", "blind_package_id", "instrument_digest", "holdout_commitment", "holdout_entries", "subjects", "observations", "interop"}
	resultSubjectMembers     = []string{"implementation", "role", "package_digest", "binary_digest", "observation_sha256", "predicates"}
	resultObservationMembers = []string{"implementation", "file", "sha256"}
	predicateMembers         = []string{"total", "satisfied", "unsatisfied", "unresolved"}
	interopMembers           = []string{"measured", "pairs", "findings"}
)

func (f *fieldReader) integer(o *evidence.Object, name string) int {
	n := f.num(o, name)
	if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
		f.bad(name, "an integer", n)
		return 0
	}
	return int(n)
}

func (f *fieldReader) object(o *evidence.Object, name string) *evidence.Object {
	v, ok := o.Get(name)
	if !ok {
		return evidence.NewObject()
	}
	obj, isObj := v.(*evidence.Object)
	if !isObj {
		f.bad(name, "an object", v)
		return evidence.NewObject()
	}
	return obj
}

// ParseResult reads a RESULT from its bytes: strict reader, closed shapes,
// unique labels in subjects and observations — before anything indexes
// them, since a label twice has two readings. The error is a *VerifyError.
func ParseResult(b []byte, file string) (*Result, error) {
	res, ps := parseResult(b, file)
	if len(ps) > 0 {
		return res, &VerifyError{What: "reading the RESULT", Problems: ps}
	}
	return res, nil
}

func parseResult(b []byte, file string) (*Result, []*RunProblem) {
	o, err := evidence.ReadObject(b)
	if err != nil {
		return nil, []*RunProblem{{Rule: errResult, File: file, Detail: "a terminal claim with two readings is not a terminal claim", Err: err}}
	}
	ps := shape(o, resultMembers, file, "the RESULT")
	f := fieldReader{file: file, what: "the RESULT"}
	if t := f.str(o, "type"); t != ResultType && o.Has("type") {
		ps = append(ps, problem(errResult, file, "type %q is not %s", t, ResultType))
	}
	res := &Result{
		RunID:             f.str(o, "run_id"),
		PreviousRunID:     f.str(o, "previous_run_id"),
		SpecReleaseID:     f.str(o, "spec_release_id"),
		BlindPackageID:    f.str(o, "blind_package_id"),
		InstrumentDigest:  f.str(o, "instrument_digest"),
		HoldoutCommitment: f.str(o, "holdout_commitment"),
		HoldoutEntries:    f.integer(o, "holdout_entries"),
	}
	var subjectLabels, obsLabels []string
	for _, so := range f.objects(o, "subjects") {
		impl, _ := so.Get("implementation")
		who := "RESULT subject " + scalar(impl)
		ps = append(ps, shape(so, resultSubjectMembers, file, who)...)
		sf := fieldReader{file: file, what: who}
		s := ResultSubject{
			Implementation:    sf.str(so, "implementation"),
			Role:              sf.str(so, "role"),
			PackageDigest:     sf.str(so, "package_digest"),
			BinaryDigest:      sf.nullableStr(so, "binary_digest"),
			ObservationSHA256: sf.str(so, "observation_sha256"),
		}
		po := sf.object(so, "predicates")
		ps = append(ps, shape(po, predicateMembers, file, who+"'s predicates")...)
		pf := fieldReader{file: file, what: who + "'s predicates"}
		s.Predicates = Predicates{Total: pf.integer(po, "total"), Satisfied: pf.integer(po, "satisfied"),
			Unsatisfied: pf.integer(po, "unsatisfied"), Unresolved: pf.integer(po, "unresolved")}
		ps = append(ps, sf.ps...)
		ps = append(ps, pf.ps...)
		subjectLabels = append(subjectLabels, s.Implementation)
		res.Subjects = append(res.Subjects, s)
	}
	for _, oo := range f.objects(o, "observations") {
		impl, _ := oo.Get("implementation")
		who := "RESULT observation " + scalar(impl)
		ps = append(ps, shape(oo, resultObservationMembers, file, who)...)
		of := fieldReader{file: file, what: who}
		ob := ResultObservation{Implementation: of.str(oo, "implementation"), File: of.str(oo, "file"), SHA256: of.str(oo, "sha256")}
		ps = append(ps, of.ps...)
		obsLabels = append(obsLabels, ob.Implementation)
		res.Observations = append(res.Observations, ob)
	}
	io := f.object(o, "interop")
	ps = append(ps, shape(io, interopMembers, file, "RESULT.interop")...)
	inf := fieldReader{file: file, what: "RESULT.interop"}
	res.Interop = Interop{Measured: inf.boolean(io, "measured"), Pairs: inf.integer(io, "pairs"), Findings: inf.integer(io, "findings")}
	ps = append(ps, inf.ps...)
	ps = append(ps, f.ps...)
	ps = append(ps, labelProblems(subjectLabels, file, "RESULT.subjects")...)
	ps = append(ps, labelProblems(obsLabels, file, "RESULT.observations")...)
	for _, p := range ps {
		if p.Rule == errRunShape || p.Rule == errLabel || p.Rule == errDuplicateLabel {
			p.Err, p.Rule = p.Rule, errResult
		}
	}
	return res, ps
}

// resultProblems: a COMPLETE run is witnessed by the measurement that gives
// the word its meaning (TRVM-FORMATS §5.6): the RESULT exists, reads
// unambiguously, matches the record and the COMPLETE transition's
// predecessor, lists exactly the frozen subjects, every archived
// observation re-digests and crosses the strict reader, re-scores to zero
// missing/unsatisfied/unresolved with the RESULT's totals, and the interop
// comparison replays to zero findings over n(n-1)/2 pairs.
func (w *World) resultProblems(ctx context.Context, r *Record, rel *Release, chain []ChainLink, replay replayFunc) []*RunProblem {
	name := ResultFile(r.RunID)
	file := w.stateRel(path.Join(ReceiptsDirName, name))
	b, _, err := w.readStateFile(path.Join(ReceiptsDirName, name))
	if errors.Is(err, fs.ErrNotExist) {
		return []*RunProblem{problem(errResultMissing, file, "this run is COMPLETE and no RESULT exists: COMPLETE means a measurement happened")}
	}
	if err != nil {
		return []*RunProblem{{Rule: errResult, File: file, Err: err}}
	}
	res, ps := parseResult(b, file)
	if len(ps) > 0 {
		return ps
	}
	bad := func(format string, args ...any) { ps = append(ps, problem(errResult, file, format, args...)) }
	if res.RunID != r.RunID {
		bad("names run %s: a result of another run does not witness this one", res.RunID)
	}
	for _, c := range [][3]string{
		{"spec_release_id", res.SpecReleaseID, r.SpecReleaseID},
		{"blind_package_id", res.BlindPackageID, r.BlindPackageID},
		{"instrument_digest", res.InstrumentDigest, r.InstrumentDigest},
	} {
		if c[1] != c[2] {
			bad("records %s %s and the run is %s", c[0], c[1], c[2])
		}
	}
	if rel != nil {
		if res.HoldoutCommitment != rel.HoldoutCommitment {
			bad("records holdout commitment %s and the release commits %s", res.HoldoutCommitment, rel.HoldoutCommitment)
		}
		if res.HoldoutEntries != rel.HoldoutEntries {
			bad("records %d committed challenge(s) and the release commits %d", res.HoldoutEntries, rel.HoldoutEntries)
		}
	}
	// The RESULT's predecessor is the COMPLETE transition's predecessor.
	var complete *Receipt
	if len(chain) > 0 && chain[0].Receipt.RunID == r.RunID && chain[0].Receipt.Status == StatusComplete {
		complete = chain[0].Receipt
	} else if cb, _, err := w.readStateFile(path.Join(ReceiptsDirName, ReceiptFile(r.RunID, StatusComplete))); err == nil {
		complete, _ = ParseReceipt(cb, "")
	}
	if complete != nil && (complete.PreviousRunID == nil || *complete.PreviousRunID != res.PreviousRunID) {
		bad("names predecessor %s and the COMPLETE transition names %s", res.PreviousRunID, scalar(nullable(complete.PreviousRunID)))
	}
	// The subject set is exact, in both directions.
	measured := map[string]ResultSubject{}
	for _, s := range res.Subjects {
		measured[s.Implementation] = s
	}
	for _, a := range r.Adapters {
		m, ok := measured[a.Implementation]
		if !ok {
			bad("does not report frozen subject %q", a.Implementation)
			continue
		}
		if m.Role != a.Role {
			bad("calls %s a %q and the run froze it as a %q", a.Implementation, m.Role, a.Role)
		}
		if m.PackageDigest != a.PackageDigest {
			bad("package digest for %s is not the frozen one", a.Implementation)
		}
		if !strPtrEqual(m.BinaryDigest, a.BinaryDigest) {
			bad("binary digest for %s is not the frozen one", a.Implementation)
		}
	}
	for _, s := range res.Subjects {
		if _, ok := r.Adapter(s.Implementation); !ok {
			bad("reports a subject %q this run never froze", s.Implementation)
		}
	}
	if !res.Interop.Measured {
		bad("does not record a MEASURED interoperability result")
	}
	if res.Interop.Findings != 0 {
		bad("records %d outstanding finding(s)", res.Interop.Findings)
	}
	// Every listed observation is archived where a subject of this run
	// stores it, re-digests, and crosses the strict reader.
	listed := map[string]ResultObservation{}
	for _, o := range res.Observations {
		listed[o.Implementation] = o
	}
	for _, s := range res.Subjects {
		o, ok := listed[s.Implementation]
		if !ok {
			bad("lists no archived observation for %q", s.Implementation)
			continue
		}
		if o.SHA256 != s.ObservationSHA256 {
			bad("observation list and subject list disagree about %s's digest", s.Implementation)
		}
		if o.File != ObservationFile(r.RunID, s.Implementation) {
			bad("archived path for %s is %q, not where a subject of this run stores its observation", s.Implementation, o.File)
		}
	}
	for _, o := range res.Observations {
		if _, ok := measured[o.Implementation]; !ok {
			bad("lists an archived observation for a subject it does not report: %q", o.Implementation)
		}
	}
	docs := map[string][]byte{}
	for _, s := range res.Subjects {
		if !ValidLabel(s.Implementation) {
			continue // already refused above; a label is never a path
		}
		rel := path.Join(ReceiptsDirName, ObservationFile(r.RunID, s.Implementation))
		ob, _, err := w.readStateFile(rel)
		if err != nil {
			ps = append(ps, &RunProblem{Rule: errResult, File: w.stateRel(rel), Detail: fmt.Sprintf("the observation document for %s is not archived", s.Implementation), Err: err})
			continue
		}
		if got := pkgwalk.SHA256Hex(ob); got != s.ObservationSHA256 {
			ps = append(ps, problem(errResult, w.stateRel(rel), "the archived observation digests %s and the RESULT records %s", got, s.ObservationSHA256))
			continue
		}
		// A digest authenticates bytes, not their reading: the archived
		// document crosses the same boundary as every other.
		if _, err := evidence.Read(ob); err != nil {
			ps = append(ps, &RunProblem{Rule: errResult, File: w.stateRel(rel), Detail: "archived observation refused", Err: err})
			continue
		}
		docs[s.Implementation] = ob
	}
	obsDir := path.Join(ReceiptsDirName, r.RunID, "observations")
	if ents, err := os.ReadDir(filepath.Join(w.StateDir(), filepath.FromSlash(obsDir))); err == nil {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tempPrefix) {
				continue // an unpublished temporary file of an interrupted completion
			}
			impl := e.Name()
			if path.Ext(impl) == ".json" {
				impl = impl[:len(impl)-len(".json")]
			}
			if _, ok := measured[impl]; !ok || e.Name() != impl+".json" {
				bad("%s is archived beside the RESULT and names no subject of this run", path.Join(obsDir, e.Name()))
			}
		}
	}
	if len(ps) > 0 {
		return ps
	}
	if len(docs) < 2 {
		bad("only %d observation document(s) are archived: completion asserts two frozen implementations were measured and agreed", len(docs))
		return ps
	}

	// Conformance is replayed, not only agreement: the frozen scorer
	// derives every total from the archived bytes and the committed set.
	if replay == nil {
		replay = replayRun
	}
	hdir := w.HoldoutDir()
	if existingDir(hdir) == "" {
		return []*RunProblem{problem(errResultNotReplayed, w.stateRel(HoldoutDirName), "the committed challenge set is not present, so the conformance claim cannot be replayed")}
	}
	if rel != nil {
		c, n, err := HoldoutCommitment(w.PackageDir(), hdir)
		if err != nil || c != rel.HoldoutCommitment || n != rel.HoldoutEntries {
			return []*RunProblem{{Rule: errHoldoutCommitment, File: w.stateRel(HoldoutDirName),
				Detail: fmt.Sprintf("the challenge set present (%s, %d entries) is not the release's (%s, %d)", c, n, rel.HoldoutCommitment, rel.HoldoutEntries), Err: err}}
		}
	}
	out, err := replay(ctx, replayInput{World: w, Record: r, Result: res, Observations: docs, HoldoutDir: hdir, Release: rel})
	if err != nil {
		return []*RunProblem{{Rule: errResultNotReplayed, File: file, Err: err}}
	}
	for _, s := range res.Subjects {
		got, ok := out.Subjects[s.Implementation]
		switch {
		case !ok:
			bad("replay did not score %s", s.Implementation)
		case got.Refused != "":
			bad("replaying %s's archived observation: refused: %s", s.Implementation, got.Refused)
		default:
			if len(got.Missing) > 0 {
				bad("%s: %d committed challenge(s) %v are unobserved in the archived document", s.Implementation, len(got.Missing), got.Missing)
			}
			if got.Predicates.Unsatisfied > 0 {
				bad("%s: %d predicate(s) are unsatisfied on replay", s.Implementation, got.Predicates.Unsatisfied)
			}
			if got.Predicates.Unresolved > 0 {
				bad("%s: %d predicate(s) are unresolved on replay", s.Implementation, got.Predicates.Unresolved)
			}
			if got.Predicates != s.Predicates {
				bad("%s: the RESULT claims %+v and replaying the frozen scorer derives %+v", s.Implementation, s.Predicates, got.Predicates)
			}
		}
	}
	if out.Findings != 0 {
		bad("replaying interoperability over the archived bytes finds %d disagreement(s) and the RESULT records zero", out.Findings)
	}
	if pairs := len(docs) * (len(docs) - 1) / 2; res.Interop.Pairs != pairs {
		bad("records %d interop pair(s) and %d archived observations make %d", res.Interop.Pairs, len(docs), pairs)
	}
	return ps
}
