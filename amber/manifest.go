package amber

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"sync"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/internal/ident"
	"go.yaml.in/yaml/v3"
)

// SchemaVersion is the upstream manifest schema this package writes.
const SchemaVersion = "amber-manifest-0.1"

// Manifest is an amber-manifest-0.1 Case Manifest: exactly the upstream
// schema's fields, in its order. It is written with 2-space indentation and
// every timestamp as a quoted string.
type Manifest struct {
	SchemaVersion                string         `yaml:"schema_version" json:"schema_version"`
	CaseID                       string         `yaml:"case_id" json:"case_id"`
	Profile                      string         `yaml:"profile" json:"profile"`
	Provenance                   map[string]any `yaml:"provenance" json:"provenance"`
	CutoffUTC                    string         `yaml:"cutoff_utc" json:"cutoff_utc"`
	CutoffCommit                 string         `yaml:"cutoff_commit" json:"cutoff_commit"`
	TimeToTopology               TimeToTopology `yaml:"time_to_topology" json:"time_to_topology"`
	CutoffRule                   CutoffRule     `yaml:"cutoff_rule" json:"cutoff_rule"`
	SpecSHA256                   string         `yaml:"spec_sha256" json:"spec_sha256"`
	ProtocolSHA256               string         `yaml:"protocol_sha256" json:"protocol_sha256"`
	Artifacts                    Artifacts      `yaml:"artifacts" json:"artifacts"`
	Construction                 Construction   `yaml:"construction" json:"construction"`
	CandidateInputBundle         string         `yaml:"candidate_input_bundle" json:"candidate_input_bundle"`
	AvailableInformationManifest string         `yaml:"available_information_manifest" json:"available_information_manifest"`
	Eligibility                  Eligibility    `yaml:"eligibility" json:"eligibility"`
	Producer                     Producer       `yaml:"producer" json:"producer"`
	LeakCheck                    LeakCheck      `yaml:"leak_check" json:"leak_check"`
	Retirement                   Retirement     `yaml:"retirement" json:"retirement"`
}

// TimeToTopology is the rule mapping the cutoff instant to a point in the
// source topology, and its evidence class (Distribution §3.2).
type TimeToTopology struct {
	Rule          string `yaml:"rule" json:"rule"`
	EvidenceClass string `yaml:"evidence_class" json:"evidence_class"`
}

// CutoffRule is the preregistered cutoff rule and the sha256 of its
// script output.
type CutoffRule struct {
	Rule               string `yaml:"rule" json:"rule"`
	ScriptOutputSHA256 string `yaml:"script_output_sha256" json:"script_output_sha256"`
}

// Artifacts holds the sha256 of base.bundle and oracle.pack.
type Artifacts struct {
	BaseBundleSHA256 string `yaml:"base_bundle_sha256" json:"base_bundle_sha256"`
	OraclePackSHA256 string `yaml:"oracle_pack_sha256" json:"oracle_pack_sha256"`
}

// Construction holds the bundle construction parameters (Distribution §3.1).
type Construction struct {
	GitVersion          string        `yaml:"git_version" json:"git_version"`
	BundleFormatVersion FormatVersion `yaml:"bundle_format_version" json:"bundle_format_version"`
	HashAlgorithm       string        `yaml:"hash_algorithm" json:"hash_algorithm"`
	BundleSize          int64         `yaml:"bundle_size" json:"bundle_size"`
}

// FormatVersion is bundle_format_version: the schema allows an integer or a
// string. cleanroom writes the integer; it reads either and compares the
// text.
type FormatVersion string

// MarshalYAML writes a numeric version as a YAML integer.
func (v FormatVersion) MarshalYAML() (any, error) {
	if i, err := strconv.Atoi(string(v)); err == nil {
		return i, nil
	}
	return string(v), nil
}

// UnmarshalJSON reads an integer or a string.
func (v *FormatVersion) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*v = FormatVersion(s)
		return nil
	}
	var i int64
	if err := json.Unmarshal(b, &i); err != nil {
		return fmt.Errorf("bundle_format_version: not an integer or a string")
	}
	*v = FormatVersion(strconv.FormatInt(i, 10))
	return nil
}

