package amber

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ComparedField is one comparability field side by side.
type ComparedField struct {
	Field string `json:"field"`
	A     string `json:"a"`
	B     string `json:"b"`
	Equal bool   `json:"equal"`
}

// Comparison is the result of Compare.
type Comparison struct {
	A, B       string
	Comparable bool
	Fields     []ComparedField
}

// LoadComparability reads the comparability fields of a run record (.json),
// a summary or manifest (.yaml), or a case directory (its manifest.yaml).
// It reads strictly but checks no signature: comparing is bookkeeping over
// documents whose signatures were verified where they were received.
func LoadComparability(path string) (Comparability, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Comparability{}, err
	}
	if fi.IsDir() {
		path = filepath.Join(path, ManifestFile)
	}
	b, err := readCapped(path, maxRecord)
	if err != nil {
		return Comparability{}, err
	}
	if strings.HasSuffix(path, ".json") {
		r, err := ReadRecord(path, b)
		if err != nil {
			return Comparability{}, err
		}
		return r.Comparability, nil
	}
	o, err := readYAML(path, b)
	if err != nil {
		return Comparability{}, err
	}
	if o.Has("manifest_sha256") {
		s, err := ReadSummary(path, b)
		if err != nil {
			return Comparability{}, err
		}
		return s.comparability(), nil
	}
	m, _, err := ReadManifest(path, b)
	if err != nil {
		return Comparability{}, err
	}
	return ComparabilityOf(m), nil
}

// Compare puts two comparability blocks side by side: comparable only if
// all seven fields are equal.
func Compare(a, b Comparability) *Comparison {
	c := &Comparison{Comparable: true}
	for _, f := range [][3]string{
		{"spec_sha256", a.SpecSHA256, b.SpecSHA256},
		{"cutoff_utc", a.CutoffUTC, b.CutoffUTC},
		{"base_bundle_sha256", a.BaseBundleSHA256, b.BaseBundleSHA256},
		{"oracle_pack_sha256", a.OraclePackSHA256, b.OraclePackSHA256},
		{"git_version", a.GitVersion, b.GitVersion},
		{"bundle_format_version", a.BundleFormatVersion, b.BundleFormatVersion},
		{"hash_algorithm", a.HashAlgorithm, b.HashAlgorithm},
	} {
		eq := f[1] == f[2]
		c.Comparable = c.Comparable && eq
		c.Fields = append(c.Fields, ComparedField{Field: f[0], A: f[1], B: f[2], Equal: eq})
	}
	return c
}

// Adjudication is the outcome for one run record.
type Adjudication struct {
	Record      string `json:"record"`
	CaseID      string `json:"case_id"`
	FinishedUTC string `json:"finished_utc"`
	Before      string `json:"terminal_state"`
	After       string `json:"adjudicated_state"`
	Reason      string `json:"reason"`
}

// AdjudicateOptions: LeakDate (YYYY-MM-DD or a UTC instant) is when the
// case leaked; empty means unknown, and the manifest's last passed leak
// check stands in for it. Retired is when the leak was confirmed and the
// case retired.
type AdjudicateOptions struct {
	LeakDate string
	Retired  string
	Manifest *Manifest
}

func parseWhen(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if !reUTC().MatchString(s) {
		return time.Time{}, fmt.Errorf("%w: %q is not YYYY-MM-DD or a UTC instant", errBuildArgument, s)
	}
	return time.Parse(time.RFC3339Nano, s)
}

// Adjudicate applies the leak window of Distribution §6 to run records:
// runs that finished before the leak date keep their state; valid runs
// from the leak date on become pending_adjudication (the profile's
// authority decides each). An unknown leak date defaults to the manifest's
// last leak check recorded as passed; with no passed check there is no
// point before which a run is known clean, so no valid run stands.
// invalid_infrastructure and protocol_violation are never changed.
func Adjudicate(records map[string]*RunRecord, o AdjudicateOptions) ([]Adjudication, error) {
	retired, err := parseWhen(o.Retired)
	if err != nil {
		return nil, err
	}
	var leak time.Time
	leakKnown := false
	basis := ""
	switch {
	case o.LeakDate != "":
		if leak, err = parseWhen(o.LeakDate); err != nil {
			return nil, err
		}
		leakKnown, basis = true, "leak date "+o.LeakDate
	case o.Manifest != nil && o.Manifest.LeakCheck.Result == "passed":
		if leak, err = parseWhen(o.Manifest.LeakCheck.LastRunDate); err != nil {
			return nil, err
		}
		leakKnown, basis = true, "leak date unknown: last passed leak check "+o.Manifest.LeakCheck.LastRunDate
	case o.Manifest == nil:
		return nil, fmt.Errorf("%w: no leak date and no manifest to take the last passed leak check from", errBuildArgument)
	}
	if leakKnown && leak.After(retired) {
		return nil, fmt.Errorf("%w: leak date after the retirement date", errBuildArgument)
	}
	var out []Adjudication
	for path, r := range records {
		fin, err := time.Parse(time.RFC3339Nano, r.FinishedUTC)
		if err != nil {
			return nil, fmt.Errorf("%s: finished_utc: %w", path, err)
		}
		a := Adjudication{Record: path, CaseID: r.CaseID, FinishedUTC: r.FinishedUTC, Before: r.TerminalState, After: r.TerminalState}
		valid := r.TerminalState == StateValidSuccess || r.TerminalState == StateValidFailure
		switch {
		case !valid:
			a.Reason = "not a valid result: unchanged"
		case !leakKnown:
			a.After, a.Reason = StatePendingAdjudication, "no leak check recorded as passed: no run is known to precede the leak"
		case fin.Before(leak):
			a.Reason = "finished before the " + basis + ": stays valid"
		case fin.Before(retired):
			a.After, a.Reason = StatePendingAdjudication, "finished inside the leak window ("+basis+", retired "+o.Retired+")"
		default:
			a.After, a.Reason = StatePendingAdjudication, "finished after the confirmed leak and retirement ("+o.Retired+")"
		}
		out = append(out, a)
	}
	sortAdjudications(out)
	return out, nil
}

func sortAdjudications(a []Adjudication) {
	slices.SortFunc(a, func(x, y Adjudication) int { return strings.Compare(x.Record, y.Record) })
}
