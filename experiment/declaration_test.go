package experiment

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const goodDeclaration = `{
 "format": "CLEANROOM-WORLD-v1",
 "adapter_interpreters": ["python3"],
 "instrument": ["experiment/holdout-observation-v1.schema.json", "experiment/holdout-recipe-v1.schema.json", "experiment/fixtures"],
 "reference_adapter": "governance/py-reference.json",
 "finding_classes": ["SPEC_GAP", "PY_REFERENCE_DEFECT"]
}`

func TestParseDeclaration(t *testing.T) {
	t.Parallel()
	d, err := ParseDeclaration([]byte(goodDeclaration), "w.json")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Declared || !slices.Equal(d.AdapterInterpreters, []string{"python3"}) || d.ReferenceAdapter != "governance/py-reference.json" ||
		!slices.Equal(d.FindingClasses, []string{"SPEC_GAP", "PY_REFERENCE_DEFECT"}) || len(d.Instrument) != 3 {
		t.Errorf("read %+v", d)
	}
	// An empty interpreter list is a world whose adapters are all frozen
	// binaries.
	if _, err := ParseDeclaration([]byte(strings.Replace(goodDeclaration, `["python3"]`, `[]`, 1)), "w.json"); err != nil {
		t.Errorf("no interpreters: %v", err)
	}
	edit := func(old, new string) string {
		if !strings.Contains(goodDeclaration, old) {
			t.Fatalf("%q is not in the declaration", old)
		}
		return strings.Replace(goodDeclaration, old, new, 1)
	}
	cases := []struct {
		name, doc string
		rule      RunRule
	}{
		{"not JSON", `{"format":`, errDeclarationBytes},
		{"duplicate member", edit(`"format"`, `"format": "x", "format"`), errDeclarationBytes},
		{"array", `[]`, errDeclarationBytes},
		{"unknown member", edit(`"format"`, `"interpreters": ["node"], "format"`), errDeclarationShape},
		{"missing member", edit(`"finding_classes": ["SPEC_GAP", "PY_REFERENCE_DEFECT"]`, `"x_": 1`), errDeclarationShape},
		{"interpreters a string", edit(`["python3"]`, `"python3"`), errDeclarationShape},
		{"interpreter a number", edit(`["python3"]`, `[3]`), errDeclarationShape},
		{"reference null", edit(`"governance/py-reference.json"`, `null`), errDeclarationShape},
		{"format", edit(`CLEANROOM-WORLD-v1`, `CLEANROOM-WORLD-v2`), errDeclarationFormat},
		{"format a number", edit(`"CLEANROOM-WORLD-v1"`, `1`), errDeclarationShape},
		{"interpreter path", edit(`["python3"]`, `["/usr/bin/python3"]`), errDeclarationValue},
		{"interpreter relative path", edit(`["python3"]`, `["tools/py"]`), errDeclarationValue},
		{"interpreter dotdot", edit(`["python3"]`, `[".."]`), errDeclarationValue},
		{"interpreter twice", edit(`["python3"]`, `["python3", "python3"]`), errDeclarationValue},
		{"instrument outside experiment/", edit(`"experiment/fixtures"`, `"vectors/public"`), errDeclarationValue},
		{"instrument escapes", edit(`"experiment/fixtures"`, `"experiment/../x"`), errDeclarationValue},
		{"instrument is the declaration", edit(`"experiment/fixtures"`, `"experiment/world.json"`), errDeclarationValue},
		{"instrument empty", edit(`["experiment/holdout-observation-v1.schema.json", "experiment/holdout-recipe-v1.schema.json", "experiment/fixtures"]`, `[]`), errDeclarationValue},
		{"reference in the holdout", edit(`governance/py-reference.json`, `governance/holdout/INDEX.json`), errDeclarationValue},
		{"reference is the record", edit(`governance/py-reference.json`, `governance/blind-run.json`), errDeclarationValue},
		{"reference absolute", edit(`governance/py-reference.json`, `/etc/passwd`), errDeclarationValue},
		{"class lower case", edit(`"PY_REFERENCE_DEFECT"`, `"py defect"`), errDeclarationValue},
		{"class twice", edit(`"PY_REFERENCE_DEFECT"`, `"SPEC_GAP"`), errDeclarationValue},
		{"classes empty", edit(`["SPEC_GAP", "PY_REFERENCE_DEFECT"]`, `[]`), errDeclarationValue},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseDeclaration([]byte(c.doc), "w.json")
			if !errors.Is(err, c.rule) {
				t.Fatalf("%v, want %q", err, c.rule)
			}
			if !strings.Contains(err.Error(), "w.json") {
				t.Errorf("%v does not name the file", err)
			}
		})
	}
}

