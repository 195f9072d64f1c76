package amber

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/sign"
)

// indexedCase builds a case and appends it to a fresh index.
func indexedCase(t *testing.T) (BuildOptions, *Case, *sign.Signer, *Index, string) {
	t.Helper()
	o, c, s := buildCase(t)
	dir, key := newTestIndex(t, 2)
	m, msha, err := VerifySignedManifest(c.Dir, s.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	ix, err := AppendCaseFile(dir, key, EntryFromManifest(m, msha))
	if err != nil {
		t.Fatal(err)
	}
	return o, c, s, ix, key
}

func TestSummary(t *testing.T) {
	t.Parallel()
	_, c, s, ix, _ := indexedCase(t)
	m, msha, err := VerifySignedManifest(c.Dir, s.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	sum, err := NewSummary(m, msha, ix)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	b, err := WriteSummary(out, sum, s)
	if err != nil {
		t.Fatal(err)
	}
	// Exactly the closed field set, top level and nested, in order.
	o, err := readYAML("summary.yaml", b)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Names(); !slices.Equal(got, summaryFields) {
		t.Errorf("summary keys %v, want %v", got, summaryFields)
	}
	for _, leak := range []string{m.CutoffCommit, "provenance", "leak_check", "egress_allowlist", "candidate_input_bundle", "rubric"} {
		if strings.Contains(string(b), leak) {
			t.Errorf("summary carries %q", leak)
		}
	}
	if sum.IndexVersion != 3 || sum.Retirement.State != "active" || sum.ManifestSHA256 != msha {
		t.Errorf("summary %+v", sum)
	}
	got, _, err := VerifySummary(filepath.Join(out, SummaryFile), s.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	if got.Retirement.State != "active" || got.Retirement.Date != nil || got.CaseID != m.CaseID {
		t.Errorf("summary read back %+v", got)
	}
	// A summary signature never passes as a manifest signature.
	sig, _ := os.ReadFile(filepath.Join(out, SummarySigFile))
	if err := sign.Verify(s.PublicKey(), sign.NamespaceCaseManifest, b, sig); !isRule(err, signNamespace) {
		t.Errorf("summary signature in the manifest namespace: %v", err)
	}
	// Edited after signing → summary-signature.
	writeFile(t, filepath.Join(out, SummaryFile), strings.Replace(string(b), "index_version: 3", "index_version: 4", 1))
	if _, _, err := VerifySummary(filepath.Join(out, SummaryFile), s.PublicKey()); CheckOf(err) != CheckSummarySignature {
		t.Errorf("edited summary: %v", err)
	}
}

// TestUpstreamSummaryFixture: the upstream invalid summary is refused at
// the two fields its header names.
func TestUpstreamSummaryFixture(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(testshared.Path(t, "amber", "schemas", "examples", "summary.invalid-fieldset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ReadSummary("summary.invalid-fieldset.yaml", b)
	if !errors.Is(err, errManifestField) {
		t.Fatalf("got %v, want a field refusal", err)
	}
	if got := pointersOf(err); !slices.Equal(got, []string{"/cutoff_commit", "/notes"}) {
		t.Errorf("refused at %v, want /cutoff_commit and /notes", got)
	}
	// Without the two offending keys the fixture reads: the refusal was for
	// them and nothing else.
	fixed := strings.Split(string(b), "\ncutoff_commit:")[0] + "\n"
	if _, err := ReadSummary("fixed", []byte(fixed)); err != nil {
		t.Errorf("fixture without the extra keys refused: %v", err)
	}
}

func TestSummaryRefusesUnindexedOrMismatched(t *testing.T) {
	t.Parallel()
	_, c, s := buildCase(t)
	dir, _ := newTestIndex(t, 1)
	ix, err := LoadIndex(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	m, msha, err := VerifySignedManifest(c.Dir, s.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSummary(m, msha, ix); !errors.Is(err, errNotIndexed) {
		t.Errorf("unindexed case: %v", err)
	}
}

func TestCompare(t *testing.T) {
	t.Parallel()
	base := Comparability{SpecSHA256: strings.Repeat("a", 64), CutoffUTC: "2026-01-15T00:00:00Z", BaseBundleSHA256: strings.Repeat("b", 64),
		OraclePackSHA256: strings.Repeat("c", 64), GitVersion: "2.39.5", BundleFormatVersion: "3", HashAlgorithm: "sha1"}
	for _, tc := range []struct {
		name   string
		edit   func(*Comparability)
		differ string
	}{
		{"equal", func(*Comparability) {}, ""},
		{"spec", func(c *Comparability) { c.SpecSHA256 = strings.Repeat("d", 64) }, "spec_sha256"},
		{"cutoff", func(c *Comparability) { c.CutoffUTC = "2026-01-15T00:00:01Z" }, "cutoff_utc"},
		{"bundle", func(c *Comparability) { c.BaseBundleSHA256 = strings.Repeat("d", 64) }, "base_bundle_sha256"},
		{"oracle", func(c *Comparability) { c.OraclePackSHA256 = strings.Repeat("d", 64) }, "oracle_pack_sha256"},
		{"git", func(c *Comparability) { c.GitVersion = "2.43.0" }, "git_version"},
		{"format", func(c *Comparability) { c.BundleFormatVersion = "2" }, "bundle_format_version"},
		{"hash", func(c *Comparability) { c.HashAlgorithm = "sha256" }, "hash_algorithm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := base
			tc.edit(&b)
			c := Compare(base, b)
			if c.Comparable != (tc.differ == "") {
				t.Errorf("comparable = %v", c.Comparable)
			}
			if len(c.Fields) != 7 {
				t.Fatalf("%d fields side by side, want 7", len(c.Fields))
			}
			for _, f := range c.Fields {
				if f.Equal != (f.Field != tc.differ) {
					t.Errorf("%s equal=%v", f.Field, f.Equal)
				}
			}
		})
	}
}

func TestAdjudicate(t *testing.T) {
	t.Parallel()
	rec := func(state, fin string) *RunRecord {
		return &RunRecord{CaseID: "A-1", TerminalState: state, FinishedUTC: fin}
	}
	records := map[string]*RunRecord{
		"early":   rec(StateValidSuccess, "2026-02-01T00:00:00Z"),
		"window":  rec(StateValidFailure, "2026-02-20T00:00:00Z"),
		"late":    rec(StateValidSuccess, "2026-03-05T00:00:00Z"),
		"infra":   rec(StateInvalidInfrastructure, "2026-02-20T00:00:00Z"),
		"violate": rec(StateProtocolViolation, "2026-02-20T00:00:00Z"),
	}
	passed := &Manifest{LeakCheck: LeakCheck{Result: "passed", LastRunDate: "2026-02-10"}}
	failed := &Manifest{LeakCheck: LeakCheck{Result: "failed", LastRunDate: "2026-02-10"}}
	for _, tc := range []struct {
		name string
		opts AdjudicateOptions
		want map[string]string
	}{
		{"known leak date", AdjudicateOptions{LeakDate: "2026-02-15", Retired: "2026-03-01"}, map[string]string{
			"early": StateValidSuccess, "window": StatePendingAdjudication, "late": StatePendingAdjudication,
			"infra": StateInvalidInfrastructure, "violate": StateProtocolViolation}},
		{"default: last passed check", AdjudicateOptions{Retired: "2026-03-01", Manifest: passed}, map[string]string{
			"early": StateValidSuccess, "window": StatePendingAdjudication, "late": StatePendingAdjudication,
			"infra": StateInvalidInfrastructure, "violate": StateProtocolViolation}},
		{"no passed check", AdjudicateOptions{Retired: "2026-03-01", Manifest: failed}, map[string]string{
			"early": StatePendingAdjudication, "window": StatePendingAdjudication, "late": StatePendingAdjudication,
			"infra": StateInvalidInfrastructure, "violate": StateProtocolViolation}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Adjudicate(records, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != len(records) {
				t.Fatalf("%d results", len(out))
			}
			for _, a := range out {
				if a.After != tc.want[a.Record] {
					t.Errorf("%s: %s (%s), want %s", a.Record, a.After, a.Reason, tc.want[a.Record])
				}
			}
		})
	}
	if _, err := Adjudicate(records, AdjudicateOptions{LeakDate: "2026-04-01", Retired: "2026-03-01"}); !errors.Is(err, errBuildArgument) {
		t.Errorf("leak after retirement: %v", err)
	}
}

// TestDemo runs the demo flow; with the sandbox available, the run too.
func TestDemo(t *testing.T) {
	t.Parallel()
	needGit(t)
	var iso Isolation
	if os.Geteuid() == 0 {
		if si := (&SandboxIsolation{StateDir: sandboxStateDir(t)}); si.Available() == nil {
			iso = si
		}
	}
	res, err := Demo(t.Context(), filepath.Join(t.TempDir(), "demo"), iso)
	if err != nil {
		t.Fatal(err)
	}
	if res.IndexVersion != 1 || res.CaseID != "A-demo-0001" {
		t.Errorf("demo %+v", res)
	}
	if iso != nil && res.TerminalState != StateValidSuccess {
		t.Errorf("demo run %s", res.TerminalState)
	}
}

// TestSummaryAfterRetirement: the summary takes the retirement from the
// index (the latest entry), with its date, and cites the newer version.
func TestSummaryAfterRetirement(t *testing.T) {
	t.Parallel()
	_, c, s, _, key := indexedCase(t)
	m, msha, err := VerifySignedManifest(c.Dir, s.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	ixDir := filepath.Dir(key) + "/index"
	ix, err := RetireCaseFile(ixDir, key, m.CaseID, "2026-04-01")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := NewSummary(m, msha, ix)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Retirement.State != "retired" || sum.Retirement.Date == nil || *sum.Retirement.Date != "2026-04-01" || sum.IndexVersion != 4 {
		t.Errorf("summary after retirement: %+v", sum)
	}
	b, err := sum.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSummary("s", b); err != nil {
		t.Errorf("retired summary does not read back: %v", err)
	}
}
