package fleet

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/internal/ident"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The rules a run list can break; every refusal wraps one of them.
var (
	errRunShape     = errors.New("run list shape")     // not an array of closed run objects
	errName         = errors.New("run name")           // not a DNS-1123 label of at most 63 characters
	errDuplicateRun = errors.New("duplicate run name") // two runs would be one Job
	errKind         = errors.New("run kind")           // neither blind nor amber, or the other kind's identities
	errIdentity     = errors.New("pinned identity")    // srel, bpkg or the case manifest sha256 is not 64 lowercase hex
	errCandidate    = errors.New("candidate")          // empty or not a label
	errImage        = errors.New("image not pinned")   // the image is not named by digest
	errCommand      = errors.New("command")            // empty, or an empty argv[0]
	errRuntimeClass = errors.New("runtime class")      // neither runc nor gvisor
	errAllowlist    = errors.New("allowlist entry")    // not IP:PORT of a unicast address
	errLimits       = errors.New("resource limits")    // missing, unparsable or not positive
	errClaim        = errors.New("results claim")      // not a DNS-1123 subdomain
)

// Kinds of run.
const (
	KindBlind = "blind" // a blind implementation run: release srel + package bpkg + candidate
	KindAmber = "amber" // an AMBER case run: case manifest sha256 + candidate
)

// RuntimeClasses are the runtime class names a run may ask for: the OCI
// runtime the node runs the pod with (runc, or gVisor's runsc registered
// as "gvisor"). The operator creates the RuntimeClass objects.
var RuntimeClasses = []string{"runc", "gvisor"}

// Run is one planned run: what it is pinned to, what runs it, where.
type Run struct {
	Name               string     `json:"name"`
	Kind               string     `json:"kind"`
	Srel               string     `json:"srel,omitempty"`
	Bpkg               string     `json:"bpkg,omitempty"`
	CaseManifestSHA256 string     `json:"case_manifest_sha256,omitempty"`
	Candidate          string     `json:"candidate"`
	Image              string     `json:"image"`
	Command            []string   `json:"command"`
	RuntimeClass       string     `json:"runtime_class"`
	Allow              []Endpoint `json:"allow"`
	Limits             Limits     `json:"limits"`
	ResultsClaim       string     `json:"results_claim,omitempty"`
	// Digest is the SHA-256 of the run's object in canonical JSON
	// (RFC 8785): it is written on the Job, so a collected result can be
	// matched to the exact planned run.
	Digest string `json:"run_sha256"`
	// PlanSHA256 is the SHA-256 of the whole run list's bytes (the plan's
	// runs.json): with the name and Digest it is the run's plan entry, which
	// its Job hands to `cleanroom fleet bind` and collect requires back.
	PlanSHA256 string `json:"plan_sha256"`
}

// Endpoint is one allowlisted destination: a TCP address and port.
type Endpoint struct {
	Addr netip.Addr
	Port uint16
}

func (e Endpoint) String() string { return netip.AddrPortFrom(e.Addr, e.Port).String() }

// MarshalText renders IP:PORT.
func (e Endpoint) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// Limits are the resources a run may use (requests equal limits).
type Limits struct {
	CPU              resource.Quantity `json:"cpu"`
	Memory           resource.Quantity `json:"memory"`
	EphemeralStorage resource.Quantity `json:"ephemeral_storage"`
	DeadlineSeconds  int64             `json:"deadline_seconds"`
}

// RunListError is a refusal of a run list: the file, the JSON Pointer of
// the offending value, the rule (errors.Is) and what was wrong.
type RunListError struct {
	File    string
	Pointer string
	Rule    error
	Detail  string
}

func (e *RunListError) Error() string {
	return fmt.Sprintf("%s: %s: %v: %s", e.File, e.Pointer, e.Rule, e.Detail)
}

func (e *RunListError) Unwrap() error { return e.Rule }

// FaultClass is Refused (internal/fault): a run list was read and breaks a
// rule.
func (*RunListError) FaultClass() fault.Class { return fault.Refused }

// The shapes are compiled on first use, not at start-up: every start of the
// binary (the room's stages too) would otherwise pay for them.
var (
	// A candidate is a label: a blind run's implementation name or an AMBER
	// run's provider/model.
	reCandidate = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/+-]{0,252}$`) })
	// An image pinned by digest: whatever the registry serves under a tag
	// can change, a digest cannot.
	reImage = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._:/-]*@sha256:[0-9a-f]{64}$`) })
)