// A world without world.json is the reference protocol's, member for
// member (spelled out here, not read from the code's defaults).
func TestNoDeclarationIsTheReferenceProtocol(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d, err := w.Declaration()
	if err != nil {
		t.Fatal(err)
	}
	want := &Declaration{
		AdapterInterpreters: []string{"node"},
		Instrument: []string{"experiment/evidence.mjs", "experiment/holdout_schema.mjs", "experiment/holdout_score_core.mjs",
			"experiment/holdout_runner.mjs", "experiment/run_state.mjs", "experiment/holdout-observation-v1.schema.json",
			"experiment/holdout-recipe-v1.schema.json", "experiment/fixtures"},
		FindingClasses: []string{"SPEC_GAP", "SPEC_IMPLEMENTATION_CONFLICT", "JS_CHECKER_DEFECT", "GO_PRODUCER_DEFECT",
			"VECTOR_ORACLE_DEFECT", "JCS_DEPENDENCY_DIVERGENCE"},
	}
	if d.Declared || d.ReferenceAdapter != "" || !slices.Equal(d.AdapterInterpreters, want.AdapterInterpreters) ||
		!slices.Equal(d.Instrument, want.Instrument) || !slices.Equal(d.FindingClasses, want.FindingClasses) {
		t.Errorf("got %+v, want %+v", d, want)
	}
}

// A world's findings register carries the world's classes: the ones its
// world.json declares, else the reference protocol's six; and it lives in
// the state root.
func TestFindingsRegisterClasses(t *testing.T) {
	for _, tc := range []struct {
		name string
		w    func(testing.TB) *World
		want []string
	}{
		{"declared", declaredWorld, []string{"SPEC_GAP", "PY_REFERENCE_DEFECT"}},
		{"reference", newWorld, []string{"SPEC_GAP", "SPEC_IMPLEMENTATION_CONFLICT",
			"JS_CHECKER_DEFECT", "GO_PRODUCER_DEFECT", "VECTOR_ORACLE_DEFECT", "JCS_DEPENDENCY_DIVERGENCE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.w(t)
			reg, err := w.FindingsRegister()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(reg.Classes, tc.want) {
				t.Errorf("classes %v, want %v", reg.Classes, tc.want)
			}
			if want := filepath.Join(w.StateDir(), "findings"); reg.Log.Dir != want {
				t.Errorf("register in %s, want %s", reg.Log.Dir, want)
			}
		})
	}
}

