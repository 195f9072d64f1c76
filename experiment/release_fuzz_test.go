package experiment

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
)

// FuzzParseRelease: no input panics the reader, and every record it
// accepts writes back to bytes that read to the same record and identity.
func FuzzParseRelease(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"release_type":"TRVM-PROOF-WIRE-SPEC-RELEASE-v1"}`))
	if b, err := os.ReadFile(filepath.Join(testshared.RepoRoot(f), "..", "shared", "trvm", "world", "docs", "spec", "proof-wire", ReleaseFile)); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRelease(b)
		if err != nil {
			return
		}
		id, err := r.ID()
		if err != nil {
			t.Fatalf("accepted record has no identity: %v", err)
		}
		out, err := r.Bytes()
		if err != nil {
			t.Fatalf("accepted record does not write: %v", err)
		}
		back, err := ParseRelease(out)
		if err != nil {
			t.Fatalf("written record does not read back: %v\n%s", err, out)
		}
		id2, _ := back.ID()
		out2, _ := back.Bytes()
		if id2 != id || !bytes.Equal(out, out2) {
			t.Fatalf("round trip moved the record: %s → %s", id, id2)
		}
	})
}
