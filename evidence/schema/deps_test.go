package schema_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The binaries and stages that never validate a schema must not link the
// JSON Schema library: its package initialiser compiles every draft's
// metaschema (about 3 ms) at every start, and the room binary starts twice
// per session. This is why schema validation is its own package.
func TestNotLinkedByTheRoom(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the import graph")
	}
	for _, pkg := range []string{
		"github.com/cleanroom-dev/cleanroom/cmd/cleanroom-room",
		"github.com/cleanroom-dev/cleanroom/harness/roomstage",
		"github.com/cleanroom-dev/cleanroom/sandbox/sandboxinit",
		"github.com/cleanroom-dev/cleanroom/evidence",
	} {
		out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for dep := range strings.FieldsSeq(string(out)) {
			if strings.HasPrefix(dep, "github.com/santhosh-tekuri/jsonschema") || dep == "github.com/cleanroom-dev/cleanroom/evidence/schema" {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}
