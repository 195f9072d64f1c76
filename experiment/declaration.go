package experiment

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// A world declares what the code would otherwise assume of the reference
// protocol in <package root>/experiment/world.json. The file lives inside
// the experiment surface, so experiment_digest covers it: changing what a
// world declares moves its release identity, and a pinned run cannot be
// measured under other rules than the ones it was pinned with.
const (
	// DeclarationFile is the declaration's package-relative path.
	DeclarationFile = "experiment/world.json"
	// DeclarationFormat is its format member.
	DeclarationFormat = "CLEANROOM-WORLD-v1"
)

// Rules of a world declaration. Each is a sentinel (errors.Is works through
// the *RunProblem and *VerifyError that carry it).
const (
	// errDeclarationBytes: world.json is not a regular file the strict
	// reader accepts; a declaration with two readings declares nothing.
	errDeclarationBytes RunRule = "world declaration refused at the byte boundary"
	// errDeclarationShape: an unknown or missing member, or a member of the
	// wrong type: a member nothing reads would be a rule the operator
	// believes in and the code ignores.
	errDeclarationShape RunRule = "world declaration shape broken"
	// errDeclarationFormat: format is not CLEANROOM-WORLD-v1.
	errDeclarationFormat RunRule = "world declaration format is not " + DeclarationFormat
	// errDeclarationValue: a member's value breaks its rule (an
	// interpreter that is a path, an instrument member outside
	// experiment/, a reference descriptor in the state root, a class that
	// is not a NAME, a repeated entry, an empty list).
	errDeclarationValue RunRule = "world declaration value refused"
	// errNoReference: run pin was asked for the world's reference adapter,
	// and the world declares none and does not hold the reference
	// protocol's adapter either.
	errNoReference RunRule = "no reference adapter"
)

// Declaration is what a world declares about itself. Declared is false for a
// reference-protocol world (no world.json): every other field is then the
// reference protocol's, and every identity is what it was before worlds
// could declare anything.
type Declaration struct {
	Declared bool
	// AdapterInterpreters are the argv[0] values an adapter without a
	// frozen binary may use (bare names, resolved by the runner in fixed
	// system directories, never through PATH).
	AdapterInterpreters []string
	// Instrument are the instrument members, package-relative, all under
	// experiment/ (TRVM-FORMATS §5.3).
	Instrument []string
	// ReferenceAdapter is the world-relative path of the reference adapter
	// descriptor (the shape ParseAdapterSpec reads); "" for the reference
	// protocol, whose reference is DefaultReference.
	ReferenceAdapter string
	// FindingClasses are the classes a person may give a finding or a
	// question.
	FindingClasses []string
}

// ReferenceDeclaration is what a world without world.json is: the
// reference protocol's interpreters, instrument, reference adapter and
// classes.
func ReferenceDeclaration() *Declaration {
	return &Declaration{
		AdapterInterpreters: slices.Clone(interpreters),
		Instrument:          slices.Clone(Instrument),
		FindingClasses:      slices.Clone(holdout.Classes),
	}
}

// declarationMembers are the members of a declaration, all required.
var declarationMembers = []string{"format", "adapter_interpreters", "instrument", "reference_adapter", "finding_classes"}

// interpreterNameRE: an interpreter is a bare file name. A path would let a
// world run a program of its own tree (or of the host) as the trusted
// interpreter, outside the frozen files and outside the fixed directories
// the runner resolves names in.
var interpreterNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`) })

// classNameRE: a finding class is an upper-case NAME, so it is typed on a
// command line, compared byte for byte and never mistaken for prose.
var classNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`) })

