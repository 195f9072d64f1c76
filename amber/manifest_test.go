package amber

import (
	"errors"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

func pointersOf(err error) []string {
	var fe FieldErrors
	if !errors.As(err, &fe) {
		return nil
	}
	var out []string
	for _, e := range fe {
		out = append(out, e.Pointer)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// TestUpstreamManifestExamples: the upstream valid example reads under our
// rules and the upstream schema; each invalid one is refused, by both, at
// the fields its header names.
func TestUpstreamManifestExamples(t *testing.T) {
	t.Parallel()
	schema := upstreamSchema(t)
	for _, tc := range []struct {
		file string
		want []string // JSON Pointers our rules must name; nil = valid
	}{
		{"manifest.valid.yaml", nil},
		{"manifest.missing-required.yaml", []string{"/artifacts", "/available_information_manifest", "/candidate_input_bundle", "/leak_check"}},
		{"manifest.outside-fieldset.yaml", []string{"/eligibility/allowlist", "/eligibility/egress_allowlist", "/oracle_path", "/retirement/leaked_from", "/rubric_path"}},
		{"manifest.wrong-types.yaml", []string{"/artifacts", "/construction/bundle_size", "/cutoff_commit", "/cutoff_rule/script_output_sha256",
			"/cutoff_utc", "/eligibility/isolation_class", "/leak_check/result", "/protocol_sha256", "/retirement/state", "/spec_sha256"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(testshared.Path(t, "amber", "schemas", "examples", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			m, obj, err := ReadManifest(tc.file, b)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if m.CaseID != "A-example-0001" || m.CutoffUTC != "2026-01-15T00:00:00Z" || m.Construction.BundleSize != 1048576 || m.Retirement.Date != nil {
					t.Errorf("read wrongly: %+v", m)
				}
				if err := schema.Validate(obj); err != nil {
					t.Errorf("upstream schema refuses what we read: %v", err)
				}
				// Our encoding of what we read is schema-valid and reads back equal.
				enc, err := m.Encode()
				if err != nil {
					t.Fatal(err)
				}
				m2, obj2, err := ReadManifest("re-encoded", enc)
				if err != nil {
					t.Fatalf("re-encoded manifest refused: %v\n%s", err, enc)
				}
				if err := schema.Validate(obj2); err != nil {
					t.Errorf("upstream schema refuses our encoding: %v", err)
				}
				if m2.CutoffUTC != m.CutoffUTC || m2.LeakCheck.LastRunDate != "2026-02-01" {
					t.Errorf("round trip changed values: %+v", m2)
				}
				return
			}
			if !errors.Is(err, errManifestField) {
				t.Fatalf("got %v, want errManifestField", err)
			}
			if got := pointersOf(err); !slices.Equal(got, tc.want) {
				t.Errorf("our rules name %v, want %v", got, tc.want)
			}
			var se *evidence.SchemaError
			if serr := schema.Validate(obj); !errors.As(serr, &se) {
				t.Fatalf("upstream schema accepts %s: %v", tc.file, serr)
			}
			// Every field the schema names, our rules name too (the schema
			// names the parent of a field outside a closed block).
			for _, c := range se.Causes {
				covered := slices.ContainsFunc(tc.want, func(p string) bool {
					return p == c.InstancePointer || strings.HasPrefix(p, c.InstancePointer+"/")
				})
				if !covered {
					t.Errorf("schema names %s (%s), our rules do not", c.InstancePointer, c.Message)
				}
			}
		})
	}
}

// TestReadYAMLStrict: the refusals of the strict YAML reading, each by its
// rule.
func TestReadYAMLStrict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     error
	}{
		{"plain", "a: 1\nb: [x, y]\nc: null\n", nil},
		{"duplicate key", "a: 1\na: 2\n", errYAMLDuplicateKey},
		{"nested duplicate", "a:\n  b: 1\n  b: 2\n", errYAMLDuplicateKey},
		{"second document", "a: 1\n---\na: 2\nzzz: 3\n", errYAMLMultiDoc},
		{"anchor and alias", "a: &x 1\nb: *x\n", errYAMLAlias},
		{"merge key", "base: &b {x: 1}\nc:\n  <<: *b\n", errYAMLAlias},
		{"custom tag", "a: !custom 1\n", errYAMLTag},
		{"binary tag", "a: !!binary aGk=\n", errYAMLTag},
		{"yaml 1.1 boolean", "a: yes\n", nil}, // a string in YAML 1.2 core: read as "yes"
		{"hex integer", "a: 0x10\n", errYAMLTag},
		{"integer beyond 2^53", "a: 9007199254740993\n", errYAMLTag},
		{"non-string key", "1: a\n", errYAMLKey},
		{"not a mapping", "- a\n", errYAMLNotMapping},
		{"empty", "", errYAMLSyntax},
		{"syntax", "a: [\n", errYAMLSyntax},
		{"too large", "a: " + string(make([]byte, MaxYAML)) + "\n", errYAMLTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readYAML("t.yaml", []byte(tc.in))
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
