package amber

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/sign"
	"golang.org/x/crypto/ssh"
)

// RecordType is the type of every run record.
const RecordType = "cleanroom-amber-run-v1"

// Run record files.
const (
	RecordFile    = "run.json"
	RecordSigFile = "run.json.sig"
	maxRecord     = 4 << 20
)

// Terminal states (Core §5 boundary 6) and the non-terminal one.
const (
	StateValidSuccess          = "valid_task_success"
	StateValidFailure          = "valid_task_failure"
	StateInvalidInfrastructure = "invalid_infrastructure"
	StateProtocolViolation     = "protocol_violation"
	StatePendingAdjudication   = "pending_adjudication"
)

var runStates = []string{StateValidSuccess, StateValidFailure, StateInvalidInfrastructure, StateProtocolViolation, StatePendingAdjudication}

// Comparability holds what must be equal for two results to be compared
// (Distribution §7; bundle size is not part of it).
type Comparability struct {
	SpecSHA256          string `json:"spec_sha256"`
	CutoffUTC           string `json:"cutoff_utc"`
	BaseBundleSHA256    string `json:"base_bundle_sha256"`
	OraclePackSHA256    string `json:"oracle_pack_sha256"`
	GitVersion          string `json:"git_version"`
	BundleFormatVersion string `json:"bundle_format_version"`
	HashAlgorithm       string `json:"hash_algorithm"`
}

// ComparabilityOf returns the comparability block of a manifest.
func ComparabilityOf(m *Manifest) Comparability {
	return Comparability{
		SpecSHA256: m.SpecSHA256, CutoffUTC: m.CutoffUTC, BaseBundleSHA256: m.Artifacts.BaseBundleSHA256,
		OraclePackSHA256: m.Artifacts.OraclePackSHA256, GitVersion: m.Construction.GitVersion,
		BundleFormatVersion: string(m.Construction.BundleFormatVersion), HashAlgorithm: m.Construction.HashAlgorithm,
	}
}

// RunRecord is a run record (Distribution §7), JSON. IsolationCheck and
// SealProbe are the sandbox's records as it wrote them.
type RunRecord struct {
	Type            string             `json:"type"`
	CaseID          string             `json:"case_id"`
	ManifestSHA256  string             `json:"manifest_sha256"`
	IndexVersion    int64              `json:"index_version"`
	IndexRoot       string             `json:"index_root"`
	RetirementCheck RetirementCheck    `json:"retirement_check"`
	SealProbe       json.RawMessage    `json:"seal_probe"`
	IsolationCheck  json.RawMessage    `json:"isolation_check"`
	Candidate       Candidate          `json:"candidate"`
	Scores          map[string]float64 `json:"scores"`
	TerminalState   string             `json:"terminal_state"`
	Artifacts       []Artifact         `json:"artifacts"`
	StartedUTC      string             `json:"started_utc"`
	FinishedUTC     string             `json:"finished_utc"`
	Comparability   Comparability      `json:"comparability"`
	// IndexProof is the C2SP tlog-proof of the case's index entry against
	// the checkpoint the run consulted (index_version, index_root): the
	// by-value link between the record and the signed index.
	IndexProof string `json:"index_proof"`
	// Reason says why the run ended in its terminal state, in words.
	Reason string `json:"reason"`
}

// RetirementCheck is the index state the runner saw before the run.
type RetirementCheck struct {
	State     string `json:"state"`
	CheckedAt string `json:"checked_at"`
}

// Candidate names the system under evaluation.
type Candidate struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// Artifact is one file the run produced and its sha256.
type Artifact struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

var recordFields = []string{"type", "case_id", "manifest_sha256", "index_version", "index_root", "retirement_check",
	"seal_probe", "isolation_check", "candidate", "scores", "terminal_state", "artifacts", "started_utc",
	"finished_utc", "comparability", "index_proof", "reason"}

