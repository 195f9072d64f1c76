package experiment

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sync"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/ident"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// ReceiptType is the type of a transition receipt.
const ReceiptType = "TRVM-BLIND-RUN-RECEIPT-v2"

// maxChain bounds the walk from the record back to PINNED.
const maxChain = 64

// receiptNameRE is the file name of a transition receipt.
var receiptNameRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(brun-[0-9a-f]{64})\.([A-Z_]+)\.json$`)
})

// Receipt is a transition receipt TRVM-BLIND-RUN-RECEIPT-v2, written at
// governance/receipts/<run_id>.<STATUS>.json before the record on every
// transition and never rewritten (TRVM-FORMATS §5.5).
//
// Its bytes are JSON.stringify(body, null, 1) + "\n" with the members in
// this order: type, run_id, status, previous_run_id (null for PINNED),
// previous_status, spec_release_id, blind_package_id, instrument_digest,
// adapters [{implementation, role, package_digest, binary_digest,
// environment}] in record order, note (NON_AUTHORITATIVE prose). The shape
// is closed; there is no extension point.
type Receipt struct {
	RunID            string
	Status           Status
	PreviousRunID    *string
	PreviousStatus   *string
	SpecReleaseID    string
	BlindPackageID   string
	InstrumentDigest string
	Adapters         []ReceiptAdapter
	Note             string
}

// ReceiptAdapter is a subject as a receipt carries it.
type ReceiptAdapter struct {
	Implementation string
	Role           string
	PackageDigest  string
	BinaryDigest   *string
	Environment    *Environment
}

// ReceiptFile returns the receipt file name of a run at a status.
func ReceiptFile(runID string, s Status) string { return runID + "." + string(s) + ".json" }

// NewReceipt returns the receipt of a transition into r (whose RunID must
// be set), naming prev as its predecessor (nil for PINNED).
func NewReceipt(r *Record, note string, prev *Record) *Receipt {
	rc := &Receipt{
		RunID: r.RunID, Status: r.Status,
		SpecReleaseID: r.SpecReleaseID, BlindPackageID: r.BlindPackageID,
		InstrumentDigest: r.InstrumentDigest, Note: note,
	}
	if prev != nil {
		rc.PreviousRunID = strPtr(prev.RunID)
		rc.PreviousStatus = strPtr(string(prev.Status))
	}
	for _, a := range r.Clone().Adapters {
		rc.Adapters = append(rc.Adapters, ReceiptAdapter{
			Implementation: a.Implementation, Role: a.Role, PackageDigest: a.PackageDigest,
			BinaryDigest: a.BinaryDigest, Environment: a.Environment,
		})
	}
	return rc
}

// Object returns the receipt body in the reference's member order.
func (rc *Receipt) Object() *evidence.Object {
	adapters := make([]any, len(rc.Adapters))
	for i, a := range rc.Adapters {
		adapters[i] = evidence.NewObject(
			evidence.Member{Name: "implementation", Value: a.Implementation},
			evidence.Member{Name: "role", Value: a.Role},
			evidence.Member{Name: "package_digest", Value: a.PackageDigest},
			evidence.Member{Name: "binary_digest", Value: nullable(a.BinaryDigest)},
			evidence.Member{Name: "environment", Value: envValue(a.Environment)},
		)
	}
	return evidence.NewObject(
		evidence.Member{Name: "type", Value: ReceiptType},
		evidence.Member{Name: "run_id", Value: rc.RunID},
		evidence.Member{Name: "status", Value: string(rc.Status)},
		evidence.Member{Name: "previous_run_id", Value: nullable(rc.PreviousRunID)},
		evidence.Member{Name: "previous_status", Value: nullable(rc.PreviousStatus)},
		evidence.Member{Name: "spec_release_id", Value: rc.SpecReleaseID},
		evidence.Member{Name: "blind_package_id", Value: rc.BlindPackageID},
		evidence.Member{Name: "instrument_digest", Value: rc.InstrumentDigest},
		evidence.Member{Name: "adapters", Value: adapters},
		evidence.Member{Name: "note", Value: rc.Note},
	)
}

// Bytes renders the receipt as the reference does (receiptBytes).
func (rc *Receipt) Bytes() ([]byte, error) { return evidence.Stringify(rc.Object(), " ") }

var (
	receiptMembers        = []string{"type", "run_id", "status", "previous_run_id", "previous_status", "spec_release_id", "blind_package_id", "instrument_digest", "adapters", "note"}
	receiptAdapterMembers = []string{"implementation", "role", "package_digest", "binary_digest", "environment"}
)

// ParseReceipt reads a receipt from its bytes: strict reader
// ([errReceiptBytes]), then the closed shape and unique labels. file names
// it in problems. The error is a *VerifyError listing every problem.
func ParseReceipt(b []byte, file string) (*Receipt, error) {
	rc, ps := parseReceipt(b, file)
	if len(ps) > 0 {
		return rc, &VerifyError{What: "reading a receipt", Problems: ps}
	}
	return rc, nil
}

func parseReceipt(b []byte, file string) (*Receipt, []*RunProblem) {
	o, err := evidence.ReadObject(b)
	if err != nil {
		return nil, []*RunProblem{{Rule: errReceiptBytes, File: file, Err: err}}
	}
	ps := shape(o, receiptMembers, file, "receipt")
	f := fieldReader{file: file, what: "receipt"}
	if t := f.str(o, "type"); t != ReceiptType && o.Has("type") {
		ps = append(ps, problem(errRunShape, file, "type %q is not %s", t, ReceiptType))
	}
	rc := &Receipt{
		RunID:            f.str(o, "run_id"),
		Status:           Status(f.str(o, "status")),
		PreviousRunID:    f.nullableStr(o, "previous_run_id"),
		PreviousStatus:   f.nullableStr(o, "previous_status"),
		SpecReleaseID:    f.str(o, "spec_release_id"),
		BlindPackageID:   f.str(o, "blind_package_id"),
		InstrumentDigest: f.str(o, "instrument_digest"),
		Note:             f.str(o, "note"),
	}
	var labels []string
	for _, ao := range f.objects(o, "adapters") {
		impl, _ := ao.Get("implementation")
		who := fmt.Sprintf("receipt adapter %s", scalar(impl))
		ps = append(ps, shape(ao, receiptAdapterMembers, file, who)...)
		af := fieldReader{file: file, what: who}
		a := ReceiptAdapter{
			Implementation: af.str(ao, "implementation"),
			Role:           af.str(ao, "role"),
			PackageDigest:  af.str(ao, "package_digest"),
			BinaryDigest:   af.nullableStr(ao, "binary_digest"),
		}
		a.Environment = af.environment(ao, "environment", who)
		ps = append(ps, af.ps...)
		labels = append(labels, a.Implementation)
		rc.Adapters = append(rc.Adapters, a)
	}
	ps = append(ps, f.ps...)
	ps = append(ps, labelProblems(labels, file, "the receipt's adapters")...)
	return rc, ps
}

// ChainLink is one receipt on the walk from the record back to PINNED.
type ChainLink struct {
	File    string // state-root-relative: receipts/<run_id>.<STATUS>.json
	Receipt *Receipt
	SHA256  string    // of the receipt's bytes
	ModTime time.Time // when the receipt file was written
}

func envDiffers(a, b *Environment) bool {
	if a == nil || b == nil {
		return (a == nil) != (b == nil)
	}
	return *a != *b
}

func strPtrEqual(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// chain walks the receipts from the record's own (run_id, status) back to a
// PINNED receipt with no predecessor (TRVM-FORMATS §5.5, chainProblems). It
// reads only the receipts the walk needs, so superseded history costs
// nothing and is never validated. Links are returned newest first.
func (w *World) chain(r *Record) ([]ChainLink, []*RunProblem) {
	var links []ChainLink
	var ps []*RunProblem
	rel := func(name string) string { return path.Join(ReceiptsDirName, name) }
	want := func(rc *Receipt, file string) {
		// One experiment history means one release, one package and one
		// instrument along the whole chain.
		for _, c := range [][3]string{
			{"spec_release_id", rc.SpecReleaseID, r.SpecReleaseID},
			{"blind_package_id", rc.BlindPackageID, r.BlindPackageID},
			{"instrument_digest", rc.InstrumentDigest, r.InstrumentDigest},
		} {
			if c[1] != c[2] {
				ps = append(ps, problem(errChain, file, "records %s %s and the run is %s", c[0], c[1], c[2]))
			}
		}
	}
	load := func(id string, s Status) (*ChainLink, *RunProblem) {
		name := ReceiptFile(id, s)
		b, mod, err := w.readStateFile(rel(name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, &RunProblem{Rule: errReceiptBytes, File: w.stateRel(rel(name)), Err: err}
		}
		rc, rps := parseReceipt(b, w.stateRel(rel(name)))
		if len(rps) > 0 {
			return nil, &RunProblem{Rule: rps[0].Rule, File: w.stateRel(rel(name)), Err: &VerifyError{What: "reading the receipt", Problems: rps}}
		}
		// Bound to the reference's byte form (a re-indented receipt reads
		// the same but is not what any transition wrote).
		if form, err := rc.Bytes(); err != nil || !bytes.Equal(form, b) {
			return nil, problem(errReceiptForm, w.stateRel(rel(name)), "not JSON.stringify(body, null, 1) + \"\\n\" in §5.5 member order (first difference at byte %d)", firstDiff(form, b))
		}
		return &ChainLink{File: rel(name), Receipt: rc, SHA256: pkgwalk.SHA256Hex(b), ModTime: mod}, nil
	}

	// Only a well-formed identity and a state can name a receipt file: a
	// run_id such as "../blind-run" must never select another state file.
	if !ident.Is(ident.Brun, r.RunID) || !r.Status.Valid() {
		return nil, []*RunProblem{problem(errChain, w.stateRel(RecordFileName), "run_id %q / status %q cannot name a receipt", r.RunID, r.Status)}
	}
	cur, bad := load(r.RunID, r.Status)
	if bad != nil {
		return nil, []*RunProblem{bad}
	}
	if cur == nil {
		return nil, []*RunProblem{problem(errReceiptMissing, w.stateRel(rel(ReceiptFile(r.RunID, r.Status))),
			"no %s receipt names %s: the record claims a state no transition recorded", r.Status, r.RunID)}
	}
	// The receipt that witnesses the record is about the record's subjects:
	// same labels, roles and digests (in any order: see
	// receiptAdaptersEqual).
	top := NewReceipt(r, "", nil).Adapters
	if !receiptAdaptersEqual(top, cur.Receipt.Adapters) {
		ps = append(ps, problem(errChain, w.stateRel(cur.File), "the receipt's subjects are not the record's subjects"))
	}
	seen := map[string]bool{}
	reachedPinned := false
	for step := 0; step < maxChain; step++ {
		file := w.stateRel(cur.File)
		key := cur.Receipt.RunID + "|" + string(cur.Receipt.Status)
		name := path.Base(cur.File)
		m := receiptNameRE().FindStringSubmatch(name)
		if m == nil {
			ps = append(ps, problem(errChain, file, "%s is not a receipt name", name))
			break
		}
		if seen[m[1]+"|"+m[2]] {
			ps = append(ps, problem(errChain, file, "the chain revisits %s: a history is not a cycle", key))
			break
		}
		seen[m[1]+"|"+m[2]] = true
		links = append(links, *cur)
		rc := cur.Receipt
		if rc.RunID != m[1] || string(rc.Status) != m[2] {
			ps = append(ps, problem(errChain, file, "names run %s/%s inside a file called %s", rc.RunID, rc.Status, name))
			break
		}
		want(rc, file)
		if rc.PreviousRunID == nil {
			if rc.Status != StatusPinned {
				ps = append(ps, problem(errChain, file, "the chain ends at a %s receipt with no predecessor; only PINNED begins a run", rc.Status))
			} else {
				reachedPinned = true
			}
			if rc.PreviousStatus != nil {
				ps = append(ps, problem(errChain, file, "names no predecessor id but predecessor status %q", *rc.PreviousStatus))
			}
			break
		}
		prevID := *rc.PreviousRunID
		if !ident.Is(ident.Brun, prevID) {
			ps = append(ps, problem(errChain, file, "names a malformed predecessor %q", prevID))
			break
		}
		if rc.PreviousStatus == nil || !Status(*rc.PreviousStatus).Valid() {
			ps = append(ps, problem(errChain, file, "names a predecessor status %s, which is not a state", scalar(nullable(rc.PreviousStatus))))
			break
		}
		prevStatus := Status(*rc.PreviousStatus)
		if !prevStatus.CanMoveTo(rc.Status) {
			ps = append(ps, problem(errChain, file, "claims %s → %s, which the state machine does not permit", prevStatus, rc.Status))
			break
		}
		prev, bad := load(prevID, prevStatus)
		if bad != nil {
			ps = append(ps, &RunProblem{Rule: bad.Rule, File: file, Detail: fmt.Sprintf("its predecessor %s is refused", ReceiptFile(prevID, prevStatus)), Err: bad.Err})
			break
		}
		if prev == nil {
			ps = append(ps, problem(errReceiptMissing, file, "names predecessor %s and no such receipt exists: the chain is broken",
				ReceiptFile(prevID, prevStatus)))
			break
		}
		// The subject set only grows, and only at the freeze; a subject
		// carried across a transition is carried unchanged, or it was not
		// frozen.
		after := map[string]ReceiptAdapter{}
		for _, a := range rc.Adapters {
			after[a.Implementation] = a
		}
		before := map[string]bool{}
		for _, a := range prev.Receipt.Adapters {
			before[a.Implementation] = true
			b, ok := after[a.Implementation]
			if !ok {
				ps = append(ps, problem(errChain, file, "subject %q is in %s and gone from %s", a.Implementation, path.Base(prev.File), name))
				continue
			}
			var moved []string
			if a.Role != b.Role {
				moved = append(moved, "role")
			}
			if a.PackageDigest != b.PackageDigest {
				moved = append(moved, "package_digest")
			}
			if !strPtrEqual(a.BinaryDigest, b.BinaryDigest) {
				moved = append(moved, "binary_digest")
			}
			if envDiffers(a.Environment, b.Environment) {
				moved = append(moved, "environment")
			}
			if len(moved) > 0 {
				ps = append(ps, problem(errChain, file, "subject %q changed %v between %s and %s", a.Implementation, moved, prevStatus, rc.Status))
			}
		}
		for _, a := range rc.Adapters {
			if !before[a.Implementation] && !(prevStatus == StatusPinned && rc.Status == StatusCandidateFrozen) {
				ps = append(ps, problem(errChain, file, "subject %q first appears at %s → %s; a subject is admitted only at PINNED → CANDIDATE_FROZEN",
					a.Implementation, prevStatus, rc.Status))
			}
		}
		cur = prev
	}
	if !reachedPinned && len(ps) == 0 {
		ps = append(ps, problem(errChain, w.stateRel(rel(ReceiptFile(r.RunID, r.Status))), "the chain never reaches PINNED within %d transitions", maxChain))
	}
	return links, ps
}

// receiptAdaptersEqual reports whether two subject lists are the same
// subjects: the same labels, each with the same role and digests and
// environment, in any order. The order carries no meaning: run_id sorts
// the adapters by label (TRVM-FORMATS §5.2), so a record whose adapters are
// reordered is the same run, and the reference accepts its receipts.
// Labels are unique on both sides (labelProblems), so matching by label is
// a bijection.
func receiptAdaptersEqual(a, b []ReceiptAdapter) bool {
	if len(a) != len(b) {
		return false
	}
	byLabel := make(map[string]ReceiptAdapter, len(b))
	for _, y := range b {
		byLabel[y.Implementation] = y
	}
	if len(byLabel) != len(b) {
		return false
	}
	for _, x := range a {
		y, ok := byLabel[x.Implementation]
		if !ok || x.Role != y.Role || x.PackageDigest != y.PackageDigest ||
			!strPtrEqual(x.BinaryDigest, y.BinaryDigest) || envDiffers(x.Environment, y.Environment) {
			return false
		}
	}
	return true
}