// MarshalJSON writes a numeric version as a JSON number.
func (v FormatVersion) MarshalJSON() ([]byte, error) {
	if i, err := strconv.Atoi(string(v)); err == nil {
		return json.Marshal(i)
	}
	return json.Marshal(string(v))
}

// Eligibility is the isolation class, its evidence class and the egress
// allowlist (empty under full_isolation).
type Eligibility struct {
	IsolationClass  string   `yaml:"isolation_class" json:"isolation_class"`
	EvidenceClass   string   `yaml:"evidence_class" json:"evidence_class"`
	EgressAllowlist []string `yaml:"egress_allowlist" json:"egress_allowlist"`
}

// Producer names the producer and the key that signs the manifest
// (signing_key_id: the SHA256 fingerprint as ssh-keygen -l prints it).
type Producer struct {
	Identity     string `yaml:"identity" json:"identity"`
	SigningKeyID string `yaml:"signing_key_id" json:"signing_key_id"`
}

// LeakCheck is the leak-check procedure, its last run date and result.
type LeakCheck struct {
	Procedure   string `yaml:"procedure" json:"procedure"`
	LastRunDate string `yaml:"last_run_date" json:"last_run_date"`
	Result      string `yaml:"result" json:"result"`
}

// Retirement is the retirement state and, once retired, its date.
type Retirement struct {
	State string  `yaml:"state" json:"state"`
	Date  *string `yaml:"date" json:"date"`
}

// Isolation classes (Distribution §5.2).
const (
	FullIsolation = "full_isolation"
	Allowlisted   = "allowlisted"
)

// Encode writes m as manifest.yaml bytes: go.yaml.in/yaml/v3, 2-space
// indent, struct order. Strings that YAML would read as another type
// (timestamps, numbers, booleans) come out quoted.
func (m *Manifest) Encode() ([]byte, error) {
	return encodeYAML(m)
}

func encodeYAML(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	return b.Bytes(), nil
}

// Rules a manifest's values can break, beyond the YAML reading.
var (
	errManifestField = fault.New(fault.Refused, "manifest field breaks the amber-manifest-0.1 rules")
)

// FieldError names a field (JSON Pointer) and the rule it breaks.
type FieldError struct {
	File    string
	Pointer string
	Rule    string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.File, e.Pointer, e.Rule)
}

func (e *FieldError) Unwrap() error { return errManifestField }

// FieldErrors lists every field problem of one document.
type FieldErrors []*FieldError

