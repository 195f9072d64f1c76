package amber

import (
	"bytes"
	"testing"
)

// FuzzReadManifest: never panics; whatever it accepts re-encodes to a
// manifest it accepts again with the same values.
func FuzzReadManifest(f *testing.F) {
	d := "2026-02-01"
	h := testEntry(0).ManifestSHA256
	seed := &Manifest{SchemaVersion: SchemaVersion, CaseID: "A-1", Profile: "p", Provenance: map[string]any{"k": "v"},
		CutoffUTC: "2026-01-15T00:00:00Z", CutoffCommit: h[:40], TimeToTopology: TimeToTopology{"r", "e"},
		CutoffRule: CutoffRule{"r", h}, SpecSHA256: h, ProtocolSHA256: h, Artifacts: Artifacts{h, h},
		Construction:         Construction{"2.39.5", "3", "sha1", 10},
		CandidateInputBundle: "c", AvailableInformationManifest: "a",
		Eligibility: Eligibility{FullIsolation, "e", []string{}}, Producer: Producer{"p", "k"},
		LeakCheck: LeakCheck{"p", d, "passed"}, Retirement: Retirement{State: "retired", Date: &d}}
	b, err := seed.Encode()
	if err != nil {
		f.Fatal(err)
	}
	if _, _, err := ReadManifest("seed", b); err != nil {
		f.Fatalf("seed refused: %v", err)
	}
	f.Add(b)
	f.Add([]byte("a: &x 1\nb: *x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, _, err := ReadManifest("fuzz", b)
		if err != nil {
			return
		}
		enc, err := m.Encode()
		if err != nil {
			t.Fatalf("accepted manifest does not encode: %v", err)
		}
		m2, _, err := ReadManifest("re-encoded", enc)
		if err != nil {
			t.Fatalf("re-encoding refused: %v\n%s", err, enc)
		}
		enc2, _ := m2.Encode()
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n%s\n%s", enc, enc2)
		}
	})
}

// FuzzParseBundleHeader: never panics; an accepted header has exactly one
// ref of the object format's length.
func FuzzParseBundleHeader(f *testing.F) {
	f.Add([]byte("# v3 git bundle\n@object-format=sha1\n0123456789abcdef0123456789abcdef01234567 refs/cleanroom/cutoff\n\nPACK"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseBundleHeader(bytes.NewReader(b))
		if err != nil {
			return
		}
		want := map[string]int{"sha1": 40, "sha256": 64}[h.ObjectFormat]
		if want == 0 || len(h.RefOID) != want || h.RefName == "" || !bytes.HasPrefix(b[h.Length:], []byte("PACK")) {
			t.Fatalf("accepted %+v from %q", h, b)
		}
	})
}

// FuzzParseEntry: an accepted entry is canonical: Canonical gives back the
// exact input bytes.
func FuzzParseEntry(f *testing.F) {
	line, _ := testEntry(1).Canonical()
	f.Add(line)
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseEntry(b)
		if err != nil {
			return
		}
		c, err := e.Canonical()
		if err != nil || !bytes.Equal(c, b) {
			t.Fatalf("accepted %q, canonical %q (%v)", b, c, err)
		}
	})
}
