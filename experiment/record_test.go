package experiment

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// The identities the reference computed for the two shared worlds
// (TRVM-FORMATS §1 table), written here by hand, never by this code.
const (
	wantRunID     = "brun-c39b708f1d96f2b6df1562d66c33c3eee3d13e2307274e42adbff79025b13ad8"
	wantRunIDRev2 = "brun-e553dc1d6cd63e1b9a9ff0aa452e2515bad8888dcf19fdaf5c929f1509cb6cd0"
	wantInstr     = "1f763b5b0b48329505c22c4f0142d22ee22e84cda4ef5182a7297d7382c2f977"
)

func TestConformanceRunID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		world, want string
	}{
		{"world", wantRunID},
		{"world-rev2", wantRunIDRev2},
	} {
		t.Run(tc.world, func(t *testing.T) {
			p := filepath.Join(testshared.World(t, tc.world), "governance", "blind-run.json")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			r, err := ParseRecord(b, p)
			if err != nil {
				t.Fatalf("ParseRecord: %v", err)
			}
			if got := r.ComputeRunID(); got != tc.want {
				t.Errorf("run_id = %s, want %s", got, tc.want)
			}
			if r.RunID != tc.want {
				t.Errorf("recorded run_id = %s, want %s", r.RunID, tc.want)
			}
			// blind-run.json == renderRun(record).
			out, err := r.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, b) {
				t.Errorf("re-rendered record differs from %s:\n%s", p, out)
			}
			if r.InstrumentDigest != wantInstr {
				t.Errorf("instrument_digest = %s", r.InstrumentDigest)
			}
		})
	}
}