// declaredWorld is the synthetic world declaring itself a Python-reference
// world (goodDeclaration), with a Python reference adapter and its
// descriptor, its release issued after the declaration was written.
func declaredWorld(t testing.TB) *World {
	t.Helper()
	return newWorldWith(t, func(w *World) {
		write := func(rel, body string) {
			t.Helper()
			if err := os.WriteFile(filepath.Join(w.Root, filepath.FromSlash(rel)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write(PackageDirName+"/"+DeclarationFile, goodDeclaration)
		write("governance/py_adapter.py", "import sys\n")
		write("governance/py-reference.json", `{"implementation": "python", "role": "reference", "command": ["python3", "governance/py_adapter.py", "{{CHALLENGES}}", "{{OUT}}"], "package_files": ["governance/py_adapter.py"], "binary_path": null, "binary_digest": null, "environment": null}`)
	})
}

// A declaring world pins its declared reference (a Python adapter) without
// --reference, digests its declared instrument (computed here on its own),
// and verifies with no reference-protocol member reported missing.
func TestDeclaredWorldPinsAndVerifies(t *testing.T) {
	t.Parallel()
	w := declaredWorld(t)
	tr, err := Pin(bg, w, PinOptions{})
	if err != nil {
		t.Fatalf("pin with the declared reference: %v", err)
	}
	ref := tr.Record.Adapters[0]
	if ref.Implementation != "python" || !slices.Equal(ref.Command, []string{"python3", "governance/py_adapter.py", PlaceholderChallenges, PlaceholderOut}) {
		t.Errorf("pinned reference %+v", ref)
	}
	pkg := w.PackageDir()
	files := indepFiles(t, pkg, "", func(p string) bool {
		return p == "experiment/holdout-observation-v1.schema.json" || p == "experiment/holdout-recipe-v1.schema.json" || strings.HasPrefix(p, "experiment/fixtures/")
	})
	if want := indepDigest(files); tr.Record.InstrumentDigest != want {
		t.Errorf("instrument_digest %s, the declared members digest to %s", tr.Record.InstrumentDigest, want)
	}
	rep := mustVerify(t, w, VerifyOptions{})
	for _, c := range rep.Checks {
		if c.Name == "instrument members present" && (c.Skipped != "" || !c.OK) {
			t.Errorf("instrument check %+v: a declaring world has no reference-protocol members to miss", c)
		}
		for _, d := range c.Details {
			if strings.Contains(d, ".mjs") {
				t.Errorf("verify names a .mjs member in a Python world: %s", d)
			}
		}
	}
}

// The declared interpreters are the only ones: a node command in a
// python3 world is a command that executes something not frozen.
func TestDeclaredInterpretersOnly(t *testing.T) {
	t.Parallel()
	w := declaredWorld(t)
	if err := os.WriteFile(filepath.Join(w.Root, "governance", "a.mjs"), []byte("//\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Pin(bg, w, PinOptions{Reference: AdapterSpec{Implementation: "js", PackageFiles: []string{"governance/a.mjs"},
		Command: []string{"node", "governance/a.mjs", PlaceholderChallenges, PlaceholderOut}}})
	if !errors.Is(err, errCommand) {
		t.Fatalf("pin of a node reference in a python3 world: %v, want %q", err, errCommand)
	}
	// With no command the default uses the first declared interpreter.
	tr, err := Pin(bg, w, PinOptions{Reference: AdapterSpec{Implementation: "py", PackageFiles: []string{"governance/py_adapter.py"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Record.Adapters[0].Command[0]; got != "python3" {
		t.Errorf("default command[0] %q, want python3", got)
	}
}

// run pin with no reference: the declared descriptor when it exists, a
// named refusal when it does not, and a named refusal in a world with
// neither a declaration nor the reference protocol's adapter.
func TestPinWithoutReference(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if _, err := Pin(bg, w, PinOptions{}); !errors.Is(err, errNoReference) || !strings.Contains(err.Error(), "--reference") {
		t.Errorf("no declaration, no TRVM adapter: %v, want %q naming --reference", err, errNoReference)
	}
	if _, err := os.Stat(w.RecordPath()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused pin left a record: %v", err)
	}
	d := declaredWorld(t)
	if err := os.Remove(filepath.Join(d.Root, "governance", "py-reference.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := Pin(bg, d, PinOptions{}); !errors.Is(err, errNoReference) || !strings.Contains(err.Error(), "governance/py-reference.json") {
		t.Errorf("declared descriptor absent: %v, want %q naming it", err, errNoReference)
	}
}

// A malformed declaration stops pin and shows in verify, by rule.
func TestMalformedDeclarationRefused(t *testing.T) {
	t.Parallel()
	w := declaredWorld(t)
	if _, err := Pin(bg, w, PinOptions{}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(w.PackageDir(), filepath.FromSlash(DeclarationFile))
	if err := os.WriteFile(p, []byte(strings.Replace(goodDeclaration, `"format"`, `"extra": 1, "format"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(bg, w, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); !errors.Is(err, errDeclarationShape) {
		t.Errorf("verify of a world with an unknown declaration member: %v, want %q", err, errDeclarationShape)
	}
}
