package schema_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/evidence/schema"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func mustSchema(t *testing.T, name, doc string) *schema.Schema {
	t.Helper()
	s, err := schema.Compile(name, []byte(doc))
	if err != nil {
		t.Fatalf("Compile(%s): %v", name, err)
	}
	return s
}

func mustRead(t *testing.T, doc string) any {
	t.Helper()
	v, err := evidence.Read([]byte(doc))
	if err != nil {
		t.Fatalf("Read(%q): %v", doc, err)
	}
	return v
}

func schemaErr(t *testing.T, err error) *evidence.SchemaError {
	t.Helper()
	var se *evidence.SchemaError
	if !errors.As(err, &se) {
		t.Fatalf("want *SchemaError, got %T %v", err, err)
	}
	return se
}

func TestCompileRefusesWhatReadRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		want evidence.Class
	}{
		{"duplicate keyword", `{"type":"string","type":"number"}`, evidence.ClassDuplicateName},
		{"bom", "\xef\xbb\xbf{}", evidence.ClassBOM},
		{"lone surrogate in pattern", `{"pattern":"\ud800"}`, evidence.ClassLoneSurrogate},
		{"trailing data", `{} {}`, evidence.ClassTrailingData},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := schema.Compile(tt.name, []byte(tt.doc))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Compile: got %v, want class %s", err, tt.want)
			}
		})
	}
}

func TestCompileRefusesExternalRefs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file://" + other, other, "https://example.com/s.json"} {
		_, err := schema.Compile("ext", []byte(`{"$ref":"`+ref+`"}`))
		// The refusal is the loader's: no URL loader is registered, so
		// nothing was read (a compile error of another kind would not show
		// that).
		var le *jsonschema.LoadURLError
		if !errors.As(err, &le) {
			t.Errorf("$ref %q: %v, want a *jsonschema.LoadURLError (an external reference must never be loaded)", ref, err)
		}
	}
}

func TestCompileRefusesInvalidSchema(t *testing.T) {
	t.Parallel()
	tests := []struct{ doc, keyword string }{
		{`{"type":"strung"}`, "/type"},
		{`{"minLength":-1}`, "/minLength"},
		{`{"x-sorted":"yes"}`, "/x-sorted"}, // the vocabulary's metaschema wants a boolean
		{`{"pattern":"("}`, "/pattern"},
	}
	for _, tt := range tests {
		_, err := schema.Compile("bad", []byte(tt.doc))
		// Refused by the metaschema, at the keyword that breaks it.
		var ve *jsonschema.SchemaValidationError
		if !errors.As(err, &ve) {
			t.Errorf("Compile(%s): %v, want a *jsonschema.SchemaValidationError", tt.doc, err)
			continue
		}
		if !strings.Contains(err.Error(), "'"+tt.keyword+"'") {
			t.Errorf("Compile(%s): %v does not name %s", tt.doc, err, tt.keyword)
		}
	}
}

func TestSchemaNumbersAsJSONParse(t *testing.T) {
	t.Parallel()
	// The checked value is the double JSON.parse reads, not the source digits.
	tests := []struct {
		schema, doc string
		ok          bool
	}{
		{`{"maximum":9007199254740992}`, `9007199254740993`, true}, // reads as 2^53
		{`{"maximum":9007199254740991}`, `9007199254740993`, false},
		{`{"type":"integer"}`, `4.0`, true},
		{`{"type":"integer"}`, `4.5`, false},
		{`{"type":"integer"}`, `1e300`, true},
		{`{"const":0}`, `-0`, true},
		{`{"multipleOf":0.1}`, `0.3`, true},
		{`{"multipleOf":0.1}`, `0.30000000000000004`, false},
		{`{"minimum":0}`, `1e-400`, true}, // reads as 0
		{`{"exclusiveMinimum":0}`, `1e-400`, false},
		{`{"enum":[1,"1"]}`, `1.0`, true},
		{`{"enum":["1"]}`, `1`, false},
	}
	for _, tt := range tests {
		s := mustSchema(t, "n", tt.schema)
		err := s.Validate(mustRead(t, tt.doc))
		if (err == nil) != tt.ok {
			t.Errorf("schema %s doc %s: got %v, want ok=%v", tt.schema, tt.doc, err, tt.ok)
		}
		if err != nil {
			_ = schemaErr(t, err) // fails the test unless err is a *SchemaError
		}
	}
}

