package experiment

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// synthetic copies testdata/release/world into a temporary directory and
// returns the package and holdout directories of the copy.
func synthetic(t testing.TB) (pkg, holdout string) {
	t.Helper()
	dst := t.TempDir()
	copyTree(t, filepath.Join(testshared.RepoRoot(t), "testdata", "release", "world"), dst)
	return filepath.Join(dst, "docs", "spec", "proof-wire"), filepath.Join(dst, "governance", "holdout")
}

var synthOpts = IssueOptions{SpecRevision: 3, ExperimentRevision: 5, PublicCorpusRevision: 2}

func issueSynthetic(t testing.TB) (pkg, holdout string, is *Issued) {
	t.Helper()
	pkg, holdout = synthetic(t)
	opts := synthOpts
	opts.HoldoutDir = holdout
	is, err := IssueRelease(pkg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return pkg, holdout, is
}

// Independent re-statement of TRVM-FORMATS §3 for the test's expectations:
// its own walk (filepath.WalkDir), its own path-list digest and a preimage
// spelled out by hand. The fixture's paths are ASCII, so byte order is the
// UTF-16 order.
func indepFiles(t testing.TB, root, prefix string, keep func(string) bool) [][2]string {
	t.Helper()
	var out [][2]string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if !keep(rel) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out = append(out, [2]string{prefix + rel, hex.EncodeToString(sum[:])})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func indepDigest(files [][2]string) string {
	var b strings.Builder
	for _, f := range files {
		b.WriteString(f[0] + "\n" + f[1] + "\n")
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

func TestIssueSyntheticIndependently(t *testing.T) {
	t.Parallel()
	pkg, holdout, is := issueSynthetic(t)
	all := func(string) bool { return true }
	spec := indepDigest(indepFiles(t, pkg, "", func(p string) bool {
		return !strings.HasPrefix(p, "vectors") && !strings.HasPrefix(p, "requirements") &&
			!strings.HasPrefix(p, "releases") && !strings.HasPrefix(p, "experiment/") && p != "SPEC-RELEASE.json"
	}))
	exp := indepDigest(indepFiles(t, pkg, "", func(p string) bool { return strings.HasPrefix(p, "experiment/") }))
	corpus := indepDigest(indepFiles(t, pkg, "", func(p string) bool { return strings.HasPrefix(p, "vectors/public/") }))
	jcs := indepDigest(indepFiles(t, pkg, "", func(p string) bool { return strings.HasPrefix(p, "vectors/jcs-upstream/") }))
	hold := indepDigest(indepFiles(t, holdout, "../../../governance/holdout/", all))
	pre := fmt.Sprintf(`TRVM-PROOF-WIRE-SPEC-RELEASE-v1|{"experiment_digest":"%s","experiment_revision":5,"holdout_commitment":"%s","holdout_entries":2,"jcs_upstream":{"commit":"19d51d7fe467d4706a3ff08adf8a748f29fc21e0","digest":"%s","repository":"github.com/cyberphone/json-canonicalization","vectors":3},"protocols":{"nested_composition":"CLEANROOM-SYNTHETIC-NESTING-v1","verified_claim":"CLEANROOM-SYNTHETIC-CLAIM-v1","wire":"TRVM-PROOF-WIRE-v1"},"public_corpus_digest":"%s","public_corpus_revision":2,"release_type":"TRVM-PROOF-WIRE-SPEC-RELEASE-v1","spec_digest":"%s","spec_revision":3}`,
		exp, hold, jcs, corpus, spec)
	sum := sha256.Sum256([]byte(pre))
	want := "srel-" + hex.EncodeToString(sum[:])
	if is.ID != want {
		t.Errorf("issued %s, independent computation %s", is.ID, want)
	}
	r := is.Release
	if r.SpecDigest != spec || r.ExperimentDigest != exp || r.PublicCorpusDigest != corpus || r.JCSUpstream.Digest != jcs || r.HoldoutCommitment != hold {
		t.Errorf("digests differ from the independent computation: %+v", r)
	}
	if got := len(r.SpecFiles); got != 3 {
		t.Errorf("spec_files has %d entries, want 3 (two .md and the schema)", got)
	}
	rec, err := os.ReadFile(filepath.Join(pkg, ReleaseFile))
	if err != nil {
		t.Fatal(err)
	}
	arch, err := os.ReadFile(filepath.Join(pkg, "releases", want+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec, arch) {
		t.Error("archive and SPEC-RELEASE.json differ")
	}
	// The reference byte form: one-space indent, members in §3.6 order.
	if !bytes.HasPrefix(rec, []byte("{\n \"release_type\": \"TRVM-PROOF-WIRE-SPEC-RELEASE-v1\",\n \"protocols\": {\n  \"wire\": ")) ||
		!bytes.HasSuffix(rec, []byte("\n \"spec_release_id\": \""+want+"\"\n}\n")) {
		t.Errorf("record not in the reference byte form:\n%s", rec)
	}
	order := regexp.MustCompile(`(?m)^ "([a-z_]+)":`).FindAllSubmatch(rec, -1)
	var names []string
	for _, m := range order {
		names = append(names, string(m[1]))
	}
	wantOrder := []string{"release_type", "protocols", "note", "spec_revision", "spec_digest", "spec_files",
		"experiment_revision", "experiment_digest", "experiment_files", "public_corpus_revision",
		"public_corpus_digest", "jcs_upstream", "holdout_commitment", "holdout_entries", "spec_release_id"}
	if !slices.Equal(names, wantOrder) {
		t.Errorf("member order %q", names)
	}

	rep, err := VerifyRelease(pkg, holdout)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Errorf("issued release does not verify: %q", rep.Failed())
	}
	// Re-issuing the same release is idempotent: identical archive bytes.
	opts := synthOpts
	opts.HoldoutDir = holdout
	again, err := IssueRelease(pkg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != want || !again.ArchiveExisted {
		t.Errorf("re-issue: %s existed=%v", again.ID, again.ArchiveExisted)
	}
	// The issue's own verification is returned: the same checks an
	// independent VerifyRelease makes, every one passed.
	if v := again.Verified; v == nil || !v.OK || v.SpecRelID != want || len(v.Checks) != len(rep.Checks) {
		t.Errorf("issue's verification %+v, want OK over %d checks for %s", v, len(rep.Checks), want)
	}
}

// The JCS fixture vectors say what they claim: input canonicalises to the
// outhex octets (which were written by an independent encoder).
func TestSyntheticJCSVectors(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(testshared.RepoRoot(t), "testdata", "release", "world", "docs", "spec", "proof-wire", "vectors", "jcs-upstream")
	for _, n := range []string{"order", "escapes", "empty"} {
		in, err := os.ReadFile(filepath.Join(dir, "input", n+".json"))
		if err != nil {
			t.Fatal(err)
		}
		hx, err := os.ReadFile(filepath.Join(dir, "outhex", n+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(string(hx)), " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		v, err := evidence.Read(in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := evidence.Canonical(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: canonical %s, outhex %s (%v)", n, got, want, err)
		}
	}
}

// topMemberAt returns, for each byte of a record in the reference byte
// form, the top-level member it belongs to ("" for the outer braces), and
// whether it is inside the note's string content.
func memberSpans(rec []byte) (owner []string, inNote []bool) {
	owner = make([]string, len(rec))
	inNote = make([]bool, len(rec))
	start := regexp.MustCompile(`(?m)^ "([a-z_]+)": `)
	locs := start.FindAllSubmatchIndex(rec, -1)
	for i, l := range locs {
		end := len(rec) - 2 // the closing "}\n"
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		name := string(rec[l[2]:l[3]])
		for j := l[0]; j < end; j++ {
			owner[j] = name
		}
		if name == "note" {
			// content between the value's quotes: after `": "` up to the `",\n`
			vs := l[1] + 1
			ve := bytes.Index(rec[vs:], []byte("\",\n")) + vs
			for j := vs; j < ve; j++ {
				inNote[j] = true
			}
		}
	}
	return owner, inNote
}

// Every single-byte change to an issued record, written to both
// SPEC-RELEASE.json and the archive (so the archive comparison is not what
// catches it), is caught — unless it is inside the NON_AUTHORITATIVE note,
// which is outside every identity and must not be.
func TestRecordPerturbationEveryByte(t *testing.T) {
	t.Parallel()
	pkg, holdout, is := issueSynthetic(t)
	rec, err := os.ReadFile(is.RecordPath)
	if err != nil {
		t.Fatal(err)
	}
	owner, inNote := memberSpans(rec)
	// Which check must fail when the perturbed record still reads.
	mustFail := map[string][]string{
		"protocols":              {"spec_release_id"},
		"spec_revision":          {"spec_release_id"},
		"experiment_revision":    {"spec_release_id"},
		"public_corpus_revision": {"spec_release_id"},
		"spec_digest":            {"spec_digest", "spec_release_id"},
		"spec_files":             {"spec_files"},
		"experiment_digest":      {"experiment_digest", "spec_release_id"},
		"experiment_files":       {"experiment_files"},
		"public_corpus_digest":   {"public_corpus_digest", "spec_release_id"},
		"holdout_commitment":     {"holdout_commitment", "spec_release_id"},
		"holdout_entries":        {"holdout_entries", "spec_release_id"},
		"spec_release_id":        {"spec_release_id"},
	}
	plane := map[string]Plane{
		"release_type": PlaneChecked, "protocols": PlaneChecked,
		"spec_revision": PlaneDeclared, "experiment_revision": PlaneDeclared, "public_corpus_revision": PlaneDeclared,
		"note": PlaneNonAuthoritative,
	}
	archive := ArchivePath(pkg, is.ID)
	caught := map[Plane]int{}
	passed := 0
	for i := range rec {
		mut := bytes.Clone(rec)
		mut[i] ^= 0x01
		for _, p := range []string{is.RecordPath, archive} {
			if err := os.WriteFile(p, mut, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		pl, ok := plane[owner[i]]
		if !ok {
			pl = PlaneDerived
		}
		if owner[i] == "note" && !inNote[i] || owner[i] == "" {
			pl = "structure" // the note's name, quotes and comma; the outer braces
		}
		rep, err := VerifyRelease(pkg, holdout)
		if inNote[i] {
			if mut[i] < 0x20 || mut[i] > 0x7e || mut[i] == '"' || mut[i] == '\\' {
				t.Fatalf("byte %d: the test's note perturbation %q is not a plain character", i, mut[i])
			}
			if err != nil || !rep.OK {
				t.Errorf("byte %d in note (%q→%q): caught, but note is NON_AUTHORITATIVE (err %v, failed %q)", i, rec[i], mut[i], err, failedOf(rep))
			}
			passed++
			continue
		}
		if err != nil {
			// A refusal by the reader: a release error or an evidence one.
			var re *ReleaseError
			var ee *evidence.Error
			if !errors.As(err, &re) && !errors.As(err, &ee) {
				t.Errorf("byte %d (%s): refused with an unclassified error %v", i, owner[i], err)
			}
			caught[pl]++
			continue
		}
		if rep.OK {
			t.Errorf("byte %d (%s, %q→%q): not caught", i, owner[i], rec[i], mut[i])
			continue
		}
		failed := rep.Failed()
		for _, want := range mustFail[owner[i]] {
			if !slices.Contains(failed, want) {
				t.Errorf("byte %d (%s): failed %q, want %s among them", i, owner[i], failed, want)
			}
		}
		if owner[i] == "jcs_upstream" && !slices.ContainsFunc(failed, func(s string) bool { return strings.HasPrefix(s, "jcs_upstream.") }) {
			t.Errorf("byte %d (jcs_upstream): failed %q, want a jcs_upstream check", i, failed)
		}
		caught[pl]++
	}
	for _, pl := range []Plane{PlaneChecked, PlaneDeclared, PlaneDerived} {
		if caught[pl] == 0 {
			t.Errorf("no perturbation in plane %s", pl)
		}
	}
	if passed == 0 {
		t.Error("no perturbation inside the note")
	}
	t.Logf("caught %v; note perturbations passed: %d", caught, passed)
}

func failedOf(rep *ReleaseReport) []string {
	if rep == nil {
		return nil
	}
	return rep.Failed()
}

// Changing the package after issue: each surface's change fails its checks;
// requirements/open/ is outside every surface by design (it moves bpkg, not
// srel) and a change there verifies.
func TestPackagePerturbation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		edit   func(t *testing.T, pkg, holdout string)
		failed []string // exactly these checks fail
	}{
		{"spec file byte", flip("SYNTHETIC-WIRE-v1.md"), []string{"spec_digest", "spec_files"}},
		{"spec file added", add("EXTRA.md"), []string{"spec_digest", "spec_files"}},
		// A rename: the old name is missing (named), the new one is an extra file.
		{"spec file renamed", rename("SYNTHETIC-CLAIM-v1.md", "SYNTHETIC-CLAIM-v2.md"), []string{"spec_digest", "spec_files", "files_present"}},
		{"schema protocol changed", replace("schema/nested-composition-v2.json", `"certificate_protocol": "CLEANROOM-SYNTHETIC-CLAIM-v1"`, `"certificate_protocol": "CLEANROOM-SYNTHETIC-CLAIM-v2"`),
			[]string{"protocols.verified_claim", "spec_digest", "spec_files"}},
		{"experiment file byte", flip("experiment/score.mjs"), []string{"experiment_digest", "experiment_files"}},
		// A removed listed file: its recorded sha256 stands in, so the digest
		// still recomputes, and files_present names it (the .mjs case).
		{"experiment file removed", remove("experiment/CONTRACT.md"), []string{"files_present"}},
		{"public corpus byte", flip("vectors/public/positive.json"), []string{"public_corpus_digest"}},
		{"public CAS leaf replaced", flip("vectors/public/cas/leaf-one.json"), []string{"public_corpus_digest"}},
		{"jcs outhex byte", flip("vectors/jcs-upstream/outhex/order.txt"), []string{"jcs_upstream.digest"}},
		{"jcs vector added", add("vectors/jcs-upstream/input/extra.json"), []string{"jcs_upstream.digest", "jcs_upstream.vectors"}},
		{"holdout byte", flipHoldout("H1-synthetic-accept.json"), []string{"holdout_commitment"}},
		{"requirements/open edited", flip("requirements/open/OPEN-QUESTION.md"), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pkg, holdout, _ := issueSynthetic(t)
			c.edit(t, pkg, holdout)
			rep, err := VerifyRelease(pkg, holdout)
			if err != nil {
				t.Fatal(err)
			}
			if got := rep.Failed(); !slices.Equal(got, c.failed) {
				t.Errorf("failed %q, want %q", got, c.failed)
			}
		})
	}
}

func flip(rel string) func(*testing.T, string, string) {
	return func(t *testing.T, pkg, _ string) { flipFile(t, filepath.Join(pkg, rel)) }
}
func flipHoldout(rel string) func(*testing.T, string, string) {
	return func(t *testing.T, _, holdout string) { flipFile(t, filepath.Join(holdout, rel)) }
}
func flipFile(t *testing.T, p string) {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
func add(rel string) func(*testing.T, string, string) {
	return func(t *testing.T, pkg, _ string) {
		if err := os.WriteFile(filepath.Join(pkg, rel), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
func remove(rel string) func(*testing.T, string, string) {
	return func(t *testing.T, pkg, _ string) {
		if err := os.Remove(filepath.Join(pkg, rel)); err != nil {
			t.Fatal(err)
		}
	}
}
func rename(from, to string) func(*testing.T, string, string) {
	return func(t *testing.T, pkg, _ string) {
		if err := os.Rename(filepath.Join(pkg, from), filepath.Join(pkg, to)); err != nil {
			t.Fatal(err)
		}
	}
}
func replace(rel, old, new string) func(*testing.T, string, string) {
	return func(t *testing.T, pkg, _ string) {
		p := filepath.Join(pkg, rel)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(old)) {
			t.Fatalf("%s has no %q", rel, old)
		}
		if err := os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Bad records: each refused by its rule, by ReadRelease and by verify.
func TestBadRecords(t *testing.T) {
	t.Parallel()
	pkg, holdout, is := issueSynthetic(t)
	good, err := os.ReadFile(is.RecordPath)
	if err != nil {
		t.Fatal(err)
	}
	sub := func(old, new string) []byte {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("record has no %q", old)
		}
		return bytes.Replace(good, []byte(old), []byte(new), 1)
	}
	cases := []struct {
		name string
		rec  []byte
		rule error
	}{
		{"duplicate member", sub(`"spec_revision": 3,`, `"spec_revision": 3, "spec_revision": 3,`), evidence.ClassDuplicateName},
		{"unknown member", sub(`"spec_revision": 3,`, `"spec_revision": 3, "approved_by": "me",`), errUnknownMember},
		{"unknown nested member", sub(`"wire": "TRVM-PROOF-WIRE-v1",`, `"wire": "TRVM-PROOF-WIRE-v1", "extra": "x",`), errUnknownMember},
		{"other release type", sub(`"TRVM-PROOF-WIRE-SPEC-RELEASE-v1"`, `"TRVM-PROOF-WIRE-SPEC-RELEASE-v2"`), errReleaseType},
		{"missing member", sub(` "note": "`+DefaultNote+`",`+"\n", ``), errMissingMember},
		{"revision zero", sub(`"spec_revision": 3,`, `"spec_revision": 0,`), errRevision},
		{"revision fractional", sub(`"spec_revision": 3,`, `"spec_revision": 3.5,`), errRevision},
		{"revision as string", sub(`"spec_revision": 3,`, `"spec_revision": "3",`), errFieldType},
		{"file list unsorted", swapFirstTwoSpecFiles(t, good), errFileList},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParseRelease(c.rec); !errors.Is(err, c.rule) {
				t.Errorf("ParseRelease: %v, want %v", err, c.rule)
			}
			if err := os.WriteFile(is.RecordPath, c.rec, 0o644); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, pkg)
			rep, err := VerifyRelease(pkg, holdout)
			if !errors.Is(err, c.rule) || rep != nil {
				t.Errorf("VerifyRelease: %v, want %v", err, c.rule)
			}
			if after := snapshot(t, pkg); !maps2Equal(before, after) {
				t.Error("verify changed the package")
			}
		})
	}
	// An uppercase digest is a second spelling of one identity.
	upper := bytes.Replace(good, []byte(`"spec_digest": "`+is.Release.SpecDigest), []byte(`"spec_digest": "`+strings.ToUpper(is.Release.SpecDigest)), 1)
	if _, err := ParseRelease(upper); !errors.Is(err, errDigestForm) {
		t.Errorf("uppercase digest: %v, want %v", err, errDigestForm)
	}
}

func swapFirstTwoSpecFiles(t *testing.T, rec []byte) []byte {
	r, err := ParseRelease(rec)
	if err != nil {
		t.Fatal(err)
	}
	r.SpecFiles[0], r.SpecFiles[1] = r.SpecFiles[1], r.SpecFiles[0]
	b, err := r.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// snapshot maps every path under dir to its bytes.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		m[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func maps2Equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// An archive that exists with different bytes is never overwritten; nothing
// is written, SPEC-RELEASE.json included.
func TestIssueArchiveConflict(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		issueFirst  bool // an earlier issue wrote SPEC-RELEASE.json
		archiveEdit func(b []byte) []byte
	}{
		{"archive with another note", true, func(b []byte) []byte {
			return bytes.Replace(b, []byte(DefaultNote), []byte("edited note"), 1)
		}},
		{"archive planted before the first issue", false, func([]byte) []byte { return []byte("{}\n") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pkg, holdout := synthetic(t)
			opts := synthOpts
			opts.HoldoutDir = holdout
			r, err := BuildRelease(pkg, opts)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := r.Bytes()
			if c.issueFirst {
				if _, err := IssueRelease(pkg, opts); err != nil {
					t.Fatal(err)
				}
			}
			arch := ArchivePath(pkg, r.SpecReleaseID)
			if err := os.MkdirAll(filepath.Dir(arch), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(arch, c.archiveEdit(b), 0o644); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, pkg)
			_, err = IssueRelease(pkg, opts)
			if !errors.Is(err, errArchiveConflict) {
				t.Fatalf("IssueRelease: %v, want %v", err, errArchiveConflict)
			}
			if !strings.Contains(err.Error(), r.SpecReleaseID+".json") {
				t.Errorf("refusal does not name the archive: %v", err)
			}
			if after := snapshot(t, pkg); !maps2Equal(before, after) {
				t.Error("a refused issue changed the package (or left a temporary file)")
			}
			if _, err := os.Stat(filepath.Join(pkg, ReleaseFile)); c.issueFirst == errors.Is(err, fs.ErrNotExist) {
				t.Errorf("SPEC-RELEASE.json presence: %v", err)
			}
		})
	}
}

// A package with a symbolic link (even one pointing inside) or an
// incomplete public corpus is refused, nothing written.
func TestIssueRefusesPackage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(t *testing.T, pkg string)
		rule error
	}{
		{"symlink inside", func(t *testing.T, pkg string) {
			if err := os.Symlink("SYNTHETIC-WIRE-v1.md", filepath.Join(pkg, "LINK.md")); err != nil {
				t.Fatal(err)
			}
		}, pkgwalk.ErrSymlink},
		{"recorded CAS leaf absent", func(t *testing.T, pkg string) {
			if err := os.Remove(filepath.Join(pkg, "vectors/public/cas/leaf-two.json")); err != nil {
				t.Fatal(err)
			}
		}, errIncomplete},
		{"schema without constants", func(t *testing.T, pkg string) {
			if err := os.WriteFile(filepath.Join(pkg, SchemaFile), []byte(`{"constants":{}}`), 0o644); err != nil {
				t.Fatal(err)
			}
		}, errSchemaConstants},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pkg, holdout := synthetic(t)
			c.edit(t, pkg)
			before := snapshot(t, pkg)
			opts := synthOpts
			opts.HoldoutDir = holdout
			if _, err := IssueRelease(pkg, opts); !errors.Is(err, c.rule) {
				t.Fatalf("IssueRelease: %v, want %v", err, c.rule)
			}
			if after := snapshot(t, pkg); !maps2Equal(before, after) {
				t.Error("a refused issue wrote something")
			}
		})
	}
}

func TestHoldoutCommitmentRules(t *testing.T) {
	t.Parallel()
	t.Run("absent directory", func(t *testing.T) {
		pkg, holdout := synthetic(t)
		c, n, err := HoldoutCommitment(pkg, filepath.Join(holdout, "nope"))
		if err != nil || c != HoldoutAbsent || n != 0 {
			t.Errorf("got %q %d %v, want absent 0 nil", c, n, err)
		}
	})
	t.Run("extra file beside the entries", func(t *testing.T) {
		pkg, holdout := synthetic(t)
		if err := os.WriteFile(filepath.Join(holdout, "H3-unlisted.json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := HoldoutCommitment(pkg, holdout); !errors.Is(err, errHoldoutCount) {
			t.Errorf("got %v, want %v", err, errHoldoutCount)
		}
	})
	t.Run("no INDEX.json", func(t *testing.T) {
		pkg, holdout := synthetic(t)
		if err := os.Remove(filepath.Join(holdout, "INDEX.json")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := HoldoutCommitment(pkg, holdout); !errors.Is(err, errHoldoutIndex) {
			t.Errorf("got %v, want %v", err, errHoldoutIndex)
		}
	})
	t.Run("INDEX.json with a duplicate member", func(t *testing.T) {
		pkg, holdout := synthetic(t)
		if err := os.WriteFile(filepath.Join(holdout, "INDEX.json"), []byte(`{"entries":[],"entries":[]}`), 0o644); err != nil {
			t.Fatal(err)
		}
		// The rule and the strict reader's class both reach the caller.
		_, _, err := HoldoutCommitment(pkg, holdout)
		if !errors.Is(err, errHoldoutIndex) || !errors.Is(err, evidence.ClassDuplicateName) {
			t.Errorf("got %v, want %v and %v", err, errHoldoutIndex, evidence.ClassDuplicateName)
		}
	})
	t.Run("issue without holdout commits absent; verify reports not present", func(t *testing.T) {
		pkg, _ := synthetic(t)
		opts := synthOpts
		opts.NoHoldout = true // the synthetic world has a holdout
		is, err := IssueRelease(pkg, opts)
		if err != nil {
			t.Fatal(err)
		}
		if is.Release.HoldoutCommitment != "absent" || is.Release.HoldoutEntries != 0 {
			t.Errorf("commitment %q / %d", is.Release.HoldoutCommitment, is.Release.HoldoutEntries)
		}
		rep, err := VerifyRelease(pkg, "")
		if err != nil || !rep.OK {
			t.Fatalf("verify: %v %q", err, failedOf(rep))
		}
		var st string
		for _, c := range rep.Checks {
			if c.Name == "holdout" {
				st = c.Status
			}
		}
		if st != StatusNotPresent {
			t.Errorf("holdout check status %q, want %q", st, StatusNotPresent)
		}
	})
}

// The formula audit, checked against this test's own reading of §3.7.
func TestAuditFormula(t *testing.T) {
	t.Parallel()
	r, err := ReadRelease(filepath.Join(worldPkg(t, "world"), ReleaseFile))
	if err != nil {
		t.Fatal(err)
	}
	lines, err := AuditFormula(r)
	if err != nil {
		t.Fatal(err)
	}
	wantCore := []string{
		"/experiment_digest", "/experiment_revision", "/holdout_commitment", "/holdout_entries",
		"/jcs_upstream/commit", "/jcs_upstream/digest", "/jcs_upstream/repository", "/jcs_upstream/vectors",
		"/protocols/nested_composition", "/protocols/verified_claim", "/protocols/wire",
		"/public_corpus_digest", "/public_corpus_revision", "/release_type", "/spec_digest", "/spec_revision",
	}
	var moved, still []string
	for _, l := range lines {
		ptr, verb, _ := strings.Cut(l, " ")
		if verb == "moves srel" {
			moved = append(moved, ptr)
		} else {
			still = append(still, ptr)
		}
	}
	sort.Strings(moved)
	if !slices.Equal(moved, wantCore) {
		t.Errorf("leaves that move srel %q, want %q", moved, wantCore)
	}
	// note, jcs_upstream.path, spec_release_id and both entries of every
	// file-list element (4 spec + 15 experiment) do not.
	if len(still) != 3+2*(4+15) || !slices.Contains(still, "/note") || !slices.Contains(still, "/jcs_upstream/path") {
		t.Errorf("%d leaves do not move srel: %q", len(still), still)
	}
}

func TestDiffReleases(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(worldPkg(t, "world"), ReleasesDir)
	a, err := ReadRelease(filepath.Join(dir, "srel-a5f032c7e3cd93a98098cdf67d353349dafe2bacd7bc0ae7e8d6e9a9e9c9f091.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadRelease(filepath.Join(dir, wantSrel+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var core []string
	for _, c := range DiffReleases(a, b) {
		if c.Core {
			core = append(core, c.Field)
		}
	}
	// Between experiment revisions 1 and 12 only the experiment surface moved.
	if !slices.Equal(core, []string{"/experiment_revision", "/experiment_digest"}) {
		t.Errorf("core changes %q", core)
	}
	// A note-only change: one change, outside the core, srel unchanged.
	c := *b
	c.Note = "another note"
	d := DiffReleases(b, &c)
	if len(d) != 1 || d[0].Field != "/note" || d[0].Core || d[0].Plane != PlaneNonAuthoritative {
		t.Errorf("note-only diff %+v", d)
	}
	if x, _ := c.ID(); x != wantSrel {
		t.Errorf("note change moved srel to %s", x)
	}
}

func BenchmarkVerifyRelease(b *testing.B) {
	w := testshared.World(b, "world")
	pkg := filepath.Join(w, "docs", "spec", "proof-wire")
	hold := filepath.Join(w, "governance", "holdout")
	for b.Loop() {
		if _, err := VerifyRelease(pkg, hold); err != nil {
			b.Fatal(err)
		}
	}
}

// The two file-list comparisons (release diff, release verify) agree on
// what differs: a changed digest, a path only in the first list, a path
// only in the second, in that list order; an unchanged path is not named.
func TestFileListDifferences(t *testing.T) {
	t.Parallel()
	fd := func(p, s string) pkgwalk.FileDigest { return pkgwalk.FileDigest{Path: p, SHA256: s} }
	a := []pkgwalk.FileDigest{fd("x", "1"), fd("y", "2"), fd("z", "3")}
	b := []pkgwalk.FileDigest{fd("w", "4"), fd("x", "1"), fd("y", "9")}
	wantChanges := []Change{
		{Field: "/f[y]", Plane: PlaneDerived, Old: "2", New: "9"},
		{Field: "/f[z]", Plane: PlaneDerived, Old: "3"},
		{Field: "/f[w]", Plane: PlaneDerived, New: "4"},
	}
	if got := diffFiles("/f", a, b); !slices.Equal(got, wantChanges) {
		t.Errorf("diffFiles = %+v, want %+v", got, wantChanges)
	}
	if got, want := listDifference(a, b), `["changed: y","only recorded: z","only on disk: w"]`; got != want {
		t.Errorf("listDifference = %s, want %s", got, want)
	}
	if got := diffFiles("/f", a, a); len(got) != 0 {
		t.Errorf("diffFiles of a list with itself = %+v", got)
	}
}