func TestConformancePinnedReceiptBytes(t *testing.T) {
	t.Parallel()
	world := testshared.World(t, "world")
	b, err := os.ReadFile(filepath.Join(world, "governance", "blind-run.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRecord(b, "blind-run.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(world, "governance", "receipts", wantRunID+".PINNED.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := NewReceipt(r, "pinned", nil).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("PINNED receipt differs:\n got %s\nwant %s", got, want)
	}
	rc, err := ParseReceipt(want, "PINNED receipt")
	if err != nil {
		t.Fatalf("ParseReceipt: %v", err)
	}
	if rc.RunID != wantRunID || rc.Status != StatusPinned || rc.PreviousRunID != nil {
		t.Errorf("receipt read as %+v", rc)
	}
}

// The instrument digest recomputes from the release's recorded
// experiment_files: the .mjs members are absent from ../shared, but their
// sha256 values are recorded, so the list stands in for them.
func TestConformanceInstrumentDigestFromRecordedList(t *testing.T) {
	t.Parallel()
	pkg := filepath.Join(testshared.World(t, "world"), "docs", "spec", "proof-wire")
	rel, err := ReadRelease(filepath.Join(pkg, "SPEC-RELEASE.json"))
	if err != nil {
		t.Fatal(err)
	}
	var entries []pkgwalk.FileDigest
	for _, f := range rel.ExperimentFiles {
		for _, m := range Instrument {
			if f.Path == m || strings.HasPrefix(f.Path, m+"/") {
				entries = append(entries, f)
			}
		}
	}
	if len(entries) != 11 {
		t.Fatalf("%d instrument files in experiment_files, want 11", len(entries))
	}
	if got := pkgwalk.PathListDigest(entries); got != wantInstr {
		t.Errorf("instrument digest = %s, want %s", got, wantInstr)
	}
}

// The preimage of the real record, checked line by line against §5.2's
// stated form.
func TestPreimageForm(t *testing.T) {
	t.Parallel()
	r := &Record{Type: RecordType, Status: StatusPinned, SpecReleaseID: "srel-x", BlindPackageID: "bpkg-y",
		InstrumentDigest: "i", BlindContractRevision: 12, Adapters: []Adapter{
			{Implementation: "zz", Role: RoleCandidate, Command: []string{"bin/zz", "a\tb"}, PackageFiles: []string{"b", "a"},
				PackageDigest: "p2", BinaryDigest: strPtr("d"), BinaryPath: strPtr("bin/zz"), Environment: &Environment{"go", "m", "v"}},
			{Implementation: "aa", Role: RoleReference, Command: []string{"node", "x.mjs"}, PackageFiles: []string{"x.mjs"}, PackageDigest: "p1"},
		}}
	want := strings.Join([]string{
		"TRVM-BLIND-RUN-CORE-v1",
		"type\t\"TRVM-BLIND-IMPLEMENTATION-RUN-v3\"",
		"status\t\"PINNED\"",
		"spec_release_id\t\"srel-x\"",
		"blind_package_id\t\"bpkg-y\"",
		"instrument_digest\t\"i\"",
		"blind_contract_revision\t12",
		"adapters\t2",
		"adapter[0].implementation\t\"aa\"",
		"adapter[0].role\t\"reference\"",
		"adapter[0].package_digest\t\"p1\"",
		"adapter[0].binary_digest\tnull",
		"adapter[0].binary_path\tnull",
		"adapter[0].command\t2",
		"adapter[0].command[0]\t\"node\"",
		"adapter[0].command[1]\t\"x.mjs\"",
		"adapter[0].package_files\t1",
		"adapter[0].package_files[0]\t\"x.mjs\"",
		"adapter[0].environment.toolchain\tnull",
		"adapter[0].environment.model\tnull",
		"adapter[0].environment.tool_version\tnull",
		"adapter[1].implementation\t\"zz\"",
		"adapter[1].role\t\"candidate\"",
		"adapter[1].package_digest\t\"p2\"",
		"adapter[1].binary_digest\t\"d\"",
		"adapter[1].binary_path\t\"bin/zz\"",
		"adapter[1].command\t2",
		"adapter[1].command[0]\t\"bin/zz\"",
		"adapter[1].command[1]\t\"a\\tb\"",
		"adapter[1].package_files\t2",
		"adapter[1].package_files[0]\t\"a\"",
		"adapter[1].package_files[1]\t\"b\"",
		"adapter[1].environment.toolchain\t\"go\"",
		"adapter[1].environment.model\t\"m\"",
		"adapter[1].environment.tool_version\t\"v\"",
	}, "\n") + "\n"
	if got := r.Preimage(); got != want {
		t.Errorf("preimage:\n%s\nwant:\n%s", got, want)
	}
	// Reordering adapters or package files does not move the identity;
	// changing the status does.
	r2 := r.Clone()
	slices.Reverse(r2.Adapters)
	slices.Reverse(r2.Adapters[0].PackageFiles)
	if r2.ComputeRunID() != r.ComputeRunID() {
		t.Error("adapter order moved run_id")
	}
	r2.Status = StatusAborted
	if r2.ComputeRunID() == r.ComputeRunID() {
		t.Error("status did not move run_id")
	}
}

// Bad records, each refused by the rule it breaks (AA1, AA5, AA6, AA7,
// AA9, AA10, X).
func TestParseRecordRefusals(t *testing.T) {
	t.Parallel()
	base, err := os.ReadFile(filepath.Join(testshared.RepoRoot(t), "testdata", "run", "record-pinned.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseRecord(base, "base"); err != nil {
		t.Fatalf("the honest record is refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(string) string
		rule error
	}{
		{"AA1 duplicate status", func(s string) string {
			return strings.Replace(s, `"status": "PINNED",`, `"status": "REVEALED", "status": "PINNED",`, 1)
		}, evidence.ClassDuplicateName},
		{"AA5 verdict_override", func(s string) string {
			return strings.Replace(s, `"status": "PINNED",`, `"status": "PINNED", "verdict_override": "COMPLETE_AND_VERIFIED",`, 1)
		}, errRunShape},
		{"AA6 blindness on an adapter", func(s string) string {
			return strings.Replace(s, `"role": "reference",`, `"role": "reference", "blindness": "DISQUALIFIED",`, 1)
		}, errRunShape},
		{"AA7 instrument_files", func(s string) string {
			return strings.Replace(s, `"status": "PINNED",`, `"status": "PINNED", "instrument_files": [],`, 1)
		}, errRunShape},
		{"AA9 raw 0xFF", func(s string) string { return strings.Replace(s, "PINNED", "PINN\xffED", 1) }, evidence.ClassInvalidUTF8},
		{"AA10 role arbiter", func(s string) string { return strings.Replace(s, `"role": "reference"`, `"role": "arbiter"`, 1) }, errRole},
		{"X escape label", func(s string) string {
			return strings.Replace(s, `"implementation": "ref"`, `"implementation": "../../../escape"`, 1)
		}, errLabel},
		{"missing member", func(s string) string { return strings.Replace(s, `"blind_contract_revision": 1,`, ``, 1) }, errRunShape},
		{"wrong type", func(s string) string {
			return strings.Replace(s, `"blind_contract_revision": 1,`, `"blind_contract_revision": "1",`, 1)
		}, errRunShape},
		{"unknown status", func(s string) string { return strings.Replace(s, `"status": "PINNED"`, `"status": "FROZEN"`, 1) }, errUnknownStatus},
		{"wrong type name", func(s string) string { return strings.Replace(s, "RUN-v3", "RUN-v2", 1) }, errRecordType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.edit(string(base)))
			if bytes.Equal(b, base) {
				t.Fatal("edit did not apply")
			}
			_, err := ParseRecord(b, "x")
			if !errors.Is(err, tc.rule) {
				t.Fatalf("err = %v, want %v", err, tc.rule)
			}
		})
	}
}

// FuzzParseRecord: no input panics the record, receipt or RESULT readers,
// and a record that is accepted re-renders to bytes that read back to the
// same identity.
func FuzzParseRecord(f *testing.F) {
	// The honest record is the seed that reaches the render/re-read arm;
	// losing it would leave the fuzzer exercising refusals only.
	seed, err := os.ReadFile(filepath.Join("..", "testdata", "run", "record-pinned.json"))
	if err != nil {
		f.Fatalf("the fuzzer's accepted-record seed: %v", err)
	}
	f.Add(seed)
	f.Add([]byte(`{"type":"TRVM-BLIND-RUN-RECEIPT-v2","adapters":[{"environment":{}}]}`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseReceipt(b, "fuzz")
		_, _ = ParseResult(b, "fuzz")
		r, err := ParseRecord(b, "fuzz")
		if err != nil {
			return
		}
		out, err := r.Bytes()
		if err != nil {
			t.Fatalf("accepted record does not render: %v", err)
		}
		back, err := ParseRecord(out, "rendered")
		if err != nil {
			t.Fatalf("rendered record refused: %v\n%s", err, out)
		}
		if back.ComputeRunID() != r.ComputeRunID() {
			t.Fatalf("identity moved across a render")
		}
	})
}

// Run problems and release errors are spelled one way: the file, the
// quoted pointer (release errors), the rule, the detail and the cause, each
// only when present.
func TestProblemText(t *testing.T) {
	t.Parallel()
	cause := errors.New("cause")
	cases := []struct {
		err  error
		want string
	}{
		{&RunProblem{Rule: errRunID}, "run_id does not identify the record"},
		{&RunProblem{Rule: errRunID, File: "governance/blind-run.json", Detail: "d", Err: cause},
			"governance/blind-run.json: run_id does not identify the record: d: cause"},
		{&ReleaseError{Rule: errUnknownMember, Pointer: "/signed_off"}, `"/signed_off": unknown member`},
		{&ReleaseError{Rule: errUnknownMember, File: "SPEC-RELEASE.json", Pointer: "/x", Detail: "d", Err: cause},
			`SPEC-RELEASE.json: "/x": unknown member: d: cause`},
		{&ReleaseError{Rule: errIncomplete, File: "p", Err: cause}, "p: package is missing files it records: cause"},
	}
	for _, c := range cases {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}
