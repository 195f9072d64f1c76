package schema_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence/schema"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The x-sorted vocabulary is built on the first Compile instead of at
// start-up. This test runs in a fresh process where it is the only test,
// so that its goroutines race to be that first use: every one must still
// get a schema refused by the metaschema (the draft's, or the vocabulary's
// for x-sorted).
func TestFirstCompileConcurrent(t *testing.T) {
	t.Parallel()
	if os.Getenv("CLEANROOM_FIRST_COMPILE") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFirstCompileConcurrent$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "CLEANROOM_FIRST_COMPILE=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fresh process: %v\n%s", err, out)
		}
		// The test's own PASS line: a bare "PASS" is also what a child
		// that matched no test prints.
		if !strings.Contains(string(out), "--- PASS: TestFirstCompileConcurrent") {
			t.Fatalf("fresh process did not pass:\n%s", out)
		}
		return
	}
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			if i%2 == 0 {
				_, errs[i] = schema.Compile("bad", []byte(`{"minLength":-1}`))
			} else {
				_, errs[i] = schema.Compile("sorted", []byte(`{"type":"array","x-sorted":"yes"}`))
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		var ve *jsonschema.SchemaValidationError
		if !errors.As(err, &ve) {
			t.Errorf("goroutine %d: %v, want the metaschema's *jsonschema.SchemaValidationError", i, err)
		}
	}
}
