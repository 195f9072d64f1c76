package experiment

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/ident"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// RecordType is the type of the run record.
const RecordType = "TRVM-BLIND-IMPLEMENTATION-RUN-v3"

// coreType heads the run_id preimage.
const coreType = "TRVM-BLIND-RUN-CORE-v1"

// The two roles a subject of the experiment can have.
const (
	RoleReference = "reference"
	RoleCandidate = "candidate"
)

// The command placeholders the runner substitutes.
const (
	PlaceholderChallenges = "{{CHALLENGES}}"
	PlaceholderOut        = "{{OUT}}"
)

// labelRE is the implementation label vocabulary: an identifier, never a
// path, because the label names the subject's archived observation file.
var labelRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// ValidLabel reports whether s is a valid implementation label.
func ValidLabel(s string) bool { return labelRE().MatchString(s) }

// Record is the run record TRVM-BLIND-IMPLEMENTATION-RUN-v3
// (governance/blind-run.json, TRVM-FORMATS §5.1).
//
// Its bytes are JSON.stringify(r, null, 1) + "\n" with the members in this
// order: type, status, spec_release_id, blind_package_id,
// instrument_digest, blind_contract_revision, adapters, run_id; each adapter
// implementation, role, command, package_files, package_digest,
// binary_digest, binary_path, environment{toolchain, model, tool_version}.
// The shape is closed: any other member anywhere, or a missing one, is
// refused (errRunShape). There is no forward-compatible extension: a new
// member is a new record type.
type Record struct {
	Type                  string
	Status                Status
	SpecReleaseID         string
	BlindPackageID        string
	InstrumentDigest      string
	BlindContractRevision float64
	Adapters              []Adapter
	RunID                 string
}

// Adapter is one subject of the run: how to execute it and the digests of
// what it is.
type Adapter struct {
	Implementation string
	Role           string
	Command        []string
	PackageFiles   []string // world-relative paths, in recorded order
	PackageDigest  string
	BinaryDigest   *string // nil = null
	BinaryPath     *string // nil = null, world-relative otherwise
	Environment    *Environment
}

// Environment is the recorded provenance of a candidate: which agent, with
// what access, is part of what the result means.
type Environment struct {
	Toolchain   string
	Model       string
	ToolVersion string
}

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	c := *r
	c.Adapters = make([]Adapter, len(r.Adapters))
	for i, a := range r.Adapters {
		a.Command = slices.Clone(a.Command)
		a.PackageFiles = slices.Clone(a.PackageFiles)
		if a.BinaryDigest != nil {
			s := *a.BinaryDigest
			a.BinaryDigest = &s
		}
		if a.BinaryPath != nil {
			s := *a.BinaryPath
			a.BinaryPath = &s
		}
		if a.Environment != nil {
			e := *a.Environment
			a.Environment = &e
		}
		c.Adapters[i] = a
	}
	return &c
}

// Candidates returns the adapters with role candidate.
func (r *Record) Candidates() []Adapter {
	var out []Adapter
	for _, a := range r.Adapters {
		if a.Role == RoleCandidate {
			out = append(out, a)
		}
	}
	return out
}

// Adapter returns the adapter labelled impl.
func (r *Record) Adapter(impl string) (Adapter, bool) {
	for _, a := range r.Adapters {
		if a.Implementation == impl {
			return a, true
		}
	}
	return Adapter{}, false
}

// strPtr returns a pointer to s.
func strPtr(s string) *string { return &s }

