package main

import "testing"

// "--json" as the value of another flag does not ask for JSON: a command
// whose flags parsed is judged by its parsed --json alone. The fallback
// that reads the raw arguments is for a command line that did not parse
// (an unknown flag or command), where nothing was parsed to ask.
func TestJSONErrorDocumentOnlyWhenJSONWasAsked(t *testing.T) {
	t.Parallel()
	w := t.TempDir()
	for _, c := range []struct {
		name     string
		args     []string
		wantJSON bool
	}{
		{"--json as the value of --reason", []string{"run", "abort", "--world", w, "--reason", "--json"}, false},
		{"--json given, the command fails", []string{"run", "abort", "--world", w, "--reason", "r", "--json"}, true},
		{"--json given after an unknown flag", []string{"run", "abort", "--frobnicate", "--json"}, true},
		{"--json given, an unknown command", []string{"frobnicate", "--json"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, c.args...)
			if code == 0 {
				t.Fatalf("%v succeeded; the test needs a failure\n%s", c.args, stderr)
			}
			if got := stdout != ""; got != c.wantJSON {
				t.Errorf("%v: exit %d, stdout %q; want a JSON document: %v", c.args, code, stdout, c.wantJSON)
			}
		})
	}
}