func TestXSorted(t *testing.T) {
	t.Parallel()
	s := mustSchema(t, "sorted", `{"type":"array","x-sorted":true}`)
	off := mustSchema(t, "unsorted-ok", `{"type":"array","x-sorted":false}`)
	tests := []struct {
		doc string
		ok  bool
	}{
		{`[]`, true},
		{`["a"]`, true},
		{`["a","a","b"]`, true}, // equal neighbours are sorted (uniqueness is another keyword)
		{`["b","a"]`, false},
		{`["zzz-code","aaa-code"]`, false},
		// UTF-16 order: U+1F602 (D83D DE02) sorts before U+FB33.
		{`["\ud83d\ude02","\ufb33"]`, true},
		{`["\ufb33","\ud83d\ude02"]`, false},
		// String(v): numbers compare as text, so 10 < 9.
		{`[10,9]`, true},
		{`[9,10]`, false},
		{`[1e21,2]`, true},      // "1e+21" < "2"
		{`[null,"nul"]`, false}, // "null" > "nul"
		{`[[1,2],"1,2"]`, true}, // "1,2" == "1,2"
		{`[{"a":1},"[object Object]"]`, true},
		{`"not an array"`, false}, // the type keyword fails; x-sorted ignores non-arrays
	}
	for _, tt := range tests {
		v := mustRead(t, tt.doc)
		err := s.Validate(v)
		if (err == nil) != tt.ok {
			t.Errorf("x-sorted %s: got %v, want ok=%v", tt.doc, err, tt.ok)
		}
		if err != nil && strings.HasPrefix(tt.doc, "[") {
			se := schemaErr(t, err)
			if len(se.Causes) != 1 || se.Causes[0].KeywordPointer != "/x-sorted" || se.Causes[0].InstancePointer != "" {
				t.Errorf("x-sorted %s: causes %+v, want one at /x-sorted", tt.doc, se.Causes)
			}
		}
		if _, isArr := v.([]any); isArr {
			if err := off.Validate(v); err != nil {
				t.Errorf(`"x-sorted": false refused %s: %v`, tt.doc, err)
			}
		}
	}
}

func TestSchemaErrorsSortedAndStable(t *testing.T) {
	t.Parallel()
	s := mustSchema(t, "many", `{
		"type":"object",
		"properties":{
			"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"},
			"d":{"minimum":10},"e":{"pattern":"^x"},"f":{"type":"array","items":{"type":"integer"}}
		},
		"required":["z"],
		"additionalProperties":false
	}`)
	doc := mustRead(t, `{"f":[1,1.5,"x"],"e":"y","d":1,"c":3,"b":2,"a":1,"q":0}`)
	var first string
	for i := range 30 {
		err := s.Validate(doc)
		se := schemaErr(t, err)
		if i == 0 {
			first = se.Error()
			want := []string{"", "", "/a", "/b", "/c", "/d", "/e", "/f/1", "/f/2"}
			if len(se.Causes) != len(want) {
				t.Fatalf("causes: %+v", se.Causes)
			}
			for j, c := range se.Causes {
				if c.InstancePointer != want[j] {
					t.Errorf("cause %d at %q, want %q (%+v)", j, c.InstancePointer, want[j], se.Causes)
				}
			}
			if se.Causes[2].KeywordPointer != "/properties/a/type" {
				t.Errorf("keyword pointer %q", se.Causes[2].KeywordPointer)
			}
			if se.Causes[7].KeywordPointer != "/properties/f/items/type" {
				t.Errorf("keyword pointer %q", se.Causes[7].KeywordPointer)
			}
			continue
		}
		if got := se.Error(); got != first {
			t.Fatalf("run %d differs:\n%s\n%s", i, got, first)
		}
	}
}

func TestSchemaPointerEscaping(t *testing.T) {
	t.Parallel()
	s := mustSchema(t, "esc", `{"properties":{"a/b~c":{"type":"string"}}}`)
	se := schemaErr(t, s.Validate(mustRead(t, `{"a/b~c":1}`)))
	if len(se.Causes) != 1 {
		t.Fatalf("causes %+v", se.Causes)
	}
	if got := se.Causes[0].InstancePointer; got != "/a~1b~0c" {
		t.Errorf("instance pointer %q", got)
	}
	if got := se.Causes[0].KeywordPointer; got != "/properties/a~1b~0c/type" {
		t.Errorf("keyword pointer %q", got)
	}
}