var reB64Hash = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9+/]{43}=$`) })

// Encode renders the record as JSON.stringify(v, null, 1) bytes, read back
// through the strict reader first (so what is signed is evidence).
func (r *RunRecord) Encode() ([]byte, error) {
	j, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	v, err := evidence.Read(j)
	if err != nil {
		return nil, err
	}
	b, err := evidence.Stringify(v, " ")
	if err != nil {
		return nil, err
	}
	if _, err := ReadRecord(RecordFile, b); err != nil {
		return nil, fmt.Errorf("record written does not read back: %w", err)
	}
	return b, nil
}

// ReadRecord reads a run record strictly (evidence.Read, then the closed
// field set and value rules).
func ReadRecord(file string, b []byte) (*RunRecord, error) {
	v, err := evidence.Read(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	c := &checker{file: file}
	o := c.object("", v, recordFields, nil)
	if o == nil {
		return nil, c.errs
	}
	if t, _ := o.Get("type"); t != RecordType {
		c.fail("/type", "must be %q", RecordType)
	}
	c.str(o, "", "case_id", reCaseID())
	c.str(o, "", "manifest_sha256", reSHA256())
	c.str(o, "", "index_root", reB64Hash())
	c.str(o, "", "terminal_state", nil, runStates...)
	c.str(o, "", "started_utc", reUTC())
	c.str(o, "", "finished_utc", reUTC())
	if x, ok := o.Get("index_version"); ok {
		if f, isNum := x.(float64); !isNum || f != float64(int64(f)) || f < 1 {
			c.fail("/index_version", "must be an integer ≥ 1")
		}
	}
	if x, ok := o.Get("retirement_check"); ok {
		t := c.object("/retirement_check", x, []string{"state", "checked_at"}, nil)
		c.str(t, "/retirement_check", "state", nil, "active")
		c.str(t, "/retirement_check", "checked_at", reUTC())
	}
	if x, ok := o.Get("candidate"); ok {
		t := c.object("/candidate", x, []string{"provider", "model"}, nil)
		c.str(t, "/candidate", "provider", nil)
		c.str(t, "/candidate", "model", nil)
	}
	if x, ok := o.Get("comparability"); ok {
		t := c.object("/comparability", x, []string{"spec_sha256", "cutoff_utc", "base_bundle_sha256", "oracle_pack_sha256", "git_version", "bundle_format_version", "hash_algorithm"}, nil)
		for _, f := range []string{"spec_sha256", "base_bundle_sha256", "oracle_pack_sha256"} {
			c.str(t, "/comparability", f, reSHA256())
		}
		c.str(t, "/comparability", "cutoff_utc", reUTC())
		c.str(t, "/comparability", "git_version", nil)
		c.str(t, "/comparability", "bundle_format_version", nil)
		c.str(t, "/comparability", "hash_algorithm", nil)
	}
	if x, ok := o.Get("scores"); ok {
		if s, isObj := x.(*evidence.Object); !isObj {
			c.fail("/scores", "must be an object")
		} else {
			for _, n := range s.Names() {
				if f, _ := s.Get(n); f == nil {
					c.fail("/scores/"+n, "must be a number")
				} else if _, isNum := f.(float64); !isNum {
					c.fail("/scores/"+n, "must be a number")
				}
			}
		}
	}
	if x, ok := o.Get("artifacts"); ok {
		if list, isList := x.([]any); !isList {
			c.fail("/artifacts", "must be an array")
		} else {
			for i, a := range list {
				p := fmt.Sprintf("/artifacts/%d", i)
				t := c.object(p, a, []string{"path", "sha256"}, nil)
				c.str(t, p, "path", nil)
				c.str(t, p, "sha256", reSHA256())
			}
		}
	}
	for _, f := range []string{"seal_probe", "isolation_check"} {
		if x, ok := o.Get(f); ok {
			if _, isObj := x.(*evidence.Object); !isObj && x != nil {
				c.fail("/"+f, "must be an object or null")
			}
		}
	}
	if x, ok := o.Get("index_proof"); ok {
		if s, isStr := x.(string); !isStr || !strings.HasPrefix(s, ProofHeader+"\n") {
			c.fail("/index_proof", "must be a tlog-proof")
		}
	}
	if x, ok := o.Get("reason"); ok {
		if _, isStr := x.(string); !isStr {
			c.fail("/reason", "must be a string")
		}
	}
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	r := new(RunRecord)
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return r, nil
}

// Checks of a run record.
const (
	CheckRecordSignature = "record-signature"
	CheckRecordRules     = "record-rules"
	CheckRecordIndex     = "record-index"
	CheckRecordSummary   = "record-summary"
	CheckRecordSpec      = "record-spec"
)

// WriteRecord signs the record (namespace amber-run-record@cleanroom) and
// writes run.json and run.json.sig into dir.
func WriteRecord(dir string, r *RunRecord, signer *sign.Signer) ([]byte, error) {
	b, err := r.Encode()
	if err != nil {
		return nil, err
	}
	if err := writeSigned(filepath.Join(dir, RecordFile), b, signer, sign.NamespaceRunRecord); err != nil {
		return nil, err
	}
	return b, nil
}

// RecordSignatureChecks names the checks a successful VerifyRecordSignature
// has passed, for the reports of its callers (a new slice each call).
func RecordSignatureChecks() []string { return []string{CheckRecordSignature, CheckRecordRules} }

// VerifyRecordSignature checks a record file against its detached
// signature and then reads it; its checks are RecordSignatureChecks.
func VerifyRecordSignature(path string, pub ssh.PublicKey) (*RunRecord, error) {
	b, err := readSigned(path, maxRecord, pub, sign.NamespaceRunRecord, CheckRecordSignature)
	if err != nil {
		return nil, err
	}
	r, err := ReadRecord(path, b)
	if err != nil {
		return nil, &CheckError{Check: CheckRecordRules, File: path, Err: err}
	}
	return r, nil
}

// ByValueReport is what an external consumer established.
type ByValueReport struct {
	Record     *RunRecord
	Entry      *Entry
	Summary    *Summary
	SpecPinned bool
	Passed     []string
}

// VerifyRecordByValue is the external consumer's check (§7.1): the
// record's signature (producer key); spec_sha256 by possession of the spec
// file (when given); the bundle and oracle hashes by value — the record's
// embedded tlog-proof must verify against the index key, at the
// index_version and index_root the record cites, and its entry must name
// the same manifest, bundle, oracle, spec and cutoff; and, when a signed
// summary is given, the summary must agree too.
func VerifyRecordByValue(recordPath string, producer ssh.PublicKey, indexVKey, summaryPath, specPath string) (*ByValueReport, error) {
	rep := &ByValueReport{}
	r, err := VerifyRecordSignature(recordPath, producer)
	if err != nil {
		return rep, err
	}
	rep.Record = r
	rep.Passed = append(rep.Passed, RecordSignatureChecks()...)
	fail := func(check string, err error) (*ByValueReport, error) {
		return rep, &CheckError{Check: check, File: recordPath, Err: err}
	}
	p, err := VerifyProof([]byte(r.IndexProof), indexVKey)
	if err != nil {
		return fail(CheckRecordIndex, err)
	}
	root := p.Checkpoint.Root
	if p.Checkpoint.Size != r.IndexVersion || encodeB64(root[:]) != r.IndexRoot {
		return fail(CheckRecordIndex, fmt.Errorf("%w: proof checkpoint %d %s, record cites %d %s", errMismatch, p.Checkpoint.Size, encodeB64(root[:]), r.IndexVersion, r.IndexRoot))
	}
	e := p.Entry
	cmp := r.Comparability
	if e.CaseID != r.CaseID || e.ManifestSHA256 != r.ManifestSHA256 || e.BaseBundleSHA256 != cmp.BaseBundleSHA256 ||
		e.OraclePackSHA256 != cmp.OraclePackSHA256 || e.SpecSHA256 != cmp.SpecSHA256 || e.CutoffUTC != cmp.CutoffUTC {
		return fail(CheckRecordIndex, fmt.Errorf("%w: the signed index entry names other hashes than the record", errMismatch))
	}
	if e.Retired() {
		return fail(CheckRecordIndex, fmt.Errorf("%w: the entry the record cites is a retirement", errRetired))
	}
	rep.Entry = e
	rep.Passed = append(rep.Passed, CheckRecordIndex)
	if summaryPath != "" {
		s, _, err := VerifySummary(summaryPath, producer)
		if err != nil {
			return rep, err
		}
		if s.CaseID != r.CaseID || s.ManifestSHA256 != r.ManifestSHA256 || s.comparability() != r.Comparability {
			return fail(CheckRecordSummary, fmt.Errorf("%w: the signed summary names other values than the record", errMismatch))
		}
		rep.Summary = s
		rep.Passed = append(rep.Passed, CheckRecordSummary)
	}
	if specPath != "" {
		sum, err := PinFile(specPath)
		if err != nil {
			return fail(CheckRecordSpec, err)
		}
		if sum != cmp.SpecSHA256 {
			return fail(CheckRecordSpec, fmt.Errorf("%w: spec file sha256 %s, record %s", errMismatch, sum, cmp.SpecSHA256))
		}
		rep.SpecPinned = true
		rep.Passed = append(rep.Passed, CheckRecordSpec)
	}
	return rep, nil
}

// LoadRecordFile reads a run record file strictly (no signature check).
func LoadRecordFile(path string) (*RunRecord, error) {
	b, err := readCapped(path, maxRecord)
	if err != nil {
		return nil, err
	}
	return ReadRecord(path, b)
}
