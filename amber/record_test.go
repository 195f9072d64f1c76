package amber

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/sign"
)

// signedRecord writes a record as the runner would, without running: the
// case is built and indexed, the record cites the index's checkpoint.
func signedRecord(t *testing.T) (runFixture, string, string, string) {
	t.Helper()
	f := newRunFixture(t)
	ix, err := LoadIndex(f.ixDir, "")
	if err != nil {
		t.Fatal(err)
	}
	m, msha, err := VerifySignedManifest(f.c.Dir, f.s.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	proof, err := ix.Prove(m.CaseID)
	if err != nil {
		t.Fatal(err)
	}
	root := ix.Checkpoint.Root
	r := &RunRecord{Type: RecordType, CaseID: m.CaseID, ManifestSHA256: msha, IndexVersion: ix.Checkpoint.Size,
		IndexRoot: encodeB64(root[:]), RetirementCheck: RetirementCheck{State: "active", CheckedAt: "2026-02-02T00:00:00Z"},
		SealProbe: json.RawMessage(`{"outcome":"sealed"}`), IsolationCheck: json.RawMessage(`{"enforced":true}`),
		Candidate: Candidate{Provider: "p", Model: "m"}, Scores: map[string]float64{"answer": 1},
		TerminalState: StateValidSuccess, Artifacts: []Artifact{}, StartedUTC: "2026-02-02T00:00:00Z",
		FinishedUTC: "2026-02-02T00:01:00Z", Comparability: ComparabilityOf(m), IndexProof: string(proof), Reason: "test"}
	dir := t.TempDir()
	if _, err := WriteRecord(dir, r, f.s); err != nil {
		t.Fatal(err)
	}
	sum, err := NewSummary(m, msha, ix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteSummary(dir, sum, f.s); err != nil {
		t.Fatal(err)
	}
	vkey, _ := os.ReadFile(filepath.Join(f.ixDir, IndexPubFile))
	return f, filepath.Join(dir, RecordFile), filepath.Join(dir, SummaryFile), string(vkey)
}

// resignRecord rewrites the record through edit and signs it again with
// the producer key (a producer-side lie the signature cannot catch).
func resignRecord(t *testing.T, path string, s *sign.Signer, edit func(*RunRecord)) {
	t.Helper()
	b, _ := os.ReadFile(path)
	r, err := ReadRecord(path, b)
	if err != nil {
		t.Fatal(err)
	}
	edit(r)
	if _, err := WriteRecord(filepath.Dir(path), r, s); err != nil {
		t.Fatal(err)
	}
}

func TestRecordByValue(t *testing.T) {
	t.Parallel()
	f, rec, sum, vkey := signedRecord(t)
	rep, err := VerifyRecordByValue(rec, f.s.PublicKey(), vkey, sum, f.specDir)
	if err != nil {
		t.Fatalf("by value: %v", err)
	}
	if strings.Join(rep.Passed, ",") != "record-signature,record-rules,record-index,record-summary,record-spec" {
		t.Errorf("passed %v", rep.Passed)
	}
	// The record is JSON.stringify(v, null, 1) bytes the strict reader reads.
	b, _ := os.ReadFile(rec)
	if _, err := evidence.Read(b); err != nil {
		t.Errorf("record does not read back through evidence.Read: %v", err)
	}
	sshKeygenVerify(t, f.s, sign.NamespaceRunRecord, rec)
	sshKeygenVerify(t, f.s, sign.NamespaceSummary, sum)

	_, other := newSigner(t)
	otherIx, _ := newTestIndex(t, 3)
	otherVKey, _ := os.ReadFile(filepath.Join(otherIx, IndexPubFile))
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, rec, sum, spec string) (vkey string)
		check  string
		want   error
	}{
		{"edited record", func(t *testing.T, rec, sum, spec string) string {
			b, _ := os.ReadFile(rec)
			if err := os.WriteFile(rec, bytes.Replace(b, []byte(`"answer": 1`), []byte(`"answer": 2`), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			return vkey
		}, CheckRecordSignature, signBadSignature},
		{"record signed by another key", func(t *testing.T, rec, sum, spec string) string {
			resignRecord(t, rec, other, func(*RunRecord) {})
			return vkey
		}, CheckRecordSignature, signWrongKey},
		{"record claims another oracle", func(t *testing.T, rec, sum, spec string) string {
			resignRecord(t, rec, f.s, func(r *RunRecord) { r.Comparability.OraclePackSHA256 = strings.Repeat("0", 64) })
			return vkey
		}, CheckRecordIndex, errMismatch},
		{"record cites another index version", func(t *testing.T, rec, sum, spec string) string {
			resignRecord(t, rec, f.s, func(r *RunRecord) { r.IndexVersion++ })
			return vkey
		}, CheckRecordIndex, errMismatch},
		{"proof checked with another index key", func(t *testing.T, rec, sum, spec string) string {
			return string(otherVKey)
		}, CheckRecordIndex, nil},
		{"summary disagrees", func(t *testing.T, rec, sum, spec string) string {
			b, _ := os.ReadFile(sum)
			s, err := ReadSummary(sum, b)
			if err != nil {
				t.Fatal(err)
			}
			s.CutoffUTC = "2026-01-15T00:00:01Z"
			if _, err := WriteSummary(filepath.Dir(sum), s, f.s); err != nil {
				t.Fatal(err)
			}
			return vkey
		}, CheckRecordSummary, errMismatch},
		{"another spec", func(t *testing.T, rec, sum, spec string) string {
			writeFile(t, spec, "# Core, edited\n")
			return vkey
		}, CheckRecordSpec, errMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, filepath.Dir(rec))
			spec := filepath.Join(t.TempDir(), "CORE.md")
			sb, _ := os.ReadFile(f.specDir)
			if err := os.WriteFile(spec, sb, 0o644); err != nil {
				t.Fatal(err)
			}
			r, s := filepath.Join(dir, RecordFile), filepath.Join(dir, SummaryFile)
			vk := tc.tamper(t, r, s, spec)
			_, err := VerifyRecordByValue(r, f.s.PublicKey(), vk, s, spec)
			if got := CheckOf(err); got != tc.check {
				t.Fatalf("failed check %q (%v), want %q", got, err, tc.check)
			}
			if tc.want != nil && !isRule(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