// ParseDeclaration reads a world declaration (file names it in problems)
// through the strict reader and checks its closed shape and every value.
// All problems are reported together in a *VerifyError.
func ParseDeclaration(b []byte, file string) (*Declaration, error) {
	o, err := evidence.ReadObject(b)
	if err != nil {
		return nil, &RunProblem{Rule: errDeclarationBytes, File: file, Err: err}
	}
	var ps []*RunProblem
	for _, n := range o.Names() {
		if !slices.Contains(declarationMembers, n) {
			ps = append(ps, problem(errDeclarationShape, file, "unknown member %q (a world declares %s)", n, strings.Join(declarationMembers, ", ")))
		}
	}
	for _, n := range declarationMembers {
		if !o.Has(n) {
			ps = append(ps, problem(errDeclarationShape, file, "member %q is missing (every member is required)", n))
		}
	}
	typed := func(name, want string, ok bool, v any) bool {
		if !ok && o.Has(name) {
			ps = append(ps, problem(errDeclarationShape, file, "member %q is %s, not %s", name, evidence.TypeName(v), want))
		}
		return ok
	}
	strList := func(name string) []string {
		v, _ := o.Get(name)
		arr, ok := v.([]any)
		if !typed(name, "an array of strings", ok, v) {
			return nil
		}
		out := make([]string, 0, len(arr))
		for i, x := range arr {
			s, ok := x.(string)
			if !ok {
				ps = append(ps, problem(errDeclarationShape, file, "%s[%d] is %s, not a string", name, i, evidence.TypeName(x)))
				continue
			}
			if slices.Contains(out, s) {
				ps = append(ps, problem(errDeclarationValue, file, "%s[%d] repeats %q", name, i, s))
				continue
			}
			out = append(out, s)
		}
		return out
	}
	d := &Declaration{Declared: true}
	if v, _ := o.Get("format"); o.Has("format") {
		s, ok := v.(string)
		if typed("format", "a string", ok, v) && s != DeclarationFormat {
			ps = append(ps, problem(errDeclarationFormat, file, "format is %q", s))
		}
	}
	d.AdapterInterpreters = strList("adapter_interpreters")
	for _, s := range d.AdapterInterpreters {
		if !interpreterNameRE().MatchString(s) {
			ps = append(ps, problem(errDeclarationValue, file, "adapter_interpreters: %q is not a bare program name (%s)", s, interpreterNameRE()))
		}
	}
	d.Instrument = strList("instrument")
	if o.Has("instrument") && len(d.Instrument) == 0 {
		ps = append(ps, problem(errDeclarationValue, file, "instrument is empty: a run must pin what measures it"))
	}
	for _, s := range d.Instrument {
		// Under experiment/: experiment_digest covers the member, so the
		// release identity moves when the instrument does.
		if err := pkgwalk.CheckPath(s); err != nil || !strings.HasPrefix(s, "experiment/") || s == DeclarationFile {
			ps = append(ps, problem(errDeclarationValue, file, "instrument: %q is not a package-relative path under experiment/ (other than %s)", s, DeclarationFile))
		}
	}
	if v, _ := o.Get("reference_adapter"); o.Has("reference_adapter") {
		s, ok := v.(string)
		if typed("reference_adapter", "a string", ok, v) {
			d.ReferenceAdapter = s
			// Never the record, the receipts or the challenge set: a
			// descriptor read from there is evidence reinterpreted as input.
			if pkgwalk.CheckPath(s) != nil || overlapsState(s) {
				ps = append(ps, problem(errDeclarationValue, file, "reference_adapter: %q is not a world-relative path outside the run record, receipts and holdout", s))
			}
		}
	}
	d.FindingClasses = strList("finding_classes")
	if o.Has("finding_classes") && len(d.FindingClasses) == 0 {
		ps = append(ps, problem(errDeclarationValue, file, "finding_classes is empty: a finding could never be classified, so no run could complete"))
	}
	for _, s := range d.FindingClasses {
		if !classNameRE().MatchString(s) {
			ps = append(ps, problem(errDeclarationValue, file, "finding_classes: %q is not a NAME (%s)", s, classNameRE()))
		}
	}
	if len(ps) > 0 {
		return nil, &VerifyError{What: "reading the world declaration", Problems: ps}
	}
	return d, nil
}

// Declaration reads the world's declaration from the package tree as it
// stands (no symlink followed, nothing outside the package). With no
// world.json the world is a reference-protocol world: ReferenceDeclaration.
func (w *World) Declaration() (*Declaration, error) {
	file := w.PackageLabel() + "/" + DeclarationFile
	b, _, err := readRegularBeneath(w.PackageDir(), DeclarationFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ReferenceDeclaration(), nil
	case err != nil:
		return nil, &RunProblem{Rule: errDeclarationBytes, File: file, Err: err}
	}
	return ParseDeclaration(b, file)
}

// FindingClasses are the classes a person may give a finding or a
// question in this world: those it declares, or the reference protocol's
// six (holdout.Classes).
func (w *World) FindingClasses() ([]string, error) {
	d, err := w.Declaration()
	if err != nil {
		return nil, err
	}
	return d.FindingClasses, nil
}

// FindingsRegister is the world's findings register (in its state root),
// with the world's finding classes.
func (w *World) FindingsRegister() (holdout.Register, error) {
	cs, err := w.FindingClasses()
	if err != nil {
		return holdout.Register{}, err
	}
	r := holdout.OpenRegister(w.StateDir())
	r.Classes = cs
	return r, nil
}

// ReferenceSpec is the reference subject run pin uses when none is given:
// the declared reference adapter of a declaring world, read as data; for a
// reference-protocol world, DefaultReference — if the world holds it. A
// world with neither is refused with errNoReference, naming what to do.
func (w *World) ReferenceSpec() (AdapterSpec, error) {
	d, err := w.Declaration()
	if err != nil {
		return AdapterSpec{}, err
	}
	if d.Declared {
		b, _, err := readRegularBeneath(w.Root, d.ReferenceAdapter)
		if err != nil {
			return AdapterSpec{}, &RunProblem{Rule: errNoReference, File: d.ReferenceAdapter,
				Detail: fmt.Sprintf("%s declares it as the reference adapter, and it cannot be read", w.PackageLabel()+"/"+DeclarationFile), Err: err}
		}
		return ParseAdapterSpec(b, d.ReferenceAdapter)
	}
	spec := DefaultReference()
	for _, f := range spec.PackageFiles {
		if _, _, err := readRegularBeneath(w.Root, f); err != nil {
			decl := path.Join(w.PackageLabel(), DeclarationFile)
			return AdapterSpec{}, &RunProblem{Rule: errNoReference, Path: f, Err: err,
				Detail: fmt.Sprintf("this world has no %s declaring its reference adapter, and the reference protocol's adapter file %s is not here: pass --reference FILE, or declare reference_adapter in %s", decl, f, decl)}
		}
	}
	return spec, nil
}