// Members of a run object, by kind; any other member is refused (a closed
// shape: a misspelt limit must not silently become no limit).
var (
	commonMembers   = []string{"name", "kind", "candidate", "image", "command", "runtime_class", "allow", "limits", "results_claim"}
	requiredMembers = []string{"name", "kind", "candidate", "image", "command", "runtime_class", "limits"}
	limitMembers    = []string{"cpu", "memory", "ephemeral_storage", "deadline_seconds"}
	kindMembers     = map[string][]string{KindBlind: {"srel", "bpkg"}, KindAmber: {"case_manifest_sha256"}}
	identityPrefix  = map[string]string{"srel": experiment.SrelPrefix, "bpkg": pkgwalk.IDPrefix, "case_manifest_sha256": ""}
)

// ParseRuns reads a run list (a JSON array of run objects) through the
// strict evidence reader and checks every rule; file names the input in
// refusals. It refuses the whole list at the first broken rule.
func ParseRuns(b []byte, file string) ([]Run, error) {
	v, err := evidence.Read(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, &RunListError{file, "", errRunShape, "want a JSON array of runs"}
	}
	if len(arr) == 0 {
		return nil, &RunListError{file, "", errRunShape, "the list has no runs"}
	}
	runs := make([]Run, 0, len(arr))
	seen := map[string]int{}
	plan := pkgwalk.SHA256Hex(b)
	for i, rv := range arr {
		ptr := fmt.Sprintf("/%d", i)
		r, err := parseRun(rv, file, ptr)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[r.Name]; dup {
			return nil, &RunListError{file, ptr + "/name", errDuplicateRun, fmt.Sprintf("%q is also run /%d", r.Name, j)}
		}
		seen[r.Name] = i
		r.PlanSHA256 = plan
		runs = append(runs, r)
	}
	return runs, nil
}

func parseRun(v any, file, ptr string) (Run, error) {
	var r Run
	refuse := func(member string, rule error, format string, a ...any) (Run, error) {
		p := ptr
		if member != "" {
			p += "/" + member
		}
		return Run{}, &RunListError{file, p, rule, fmt.Sprintf(format, a...)}
	}
	o, ok := v.(*evidence.Object)
	if !ok {
		return refuse("", errRunShape, "a run is a JSON object")
	}
	kind, _ := o.Get("kind")
	r.Kind, _ = kind.(string)
	extra, ok := kindMembers[r.Kind]
	if !ok {
		return refuse("kind", errKind, "want %q or %q", KindBlind, KindAmber)
	}
	allowed := append(slices.Clone(commonMembers), extra...)
	for _, n := range o.Names() {
		if !slices.Contains(allowed, n) {
			if slices.Contains(kindMembers[KindBlind], n) || slices.Contains(kindMembers[KindAmber], n) {
				return refuse(n, errKind, "a %s run does not carry %s", r.Kind, n)
			}
			return refuse(n, errRunShape, "unknown member")
		}
	}
	for _, n := range append(slices.Clone(requiredMembers), extra...) {
		if !o.Has(n) {
			return refuse(n, errRunShape, "missing")
		}
	}
	str := func(n string) (string, error) {
		x, _ := o.Get(n)
		s, ok := x.(string)
		if !ok {
			_, err := refuse(n, errRunShape, "want a string")
			return "", err
		}
		return s, nil
	}
	var err error
	if r.Name, err = str("name"); err != nil {
		return Run{}, err
	}
	// The name becomes the Job's name and its pods' job-name label: a
	// DNS-1123 label (at most 63 characters) is what both accept.
	if errs := validation.IsDNS1123Label(r.Name); len(errs) > 0 {
		return refuse("name", errName, "%q: %s", r.Name, strings.Join(errs, "; "))
	}
	for _, n := range extra {
		s, err := str(n)
		if err != nil {
			return Run{}, err
		}
		// The identities as their records write them: srel-<hex>,
		// bpkg-<hex>, and the case manifest's bare sha256.
		prefix := identityPrefix[n]
		if !ident.Is(prefix, s) {
			return refuse(n, errIdentity, "%q: want %q followed by 64 lowercase hex digits", s, prefix)
		}
		switch n {
		case "srel":
			r.Srel = s
		case "bpkg":
			r.Bpkg = s
		case "case_manifest_sha256":
			r.CaseManifestSHA256 = s
		}
	}
	if r.Candidate, err = str("candidate"); err != nil {
		return Run{}, err
	}
	if !reCandidate().MatchString(r.Candidate) {
		return refuse("candidate", errCandidate, "%q is not a label", r.Candidate)
	}
	if r.Image, err = str("image"); err != nil {
		return Run{}, err
	}
	if !reImage().MatchString(r.Image) {
		return refuse("image", errImage, "%q: want NAME@sha256:<64 hex>", r.Image)
	}
	cmdv, _ := o.Get("command")
	cmd, ok := cmdv.([]any)
	if !ok || len(cmd) == 0 {
		return refuse("command", errCommand, "want a non-empty array of strings")
	}
	for i, a := range cmd {
		s, ok := a.(string)
		if !ok || (i == 0 && s == "") {
			return refuse(fmt.Sprintf("command/%d", i), errCommand, "want a string (argv[0] non-empty)")
		}
		r.Command = append(r.Command, s)
	}
	if r.RuntimeClass, err = str("runtime_class"); err != nil {
		return Run{}, err
	}
	if !slices.Contains(RuntimeClasses, r.RuntimeClass) {
		return refuse("runtime_class", errRuntimeClass, "%q: want one of %v", r.RuntimeClass, RuntimeClasses)
	}
	r.Allow = []Endpoint{}
	if av, ok := o.Get("allow"); ok {
		arr, ok := av.([]any)
		if !ok {
			return refuse("allow", errRunShape, "want an array of IP:PORT strings")
		}
		for i, a := range arr {
			s, _ := a.(string)
			ep, err := parseEndpoint(s)
			if err != nil {
				return refuse(fmt.Sprintf("allow/%d", i), errAllowlist, "%q: %v", s, err)
			}
			if slices.Contains(r.Allow, ep) {
				return refuse(fmt.Sprintf("allow/%d", i), errAllowlist, "%s is listed twice", ep)
			}
			r.Allow = append(r.Allow, ep)
		}
	}
	if r.Limits, err = parseLimits(o, file, ptr+"/limits"); err != nil {
		return Run{}, err
	}
	if o.Has("results_claim") {
		if r.ResultsClaim, err = str("results_claim"); err != nil {
			return Run{}, err
		}
		if errs := validation.IsDNS1123Subdomain(r.ResultsClaim); len(errs) > 0 {
			return refuse("results_claim", errClaim, "%q: %s", r.ResultsClaim, strings.Join(errs, "; "))
		}
	}
	canon, err := evidence.Canonical(o)
	if err != nil {
		return refuse("", errRunShape, "%v", err)
	}
	r.Digest = pkgwalk.SHA256Hex(canon)
	return r, nil
}

