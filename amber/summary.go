package amber

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cleanroom-dev/cleanroom/sign"
	"golang.org/x/crypto/ssh"
)

// Summary files.
const (
	SummaryFile    = "summary.yaml"
	SummarySigFile = "summary.yaml.sig"
)

// Summary is the redacted manifest summary (Distribution §5.1): exactly
// these keys, in the upstream validator's spelling. It is built field by
// field from a verified manifest and the index, so nothing else can be
// copied into it.
type Summary struct {
	CaseID           string       `yaml:"case_id" json:"case_id"`
	ManifestSHA256   string       `yaml:"manifest_sha256" json:"manifest_sha256"`
	BaseBundleSHA256 string       `yaml:"base_bundle_sha256" json:"base_bundle_sha256"`
	OraclePackSHA256 string       `yaml:"oracle_pack_sha256" json:"oracle_pack_sha256"`
	SpecSHA256       string       `yaml:"spec_sha256" json:"spec_sha256"`
	ProtocolSHA256   string       `yaml:"protocol_sha256" json:"protocol_sha256"`
	CutoffUTC        string       `yaml:"cutoff_utc" json:"cutoff_utc"`
	Profile          string       `yaml:"profile" json:"profile"`
	IsolationClass   string       `yaml:"isolation_class" json:"isolation_class"`
	Construction     Construction `yaml:"construction" json:"construction"`
	Producer         Producer     `yaml:"producer" json:"producer"`
	Retirement       Retirement   `yaml:"retirement" json:"retirement"`
	IndexVersion     int64        `yaml:"index_version" json:"index_version"`
}

var summaryFields = []string{"case_id", "manifest_sha256", "base_bundle_sha256", "oracle_pack_sha256", "spec_sha256",
	"protocol_sha256", "cutoff_utc", "profile", "isolation_class", "construction", "producer", "retirement", "index_version"}

// NewSummary builds the summary of a verified manifest whose entry is in a
// verified index. The retirement state is the index's (the latest entry of
// the case), and index_version the size of the checkpoint carrying it.
func NewSummary(m *Manifest, manifestSHA256 string, ix *Index) (*Summary, error) {
	e, _, ok := ix.Latest(m.CaseID)
	if !ok {
		return nil, fmt.Errorf("%q: %w", m.CaseID, errNotIndexed)
	}
	if e.ManifestSHA256 != manifestSHA256 || e.BaseBundleSHA256 != m.Artifacts.BaseBundleSHA256 ||
		e.OraclePackSHA256 != m.Artifacts.OraclePackSHA256 || e.SpecSHA256 != m.SpecSHA256 || e.CutoffUTC != m.CutoffUTC {
		return nil, fmt.Errorf("%w: the index entry of %q names other hashes than the manifest", errMismatch, m.CaseID)
	}
	ret := Retirement{State: "active"}
	if d, ok := strings.CutPrefix(e.State, "retired:"); ok {
		ret = Retirement{State: "retired", Date: &d}
	}
	return &Summary{
		CaseID: m.CaseID, ManifestSHA256: manifestSHA256,
		BaseBundleSHA256: m.Artifacts.BaseBundleSHA256, OraclePackSHA256: m.Artifacts.OraclePackSHA256,
		SpecSHA256: m.SpecSHA256, ProtocolSHA256: m.ProtocolSHA256, CutoffUTC: m.CutoffUTC,
		Profile: m.Profile, IsolationClass: m.Eligibility.IsolationClass,
		Construction: m.Construction,
		Producer:     m.Producer,
		Retirement:   ret,
		IndexVersion: ix.Checkpoint.Size,
	}, nil
}

// Encode writes the summary as YAML (2-space indent).
func (s *Summary) Encode() ([]byte, error) { return encodeYAML(s) }

// WriteSummary encodes, signs (namespace amber-summary@cleanroom) and writes
// summary.yaml and summary.yaml.sig into dir, each atomically.
func WriteSummary(dir string, s *Summary, signer *sign.Signer) ([]byte, error) {
	b, err := s.Encode()
	if err != nil {
		return nil, err
	}
	if _, err := ReadSummary(SummaryFile, b); err != nil {
		return nil, fmt.Errorf("summary written does not read back: %w", err)
	}
	if err := writeSigned(filepath.Join(dir, SummaryFile), b, signer, sign.NamespaceSummary); err != nil {
		return nil, err
	}
	return b, nil
}

// ReadSummary reads a summary strictly: exactly the closed field set, the
// closed construction and producer blocks, lowercase sha256 values, the UTC
// cutoff, the isolation enum, an integer index_version.
func ReadSummary(file string, b []byte) (*Summary, error) {
	o, err := readYAML(file, b)
	if err != nil {
		return nil, err
	}
	c := &checker{file: file}
	c.object("", o, summaryFields, nil)
	c.str(o, "", "case_id", reCaseID())
	for _, f := range []string{"manifest_sha256", "base_bundle_sha256", "oracle_pack_sha256", "spec_sha256", "protocol_sha256"} {
		c.str(o, "", f, reSHA256())
	}
	c.str(o, "", "cutoff_utc", reUTC())
	c.str(o, "", "profile", nil)
	c.str(o, "", "isolation_class", nil, FullIsolation, Allowlisted)
	if v, ok := o.Get("construction"); ok {
		c.construction("/construction", v)
	}
	if v, ok := o.Get("producer"); ok {
		c.producer("/producer", v)
	}
	if v, ok := o.Get("retirement"); ok {
		c.retirement("/retirement", v)
	}
	if v, ok := o.Get("index_version"); ok {
		if f, isNum := v.(float64); !isNum || f != float64(int64(f)) || f < 0 {
			c.fail("/index_version", "must be an integer ≥ 0")
		}
	}
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	s := new(Summary)
	if err := decodeChecked(o, s); err != nil {
		return nil, &YAMLError{File: file, Err: err}
	}
	return s, nil
}

// VerifySummary checks summary.yaml in dir against its signature (verify,
// then parse) and returns it.
func VerifySummary(path string, pub ssh.PublicKey) (*Summary, []byte, error) {
	b, err := readSigned(path, MaxYAML, pub, sign.NamespaceSummary, CheckSummarySignature)
	if err != nil {
		return nil, nil, err
	}
	s, err := ReadSummary(path, b)
	if err != nil {
		return nil, nil, &CheckError{Check: CheckSummaryRules, File: path, Err: err}
	}
	return s, b, nil
}

// Checks of a summary.
const (
	CheckSummarySignature = "summary-signature"
	CheckSummaryRules     = "summary-rules"
)

// summaryValue is the plain view used by compare.
func (s *Summary) comparability() Comparability {
	return Comparability{
		SpecSHA256: s.SpecSHA256, CutoffUTC: s.CutoffUTC, BaseBundleSHA256: s.BaseBundleSHA256,
		OraclePackSHA256: s.OraclePackSHA256, GitVersion: s.Construction.GitVersion,
		BundleFormatVersion: string(s.Construction.BundleFormatVersion), HashAlgorithm: s.Construction.HashAlgorithm,
	}
}