func readShared(t *testing.T, elem ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(testshared.Path(t, elem...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mutate applies a synthetic-negatives mutation: a dotted path set to value,
// or deleted.
func mutate(t *testing.T, root *evidence.Object, path string, value any, del bool) {
	t.Helper()
	segs := strings.Split(path, ".")
	cur := root
	for _, s := range segs[:len(segs)-1] {
		next, ok := cur.Get(s)
		o, isObj := next.(*evidence.Object)
		if !ok || !isObj {
			t.Fatalf("mutation path %s: %s is not an object", path, s)
		}
		cur = o
	}
	if del {
		cur.Delete(segs[len(segs)-1])
		return
	}
	cur.Set(segs[len(segs)-1], value)
}

func TestTRVMSchemas(t *testing.T) {
	t.Parallel()
	for _, world := range []string{"world", "world-rev2"} {
		t.Run(world, func(t *testing.T) {
			exp := []string{"trvm", world, "docs", "spec", "proof-wire", "experiment"}
			obsSchema, err := schema.Compile("holdout-observation-v1", readShared(t, append(exp, "holdout-observation-v1.schema.json")...))
			if err != nil {
				t.Fatal(err)
			}
			recipeSchema, err := schema.Compile("holdout-recipe-v1", readShared(t, append(exp, "holdout-recipe-v1.schema.json")...))
			if err != nil {
				t.Fatal(err)
			}
			fixtures := append(exp, "fixtures")
			obsBytes := readShared(t, append(fixtures, "synthetic-observations.json")...)
			obs, err := evidence.Read(obsBytes)
			if err != nil {
				t.Fatal(err)
			}
			if err := obsSchema.Validate(obs); err != nil {
				t.Fatalf("the honest synthetic observations were refused: %v", err)
			}
			chs, err := evidence.Read(readShared(t, append(fixtures, "synthetic-challenges.json")...))
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range chs.([]any) {
				if err := recipeSchema.Validate(ch); err != nil {
					t.Errorf("synthetic challenge refused: %v", err)
				}
			}

			// Each schema-rule negative (the other ones are scorer rules)
			// must be refused, at the keyword the case names.
			wantKeyword := map[string]string{
				"N1":  "/additionalProperties",
				"N2":  "/$defs/observation/additionalProperties",
				"N3":  "/$defs/node/additionalProperties",
				"N4":  "/$defs/observation/properties/refusal_set/x-sorted",
				"N5":  "/$defs/observation/properties/refusal_set/uniqueItems",
				"N6":  "/$defs/node/properties/artifact_root/pattern",
				"N7":  "/$defs/observation/required",
				"N9":  "/properties/type/const",
				"N11": "/$defs/node/properties/verdict/enum",
				"N12": "/$defs/plane/propertyNames/enum",
				"N13": "/$defs/structure/properties/edges/type",
			}
			negs, err := evidence.ReadObject(readShared(t, append(fixtures, "synthetic-negatives.json")...))
			if err != nil {
				t.Fatal(err)
			}
			casesV, _ := negs.Get("cases")
			seen := 0
			for _, cv := range casesV.([]any) {
				c := cv.(*evidence.Object)
				idV, _ := c.Get("id")
				id := idV.(string)
				want, isSchemaRule := wantKeyword[id]
				if !isSchemaRule {
					continue
				}
				seen++
				doc, _ := evidence.ReadObject(obsBytes) // a fresh copy
				muts, _ := c.Get("mutations")
				for _, mv := range muts.([]any) {
					m := mv.(*evidence.Object)
					p, _ := m.Get("path")
					val, _ := m.Get("value")
					mutate(t, doc, p.(string), val, m.Has("delete"))
				}
				err := obsSchema.Validate(doc)
				if err == nil {
					t.Errorf("%s accepted; rule: %v", id, c)
					continue
				}
				se := schemaErr(t, err)
				found := false
				for _, cause := range se.Causes {
					if strings.HasSuffix(cause.KeywordPointer, want) {
						found = true
					}
				}
				if !found {
					t.Errorf("%s: no cause at keyword %s: %v", id, want, se)
				}
			}
			if seen != len(wantKeyword) {
				t.Errorf("found %d of %d schema-rule negatives", seen, len(wantKeyword))
			}

			// N14–N16 are challenge rules; the cases carry no mutation, so
			// apply them to the first synthetic challenge here.
			chBytes := readShared(t, append(fixtures, "synthetic-challenges.json")...)
			for _, tc := range []struct {
				id, want string
				apply    func(ch *evidence.Object)
			}{
				{"N14", "/$defs/step/properties/op/enum", func(ch *evidence.Object) {
					r, _ := ch.Get("recipe")
					r.([]any)[0].(*evidence.Object).Set("op", "NOT_AN_OPERATOR")
				}},
				{"N15", "/$defs/step/additionalProperties", func(ch *evidence.Object) {
					r, _ := ch.Get("recipe")
					r.([]any)[0].(*evidence.Object).Set("smuggled", true)
				}},
				{"N16", "/$defs/fixture/required", func(ch *evidence.Object) {
					f, _ := ch.Get("fixture")
					f.(*evidence.Object).Delete("root")
				}},
			} {
				all, _ := evidence.Read(chBytes)
				ch := all.([]any)[0].(*evidence.Object)
				tc.apply(ch)
				se := schemaErr(t, recipeSchema.Validate(ch))
				found := false
				for _, cause := range se.Causes {
					found = found || strings.HasSuffix(cause.KeywordPointer, tc.want)
				}
				if !found {
					t.Errorf("%s: no cause at %s: %v", tc.id, tc.want, se)
				}
			}
		})
	}
}

func TestAMBERManifestSchemaCompiles(t *testing.T) {
	t.Parallel()
	b := readShared(t, "amber", "schemas", "manifest.schema.json")
	s, err := schema.Compile("manifest.schema.json", b)
	if err != nil {
		t.Fatal(err)
	}
	// An empty object lacks every required member.
	se := schemaErr(t, s.Validate(evidence.NewObject()))
	if len(se.Causes) == 0 || se.Causes[0].InstancePointer != "" {
		t.Errorf("causes %+v", se.Causes)
	}
}