// parseEndpoint accepts IP:PORT (IPv6 in brackets) of a unicast address:
// a NetworkPolicy ipBlock is an address range, never a host name, and an
// unspecified, multicast or loopback address is no destination to allow.
func parseEndpoint(s string) (Endpoint, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return Endpoint{}, fmt.Errorf("want IP:PORT (no host names: a NetworkPolicy matches addresses)")
	}
	a := ap.Addr()
	if a.Zone() != "" || a.Is4In6() {
		return Endpoint{}, errors.New("a zoned or IPv4-mapped address")
	}
	if !a.IsGlobalUnicast() && !a.IsPrivate() {
		return Endpoint{}, errors.New("not a unicast destination")
	}
	if ap.Port() == 0 {
		return Endpoint{}, errors.New("port 0")
	}
	return Endpoint{Addr: a, Port: ap.Port()}, nil
}

func parseLimits(o *evidence.Object, file, ptr string) (Limits, error) {
	var l Limits
	refuse := func(member string, rule error, format string, a ...any) (Limits, error) {
		p := ptr
		if member != "" {
			p += "/" + member
		}
		return Limits{}, &RunListError{file, p, rule, fmt.Sprintf(format, a...)}
	}
	v, _ := o.Get("limits")
	lo, ok := v.(*evidence.Object)
	if !ok {
		return refuse("", errRunShape, "want an object")
	}
	for _, n := range lo.Names() {
		if !slices.Contains(limitMembers, n) {
			return refuse(n, errRunShape, "unknown member")
		}
	}
	for _, n := range limitMembers {
		x, ok := lo.Get(n)
		if !ok {
			return refuse(n, errLimits, "missing (every run is bounded)")
		}
		if n == "deadline_seconds" {
			f, ok := x.(float64)
			if !ok || f != math.Trunc(f) || f < 1 || f > 7*24*3600 {
				return refuse(n, errLimits, "want an integer number of seconds in [1, 604800]")
			}
			l.DeadlineSeconds = int64(f)
			continue
		}
		s, ok := x.(string)
		if !ok {
			return refuse(n, errLimits, "want a Kubernetes quantity string")
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return refuse(n, errLimits, "%q: %v", s, err)
		}
		if q.Sign() <= 0 {
			return refuse(n, errLimits, "%q is not positive", s)
		}
		switch n {
		case "cpu":
			l.CPU = q
		case "memory":
			l.Memory = q
		case "ephemeral_storage":
			l.EphemeralStorage = q
		}
	}
	return l, nil
}
