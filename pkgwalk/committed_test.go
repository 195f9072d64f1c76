package pkgwalk_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// r2 is a committed challenge whose id is not H<n>: the challenge-shape
// rule does not know it; the committed-challenge rule must.
const r2 = `{"id":"R2","name":"checksum-of-empty","fixture":{"input":""},"recipe":[{"op":"SUM","path":"input"}],"predicates":[{"op":"EQ","path":"S.sum","value":0},{"op":"HOLDS","path":"S.ok"}],"note":"n"}`

func TestCommittedChallengeRule(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, file, body string
		leak             bool
	}{
		{"verbatim", "vectors/r2.json", r2, true},
		{"re-indented", "vectors/r2.json", "{\n  \"id\": \"R2\",\n  \"name\": \"checksum-of-empty\",\n  \"fixture\": { \"input\": \"\" },\n  \"recipe\": [ { \"op\": \"SUM\", \"path\": \"input\" } ],\n  \"predicates\": [\n    { \"op\": \"EQ\", \"path\": \"S.sum\", \"value\": 0.0 },\n    { \"op\": \"HOLDS\", \"path\": \"S.ok\" }\n  ],\n  \"note\": \"n\"\n}\n", true},
		{"members reordered, note and name dropped", "vectors/r2.json", `{"predicates":[{"path":"S.sum","value":0,"op":"EQ"},{"path":"S.ok","op":"HOLDS"}],"id":"R2"}`, true},
		{"id escaped", "vectors/r2.json", `{"id":"\u0052\u0032","recipe":[{"path":"input","op":"SUM"}]}`, true},
		{"nested in another document", "vectors/cases.json", `{"cases":[{"label":"R2","expect":[{"op":"EQ","path":"S.sum","value":0},{"op":"HOLDS","path":"S.ok"}]}]}`, true},
		{"in a Markdown code block", "NOTES.md", "# Notes\n\nChallenge R2 expects:\n\n```json\n[ {\"op\": \"EQ\", \"path\": \"S.sum\", \"value\": 0},\n  {\"op\": \"HOLDS\", \"path\": \"S.ok\"} ]\n```\n", true},
		{"in a JavaScript literal", "src/k.mjs", "export const K = { id: \"R2\", recipe: [{\"op\": \"SUM\", \"path\": \"input\"}] };\n", true},
		{"the id alone", "SPEC.md", "Challenge R2 is about the empty input.\n", false},
		{"the predicates without the id", "vectors/p.json", `[{"op":"EQ","path":"S.sum","value":0},{"op":"HOLDS","path":"S.ok"}]`, false},
		{"a longer id with the predicates", "vectors/p.json", `{"id":"R23","predicates":[{"op":"EQ","path":"S.sum","value":0},{"op":"HOLDS","path":"S.ok"}]}`, false},
		{"one predicate of two", "vectors/p.json", `{"id":"R2","predicates":[{"op":"EQ","path":"S.sum","value":0}]}`, false},
		{"the predicates inside a string", "vectors/p.json", `{"id":"R2","s":"[{\"op\":\"EQ\",\"path\":\"S.sum\",\"value\":0},{\"op\":\"HOLDS\",\"path\":\"S.ok\"}]"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			hold := filepath.Join(root, "holdout")
			writeFile(t, filepath.Join(hold, "INDEX.json"), `{"entries":[{"file":"R2.json","id":"R2"}]}`)
			writeFile(t, filepath.Join(hold, "R2.json"), r2)
			pkg := filepath.Join(root, "pkg")
			writeFile(t, filepath.Join(pkg, "SPEC.md"), "# A protocol\n")
			writeFile(t, filepath.Join(pkg, c.file), c.body)
			tree, err := pkgwalk.Walk(pkg, pkgwalk.WalkOptions{HoldoutDir: hold})
			if err != nil {
				t.Fatal(err)
			}
			got := hasProblem(tree.Problems, c.file, pkgwalk.ErrLeakCommittedChallenge)
			if got != c.leak {
				t.Fatalf("%s refused %v, want %v (problems %v)", c.file, got, c.leak, tree.Problems)
			}
			if c.leak {
				err := tree.Err()
				if !errors.Is(err, pkgwalk.ErrLeakCommittedChallenge) || !strings.Contains(err.Error(), `"R2"`) || !strings.Contains(err.Error(), c.file) {
					t.Errorf("refusal %v does not name the rule, challenge R2 and %s", err, c.file)
				}
			}
			// Without the holdout the rule has nothing to match.
			bare, err := pkgwalk.Walk(pkg, pkgwalk.WalkOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if hasProblem(bare.Problems, c.file, pkgwalk.ErrLeakCommittedChallenge) {
				t.Errorf("refused with no holdout")
			}
		})
	}
}