func (es FieldErrors) Error() string {
	var b bytes.Buffer
	for i, e := range es {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

func (es FieldErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// The field shapes are compiled on first use, not at start-up: every start
// of the binary (the room's sealed stages too) would otherwise pay for them.
var (
	reCaseID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })
	reUTC    = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$`)
	})
	reCommit   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{7,64}$`) })
	reDateTime = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}(T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z)?$`)
	})
)

// shape is what a string field must match: a regexp, or sha256Hex.
type shape interface {
	MatchString(s string) bool
	String() string
}

// sha256Hex is the sha256 shape (64 lowercase hex), checked without the
// regexp engine (the index checks four per entry).
type sha256Hex struct{}

func (sha256Hex) MatchString(s string) bool { return ident.IsDigest(s) }
func (sha256Hex) String() string            { return `^[0-9a-f]{64}$` }

// reSHA256 is the sha256 shape, spelled like the regexp shapes.
func reSHA256() shape { return sha256Hex{} }

// checker collects field problems against a closed set of rules.
type checker struct {
	file string
	errs FieldErrors
}

func (c *checker) fail(ptr, rule string, args ...any) {
	c.errs = append(c.errs, &FieldError{File: c.file, Pointer: ptr, Rule: fmt.Sprintf(rule, args...)})
}

// object checks that v is an object with exactly the required names (plus
// optional ones) and returns it, or nil after recording the problems.
func (c *checker) object(ptr string, v any, required, optional []string) *evidence.Object {
	o, ok := v.(*evidence.Object)
	if !ok {
		c.fail(ptr, "must be a mapping")
		return nil
	}
	allowed := map[string]bool{}
	for _, n := range required {
		allowed[n] = true
		if !o.Has(n) {
			c.fail(ptr+"/"+n, "required field missing")
		}
	}
	for _, n := range optional {
		allowed[n] = true
	}
	for _, n := range o.Names() {
		if !allowed[n] {
			c.fail(ptr+"/"+n, "field outside the closed field set")
		}
	}
	return o
}

func (c *checker) str(o *evidence.Object, ptr, name string, re shape, enum ...string) {
	if o == nil {
		return
	}
	v, ok := o.Get(name)
	if !ok {
		return
	}
	s, isStr := v.(string)
	switch {
	case !isStr:
		c.fail(ptr+"/"+name, "must be a string")
	case s == "":
		c.fail(ptr+"/"+name, "must not be empty")
	case re != nil && !re.MatchString(s):
		c.fail(ptr+"/"+name, "must match %s", re)
	case len(enum) > 0 && !contains(enum, s):
		c.fail(ptr+"/"+name, "must be one of %q", enum)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var manifestFields = []string{
	"schema_version", "case_id", "profile", "provenance", "cutoff_utc", "cutoff_commit",
	"time_to_topology", "cutoff_rule", "spec_sha256", "protocol_sha256", "artifacts",
	"construction", "candidate_input_bundle", "available_information_manifest",
	"eligibility", "producer", "leak_check", "retirement",
}

// checkManifest applies the amber-manifest-0.1 rules to a strictly read
// document (the same rules as the upstream schema, plus its validator's
// cross-field rule: full_isolation ⇒ empty egress_allowlist).
func checkManifest(file string, o *evidence.Object) error {
	c := &checker{file: file}
	c.object("", o, manifestFields, nil)
	if v, ok := o.Get("schema_version"); ok && v != SchemaVersion {
		c.fail("/schema_version", "must be %q", SchemaVersion)
	}
	c.str(o, "", "case_id", reCaseID())
	c.str(o, "", "profile", nil)
	if v, ok := o.Get("provenance"); ok {
		if p, isObj := v.(*evidence.Object); !isObj || p.Len() == 0 {
			c.fail("/provenance", "must be a non-empty mapping")
		}
	}
	c.str(o, "", "cutoff_utc", reUTC())
	c.str(o, "", "cutoff_commit", reCommit())
	if v, ok := o.Get("time_to_topology"); ok {
		t := c.object("/time_to_topology", v, []string{"rule", "evidence_class"}, nil)
		c.str(t, "/time_to_topology", "rule", nil)
		c.str(t, "/time_to_topology", "evidence_class", nil)
	}
	if v, ok := o.Get("cutoff_rule"); ok {
		t := c.object("/cutoff_rule", v, []string{"rule", "script_output_sha256"}, nil)
		c.str(t, "/cutoff_rule", "rule", nil)
		c.str(t, "/cutoff_rule", "script_output_sha256", reSHA256())
	}
	c.str(o, "", "spec_sha256", reSHA256())
	c.str(o, "", "protocol_sha256", reSHA256())
	if v, ok := o.Get("artifacts"); ok {
		t := c.object("/artifacts", v, []string{"base_bundle_sha256", "oracle_pack_sha256"}, nil)
		c.str(t, "/artifacts", "base_bundle_sha256", reSHA256())
		c.str(t, "/artifacts", "oracle_pack_sha256", reSHA256())
	}
	if v, ok := o.Get("construction"); ok {
		c.construction("/construction", v)
	}
	c.str(o, "", "candidate_input_bundle", nil)
	c.str(o, "", "available_information_manifest", nil)
	if v, ok := o.Get("eligibility"); ok {
		t := c.object("/eligibility", v, []string{"isolation_class", "evidence_class", "egress_allowlist"}, nil)
		c.str(t, "/eligibility", "isolation_class", nil, FullIsolation, Allowlisted)
		c.str(t, "/eligibility", "evidence_class", nil)
		if t != nil {
			if a, ok := t.Get("egress_allowlist"); ok {
				list, isList := a.([]any)
				if !isList {
					c.fail("/eligibility/egress_allowlist", "must be a sequence")
				}
				seen := map[string]bool{}
				for i, e := range list {
					s, isStr := e.(string)
					switch {
					case !isStr || s == "":
						c.fail(fmt.Sprintf("/eligibility/egress_allowlist/%d", i), "must be a non-empty string")
					case seen[s]:
						c.fail(fmt.Sprintf("/eligibility/egress_allowlist/%d", i), "duplicate entry")
					}
					seen[s] = true
				}
				// Distribution §5.2: full isolation means an empty allowlist.
				if cls, _ := t.Get("isolation_class"); cls == FullIsolation && len(list) > 0 {
					c.fail("/eligibility/egress_allowlist", "must be empty under full_isolation")
				}
			}
		}
	}
	if v, ok := o.Get("producer"); ok {
		c.producer("/producer", v)
	}
	if v, ok := o.Get("leak_check"); ok {
		t := c.object("/leak_check", v, []string{"procedure", "last_run_date", "result"}, nil)
		c.str(t, "/leak_check", "procedure", nil)
		c.str(t, "/leak_check", "last_run_date", reDateTime())
		c.str(t, "/leak_check", "result", nil, "passed", "failed")
	}
	if v, ok := o.Get("retirement"); ok {
		c.retirement("/retirement", v)
	}
	if len(c.errs) > 0 {
		return c.errs
	}
	return nil
}

func (c *checker) construction(ptr string, v any) {
	t := c.object(ptr, v, []string{"git_version", "bundle_format_version", "hash_algorithm", "bundle_size"}, nil)
	c.str(t, ptr, "git_version", nil)
	c.str(t, ptr, "hash_algorithm", nil)
	if t == nil {
		return
	}
	if f, ok := t.Get("bundle_format_version"); ok {
		switch x := f.(type) {
		case string:
		case float64:
			if x != float64(int64(x)) {
				c.fail(ptr+"/bundle_format_version", "must be an integer or a string")
			}
		default:
			c.fail(ptr+"/bundle_format_version", "must be an integer or a string")
		}
	}
	if s, ok := t.Get("bundle_size"); ok {
		x, isNum := s.(float64)
		if !isNum || x != float64(int64(x)) || x < 0 {
			c.fail(ptr+"/bundle_size", "must be an integer ≥ 0")
		}
	}
}

func (c *checker) producer(ptr string, v any) {
	t := c.object(ptr, v, []string{"identity", "signing_key_id"}, nil)
	c.str(t, ptr, "identity", nil)
	c.str(t, ptr, "signing_key_id", nil)
}

func (c *checker) retirement(ptr string, v any) {
	t := c.object(ptr, v, []string{"state"}, []string{"date"})
	c.str(t, ptr, "state", nil, "active", "retired")
	if t == nil {
		return
	}
	if d, ok := t.Get("date"); ok && d != nil {
		if s, isStr := d.(string); !isStr || !reDateTime().MatchString(s) {
			c.fail(ptr+"/date", "must be null or a date matching %s", reDateTime())
		}
	}
}

// ReadManifest reads manifest.yaml bytes strictly and checks every
// amber-manifest-0.1 rule. file labels errors. It does not verify the
// signature: callers that hold a signature verify it over b first.
func ReadManifest(file string, b []byte) (*Manifest, *evidence.Object, error) {
	o, err := readYAML(file, b)
	if err != nil {
		return nil, nil, err
	}
	if err := checkManifest(file, o); err != nil {
		return nil, o, err
	}
	m := new(Manifest)
	if err := decodeChecked(o, m); err != nil {
		return nil, o, &YAMLError{File: file, Err: err}
	}
	return m, o, nil
}

// decodeChecked fills out from an already checked value through its
// canonical JSON, refusing unknown fields (a second guard on the closed set).
func decodeChecked(v any, out any) error {
	j, err := evidence.Canonical(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%w: %w", errYAMLUnknownField, err)
	}
	return nil
}