func nullable(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func envValue(e *Environment) any {
	if e == nil {
		return nil
	}
	return evidence.NewObject(
		evidence.Member{Name: "toolchain", Value: e.Toolchain},
		evidence.Member{Name: "model", Value: e.Model},
		evidence.Member{Name: "tool_version", Value: e.ToolVersion},
	)
}

func stringsValue(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Object returns the record as an ordered object in the reference's member
// order.
func (r *Record) Object() *evidence.Object {
	adapters := make([]any, len(r.Adapters))
	for i, a := range r.Adapters {
		adapters[i] = evidence.NewObject(
			evidence.Member{Name: "implementation", Value: a.Implementation},
			evidence.Member{Name: "role", Value: a.Role},
			evidence.Member{Name: "command", Value: stringsValue(a.Command)},
			evidence.Member{Name: "package_files", Value: stringsValue(a.PackageFiles)},
			evidence.Member{Name: "package_digest", Value: a.PackageDigest},
			evidence.Member{Name: "binary_digest", Value: nullable(a.BinaryDigest)},
			evidence.Member{Name: "binary_path", Value: nullable(a.BinaryPath)},
			evidence.Member{Name: "environment", Value: envValue(a.Environment)},
		)
	}
	return evidence.NewObject(
		evidence.Member{Name: "type", Value: r.Type},
		evidence.Member{Name: "status", Value: string(r.Status)},
		evidence.Member{Name: "spec_release_id", Value: r.SpecReleaseID},
		evidence.Member{Name: "blind_package_id", Value: r.BlindPackageID},
		evidence.Member{Name: "instrument_digest", Value: r.InstrumentDigest},
		evidence.Member{Name: "blind_contract_revision", Value: r.BlindContractRevision},
		evidence.Member{Name: "adapters", Value: adapters},
		evidence.Member{Name: "run_id", Value: r.RunID},
	)
}

// Bytes renders the record as the reference does (renderRun):
// JSON.stringify(r, null, 1) + "\n".
func (r *Record) Bytes() ([]byte, error) {
	return evidence.Stringify(r.Object(), " ")
}

// scalar renders one preimage value as JSON.stringify(v ?? null) does.
func scalar(v any) string {
	b, err := evidence.Canonical(v)
	if err != nil {
		// Only a string that is not UTF-8 or a non-finite number reach here;
		// neither can come out of the strict reader. Render something that
		// can never equal an honest preimage line.
		return fmt.Sprintf("<unrenderable %T>", v)
	}
	return string(b)
}

// Preimage returns the run_id preimage of TRVM-FORMATS §5.2: not JSON, but
// "field<TAB>JSON-scalar" lines joined by LF with a final LF, over the
// record minus run_id with adapters sorted by label (UTF-16 order) and each
// adapter's package_files sorted. Every value passes through the JSON string
// encoder, which cannot emit a raw TAB or LF, so a value cannot forge a line.
func (r *Record) Preimage() string {
	var b strings.Builder
	b.WriteString(coreType)
	b.WriteByte('\n')
	put := func(k string, v any) {
		b.WriteString(k)
		b.WriteByte('\t')
		b.WriteString(scalar(v))
		b.WriteByte('\n')
	}
	put("type", r.Type)
	put("status", string(r.Status))
	put("spec_release_id", r.SpecReleaseID)
	put("blind_package_id", r.BlindPackageID)
	put("instrument_digest", r.InstrumentDigest)
	put("blind_contract_revision", r.BlindContractRevision)
	adapters := slices.Clone(r.Adapters)
	// The adapters are a set keyed by label: reordering the array is not a
	// different experiment (stable, like JS sort, for equal labels).
	slices.SortStableFunc(adapters, func(x, y Adapter) int {
		return evidence.CompareUTF16(x.Implementation, y.Implementation)
	})
	put("adapters", len(adapters))
	for i, a := range adapters {
		p := fmt.Sprintf("adapter[%d].", i)
		put(p+"implementation", a.Implementation)
		put(p+"role", a.Role)
		put(p+"package_digest", a.PackageDigest)
		put(p+"binary_digest", nullable(a.BinaryDigest))
		put(p+"binary_path", nullable(a.BinaryPath))
		put(p+"command", len(a.Command))
		for j, x := range a.Command {
			put(fmt.Sprintf("%scommand[%d]", p, j), x)
		}
		files := slices.Clone(a.PackageFiles)
		slices.SortStableFunc(files, evidence.CompareUTF16)
		put(p+"package_files", len(files))
		for j, x := range files {
			put(fmt.Sprintf("%spackage_files[%d]", p, j), x)
		}
		var tc, model, tv any
		if a.Environment != nil {
			tc, model, tv = a.Environment.Toolchain, a.Environment.Model, a.Environment.ToolVersion
		}
		put(p+"environment.toolchain", tc)
		put(p+"environment.model", model)
		put(p+"environment.tool_version", tv)
	}
	return b.String()
}

// ComputeRunID returns "brun-" + hex(SHA-256(UTF-8(Preimage()))). The status
// is inside the identity, so every transition changes it.
func (r *Record) ComputeRunID() string {
	return ident.Brun + pkgwalk.SHA256Hex([]byte(r.Preimage()))
}

// The closed vocabularies of the record (TRVM-FORMATS §5.1).
var (
	recordMembers      = []string{"type", "status", "spec_release_id", "blind_package_id", "instrument_digest", "blind_contract_revision", "adapters", "run_id"}
	adapterMembers     = []string{"implementation", "role", "command", "package_files", "package_digest", "binary_digest", "binary_path", "environment"}
	environmentMembers = []string{"toolchain", "model", "tool_version"}
)

// shape reports every undeclared and every missing member of o.
func shape(o *evidence.Object, members []string, file, what string) []*RunProblem {
	var ps []*RunProblem
	for _, n := range o.Names() {
		if !slices.Contains(members, n) {
			ps = append(ps, problem(errRunShape, file, "%s carries an undeclared member %q", what, n))
		}
	}
	for _, n := range members {
		if !o.Has(n) {
			ps = append(ps, problem(errRunShape, file, "%s is missing %q", what, n))
		}
	}
	return ps
}

// fieldReader converts members of a read object to Go values, recording a
// shape problem for each member of the wrong JSON type.
type fieldReader struct {
	file string
	what string
	ps   []*RunProblem
}

func (f *fieldReader) bad(name, want string, v any) {
	f.ps = append(f.ps, problem(errRunShape, f.file, "%s member %q is %s, not %s", f.what, name, evidence.TypeName(v), want))
}

func (f *fieldReader) str(o *evidence.Object, name string) string {
	v, ok := o.Get(name)
	if !ok {
		return ""
	}
	s, isStr := v.(string)
	if !isStr {
		f.bad(name, "a string", v)
	}
	return s
}

func (f *fieldReader) nullableStr(o *evidence.Object, name string) *string {
	v, ok := o.Get(name)
	if !ok || v == nil {
		return nil
	}
	s, isStr := v.(string)
	if !isStr {
		f.bad(name, "a string or null", v)
		return nil
	}
	return &s
}

func (f *fieldReader) num(o *evidence.Object, name string) float64 {
	v, ok := o.Get(name)
	if !ok {
		return 0
	}
	n, isNum := v.(float64)
	if !isNum {
		f.bad(name, "a number", v)
	}
	return n
}

func (f *fieldReader) boolean(o *evidence.Object, name string) bool {
	v, ok := o.Get(name)
	if !ok {
		return false
	}
	b, isBool := v.(bool)
	if !isBool {
		f.bad(name, "a boolean", v)
	}
	return b
}

func (f *fieldReader) strings(o *evidence.Object, name string) []string {
	v, ok := o.Get(name)
	if !ok {
		return nil
	}
	arr, isArr := v.([]any)
	if !isArr {
		f.bad(name, "a list of strings", v)
		return nil
	}
	out := make([]string, 0, len(arr))
	for i, x := range arr {
		s, isStr := x.(string)
		if !isStr {
			f.bad(fmt.Sprintf("%s[%d]", name, i), "a string", x)
			continue
		}
		out = append(out, s)
	}
	return out
}

func (f *fieldReader) objects(o *evidence.Object, name string) []*evidence.Object {
	v, ok := o.Get(name)
	if !ok {
		return nil
	}
	arr, isArr := v.([]any)
	if !isArr {
		f.bad(name, "a list of objects", v)
		return nil
	}
	out := make([]*evidence.Object, 0, len(arr))
	for i, x := range arr {
		obj, isObj := x.(*evidence.Object)
		if !isObj {
			f.bad(fmt.Sprintf("%s[%d]", name, i), "an object", x)
			continue
		}
		out = append(out, obj)
	}
	return out
}

// environment reads a null-or-{toolchain, model, tool_version} member.
//
// An environment whose three members are all null is read as no
// environment (null): it has that one reading, and the same run_id (the
// preimage projects both to three nulls, TRVM-FORMATS §5.2), so the
// reference accepts it and so does this reader. An environment with some
// members null and others recorded is refused: a candidate's environment
// is its provenance, and a freeze records all three or nothing (§5.4), so a
// partial one claims a freeze no transition performs.
func (f *fieldReader) environment(o *evidence.Object, name, who string) *Environment {
	v, ok := o.Get(name)
	if !ok || v == nil {
		return nil
	}
	eo, isObj := v.(*evidence.Object)
	if !isObj {
		f.bad(name, "an object or null", v)
		return nil
	}
	f.ps = append(f.ps, shape(eo, environmentMembers, f.file, who+"'s environment")...)
	nulls := 0
	for _, m := range environmentMembers {
		if x, ok := eo.Get(m); ok && x == nil {
			nulls++
		}
	}
	if nulls == len(environmentMembers) && eo.Len() == len(environmentMembers) {
		return nil
	}
	if nulls > 0 {
		f.ps = append(f.ps, problem(errRunShape, f.file, "%s's environment records %d of its three members as null: a provenance is recorded whole (toolchain, model, tool_version) or the environment is null", who, nulls))
		return nil
	}
	sub := fieldReader{file: f.file, what: who + "'s environment"}
	e := &Environment{
		Toolchain:   sub.str(eo, "toolchain"),
		Model:       sub.str(eo, "model"),
		ToolVersion: sub.str(eo, "tool_version"),
	}
	f.ps = append(f.ps, sub.ps...)
	return e
}

// labelProblems checks that a collection keyed by label has valid, unique
// labels — before anything indexes it, since a label twice has two readings.
func labelProblems(labels []string, file, what string) []*RunProblem {
	var ps []*RunProblem
	seen := map[string]bool{}
	for _, l := range labels {
		switch {
		case !ValidLabel(l):
			ps = append(ps, problem(errLabel, file, "%s names %q, which is not an implementation label (%s)", what, l, labelRE()))
		case seen[l]:
			ps = append(ps, problem(errDuplicateLabel, file, "%s names %q more than once", what, l))
		}
		seen[l] = true
	}
	return ps
}

// ParseRecord reads a run record from its bytes: the strict reader first
// ([errRecordBytes] wrapping the *evidence.Error), then the closed shape and
// the vocabulary (type, status, roles, labels). It does not check anything
// against a world; see [Verify]. file names the record in problems. The
// error is a *VerifyError listing every problem.
func ParseRecord(b []byte, file string) (*Record, error) {
	r, ps := parseRecord(b, file)
	if len(ps) > 0 {
		return r, &VerifyError{What: "reading the run record", Problems: ps}
	}
	return r, nil
}

func parseRecord(b []byte, file string) (*Record, []*RunProblem) {
	o, err := evidence.ReadObject(b)
	if err != nil {
		return nil, []*RunProblem{{Rule: errRecordBytes, File: file, Err: err}}
	}
	ps := shape(o, recordMembers, file, "the run record")
	f := fieldReader{file: file, what: "the run record"}
	r := &Record{
		Type:                  f.str(o, "type"),
		Status:                Status(f.str(o, "status")),
		SpecReleaseID:         f.str(o, "spec_release_id"),
		BlindPackageID:        f.str(o, "blind_package_id"),
		InstrumentDigest:      f.str(o, "instrument_digest"),
		BlindContractRevision: f.num(o, "blind_contract_revision"),
		RunID:                 f.str(o, "run_id"),
	}
	var labels []string
	for _, ao := range f.objects(o, "adapters") {
		impl, _ := ao.Get("implementation")
		who := fmt.Sprintf("run adapter %s", scalar(impl))
		ps = append(ps, shape(ao, adapterMembers, file, who)...)
		af := fieldReader{file: file, what: who}
		a := Adapter{
			Implementation: af.str(ao, "implementation"),
			Role:           af.str(ao, "role"),
			Command:        af.strings(ao, "command"),
			PackageFiles:   af.strings(ao, "package_files"),
			PackageDigest:  af.str(ao, "package_digest"),
			BinaryDigest:   af.nullableStr(ao, "binary_digest"),
			BinaryPath:     af.nullableStr(ao, "binary_path"),
		}
		a.Environment = af.environment(ao, "environment", who)
		ps = append(ps, af.ps...)
		if a.Role != RoleReference && a.Role != RoleCandidate {
			ps = append(ps, problem(errRole, file, "%s has role %q; a subject of this experiment is a reference or a candidate", who, a.Role))
		}
		labels = append(labels, a.Implementation)
		r.Adapters = append(r.Adapters, a)
	}
	ps = append(ps, f.ps...)
	ps = append(ps, labelProblems(labels, file, "the run record's adapters")...)
	if len(ps) > 0 {
		return r, ps
	}
	if r.Type != RecordType {
		ps = append(ps, problem(errRecordType, file, "type %q", r.Type))
	}
	if !r.Status.Valid() {
		ps = append(ps, problem(errUnknownStatus, file, "status %q", r.Status))
	}
	return r, ps
}
