package fleet

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/amber"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/internal/testshared/runworld"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/cleanroom-dev/cleanroom/sign"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// revealedWorld makes what a blind run's Job leaves under /results: the
// synthetic world driven to REVEALED (runworld.Revealed). It returns the
// run's srel and bpkg as the record holds them.
func revealedWorld(t *testing.T, dir string) (srel, bpkg string) {
	t.Helper()
	_, rec := runworld.Revealed(t, dir)
	return rec.SpecReleaseID, rec.BlindPackageID
}

// signedRecord writes what an AMBER run's Job leaves under /results: a run
// record signed with the producer key (amber.WriteRecord).
func signedRecord(t *testing.T, dir string, signer *sign.Signer, manifest string) {
	t.Helper()
	signedRecordOf(t, dir, signer, manifest, amber.Candidate{Provider: "acme", Model: "model-7"})
}

// signedRecordOf is signedRecord for a given candidate.
func signedRecordOf(t *testing.T, dir string, signer *sign.Signer, manifest string, cand amber.Candidate) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &amber.RunRecord{
		Type: amber.RecordType, CaseID: "A-fleet-0001", ManifestSHA256: manifest,
		IndexVersion: 1, IndexRoot: strings.Repeat("A", 43) + "=",
		RetirementCheck: amber.RetirementCheck{State: "active", CheckedAt: "2026-01-10T00:00:00Z"},
		Candidate:       cand,
		Scores:          map[string]float64{"pass": 1},
		TerminalState:   amber.StateValidSuccess,
		Artifacts:       []amber.Artifact{},
		StartedUTC:      "2026-01-10T00:00:00Z", FinishedUTC: "2026-01-10T00:01:00Z",
		Comparability: amber.Comparability{SpecSHA256: hexA, CutoffUTC: "2026-01-01T00:00:00Z", BaseBundleSHA256: hexB,
			OraclePackSHA256: hexC, GitVersion: "2.47", BundleFormatVersion: "v2", HashAlgorithm: "sha1"},
		IndexProof: amber.ProofHeader + "\nindex 0\n",
		Reason:     "scripted",
	}
	if _, err := amber.WriteRecord(dir, r, signer); err != nil {
		t.Fatal(err)
	}
}

func keyPair(t *testing.T, dir, name string) (*sign.Signer, ssh.PublicKey) {
	t.Helper()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("ssh-keygen is not installed (Debian package openssh-client)")
	}
	p := filepath.Join(dir, name)
	if err := sign.GenerateKeyWithComment(p, name); err != nil {
		t.Fatal(err)
	}
	s, err := sign.LoadSigner(p)
	if err != nil {
		t.Fatal(err)
	}
	return s, s.PublicKey()
}

// copyTree copies a results tree as a cluster volume would hand it back.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dst, "implementer/tally-candidate"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// Collect on a synthetic results tree: the honest runs verify, every other
// one is refused by the rule it breaks, and nothing is collected twice.
func TestCollect(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	from := filepath.Join(tmp, "from")
	world := filepath.Join(from, "blind-good")
	if err := os.MkdirAll(from, 0o755); err != nil {
		t.Fatal(err)
	}
	srel, bpkg := revealedWorld(t, world)
	signer, _ := keyPair(t, tmp, "producer")
	other, _ := keyPair(t, tmp, "other")

	// Results as the Jobs would leave them.
	copyTree(t, world, filepath.Join(from, "blind-other-release"))
	copyTree(t, world, filepath.Join(from, "blind-tampered"))
	rec := filepath.Join(from, "blind-tampered", "governance", "blind-run.json")
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rec, []byte(strings.Replace(string(b), `"REVEALED"`, `"COMPLETE"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	copyTree(t, world, filepath.Join(from, "blind-reference"))
	copyTree(t, world, filepath.Join(from, "blind-linked-file"))
	if err := os.Symlink("/etc/passwd", filepath.Join(from, "blind-linked-file", "governance", "notes")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(world, filepath.Join(from, "blind-linked-dir")); err != nil {
		t.Fatal(err)
	}
	signedRecord(t, filepath.Join(from, "amber-good"), signer, hexC)
	signedRecord(t, filepath.Join(from, "stray"), signer, hexC) // no run names it
	signedRecord(t, filepath.Join(from, "amber-other-case"), signer, hexA)
	signedRecord(t, filepath.Join(from, "amber-other-key"), other, hexC)

	blind := func(name, srel string) Run {
		return planned(Run{Name: name, Kind: KindBlind, Srel: srel, Bpkg: bpkg, Candidate: "candidate"})
	}
	am := func(name string) Run {
		return planned(Run{Name: name, Kind: KindAmber, CaseManifestSHA256: hexC, Candidate: "acme/model-7"})
	}
	cases := []struct {
		run     Run
		verdict string
		rule    error
		status  string
	}{
		{blind("blind-good", srel), Verified, nil, "REVEALED"},
		{blind("blind-other-release", "srel-"+hexA), Refused, errIdentityMismatch, "REVEALED"},
		{blind("blind-tampered", srel), Refused, errNotVerified, ""},
		{blind("blind-linked-file", srel), Refused, errResultTree, ""},
		{blind("blind-linked-dir", srel), Refused, errResultTree, ""},
		{blind("blind-missing", srel), Missing, errMissingResult, ""},
		{blind("..", srel), Refused, errName, ""},
		{planned(Run{Name: "blind-reference", Kind: KindBlind, Srel: srel, Bpkg: bpkg, Candidate: "javascript"}), Refused, errIdentityMismatch, "REVEALED"},
		{am("amber-good"), Verified, nil, amber.StateValidSuccess},
		{am("amber-other-case"), Refused, errIdentityMismatch, amber.StateValidSuccess},
		{am("amber-other-key"), Refused, errNotVerified, ""},
	}
	var runs []Run
	for _, c := range cases {
		runs = append(runs, c.run)
		bindAs(t, from, c.run)
	}
	into := filepath.Join(tmp, "results")
	rep, err := Collect(context.Background(), runs, from, into, CollectOptions{AmberPub: signer.PublicKey()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != len(cases) {
		t.Fatalf("%d runs reported, want %d", len(rep.Runs), len(cases))
	}
	for i, c := range cases {
		got := rep.Runs[i]
		t.Run(c.run.Name, func(t *testing.T) {
			t.Logf("%s %s %v", got.Verdict, got.Status, got.Problems)
			if got.Name != c.run.Name || got.Verdict != c.verdict {
				t.Errorf("%s: verdict %s, want %s; problems %v", got.Name, got.Verdict, c.verdict, got.Problems)
			}
			if c.rule == nil && len(got.Errs) != 0 {
				t.Errorf("problems %v", got.Problems)
			}
			if c.rule != nil && !errorsAny(got.Errs, c.rule) {
				t.Errorf("problems %v, want %v", got.Problems, c.rule)
			}
			if c.status != "" && got.Status != c.status {
				t.Errorf("status %q, want %q", got.Status, c.status)
			}
			_, err := os.Lstat(filepath.Join(into, c.run.Name))
			copied := c.rule == nil || errors.Is(c.rule, errIdentityMismatch) || errors.Is(c.rule, errNotVerified)
			if c.run.Name == ".." {
				return // into/.. exists; nothing was written there (the listing below)
			}
			if copied != (err == nil) {
				t.Errorf("collected dir present = %v, want %v", err == nil, copied)
			}
		})
	}
	if rep.OK() {
		t.Error("the report is OK with refused runs in it")
	}
	if !slices.Equal(rep.Unplanned, []string{"stray"}) {
		t.Errorf("unplanned %v, want [stray]", rep.Unplanned)
	}
	// The collected world verifies as run verify sees it: from its new place.
	if w, err := experiment.OpenWorld(filepath.Join(into, "blind-good")); err != nil {
		t.Error(err)
	} else if v, err := experiment.Verify(context.Background(), w, experiment.VerifyOptions{}); err != nil || !v.OK() {
		t.Errorf("collected world: %v %v", err, v.Problems())
	}
	// Nothing is collected twice or merged into.
	again, err := Collect(context.Background(), runs[:1], from, into, CollectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !errorsAny(again.Runs[0].Errs, errCollected) {
		t.Errorf("second collection: %v", again.Runs[0].Problems)
	}
	// Without the producer key an AMBER record is not taken on trust.
	into2 := filepath.Join(tmp, "results2")
	nokey, err := Collect(context.Background(), []Run{am("amber-good")}, from, into2, CollectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !errorsAny(nokey.Runs[0].Errs, errNoKey) {
		t.Errorf("no key: %v", nokey.Runs[0].Problems)
	}
	ents, _ := os.ReadDir(into)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := []string{"amber-good", "amber-other-case", "amber-other-key", "blind-good", "blind-other-release", "blind-reference", "blind-tampered"}
	if !slices.Equal(names, want) {
		t.Errorf("results dir holds %v, want %v (a refused tree copied, or a temporary directory left?)", names, want)
	}
}

// planned gives a hand-made run the plan entry ParseRuns would: a run
// digest of its own (the name's hash: distinct per run) and one plan digest.
func planned(r Run) Run {
	r.Digest = pkgwalk.SHA256Hex([]byte(r.Name))
	r.PlanSHA256 = hexB
	return r
}

// bindAs does what `cleanroom fleet bind` does at the end of r's Job: it
// writes r's plan entry into from/<r.Name>, if that is a directory holding
// a record (a missing, linked or unreadable result is left as it is).
func bindAs(t *testing.T, from string, r Run) {
	t.Helper()
	dir := filepath.Join(from, r.Name)
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || r.Name == ".." {
		return
	}
	if _, err := Bind(dir, r.Kind, r.Name, r.Digest, r.PlanSHA256); err != nil {
		t.Fatalf("bind %s: %v", r.Name, err)
	}
}

func errorsAny(errs []error, rule error) bool {
	for _, e := range errs {
		if errors.Is(e, rule) {
			return true
		}
	}
	return false
}

// A FIFO swapped in for a listed file after the walk is refused as a
// result-tree problem; the open must not wait for a writer that never
// comes.
func TestCopyOneRefusesSwappedFIFO(t *testing.T) {
	t.Parallel()
	src, tmp := t.TempDir(), t.TempDir()
	if err := unix.Mkfifo(filepath.Join(src, "run.json"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	root, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	// As the walk listed it while it was a regular file.
	listed := pkgwalk.File{Path: "run.json", Size: 2, SHA256: pkgwalk.SHA256Hex([]byte("{}"))}
	if err := copyOne(int(root.Fd()), listed, tmp); !errors.Is(err, errResultTree) {
		t.Fatalf("copyOne of a FIFO: %v, want errResultTree", err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "run.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("something was written for the FIFO: %v", err)
	}
}

// A result tree is copied only if each file is its own: a hard link (a
// second name, possibly outside the tree, for the same bytes) is refused
// like a symbolic link, and a refused tree leaves nothing under into.
func TestCopyResultRefusesHardLink(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	outside := filepath.Join(tmp, "outside.json")
	if err := os.WriteFile(outside, []byte(`{"secret":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(tmp, "from", "run-a")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "run.json.sig"), []byte("sig"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(src, "run.json")); err != nil {
		t.Skipf("link: %v", err)
	}
	into := filepath.Join(tmp, "into")
	if err := os.MkdirAll(into, 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(into, "run-a")
	if _, err := copyResult(src, dst); !errors.Is(err, errResultTree) {
		t.Fatalf("copyResult with a hard link: %v, want %v", err, errResultTree)
	}
	if ents, _ := os.ReadDir(into); len(ents) != 0 {
		t.Errorf("a refused tree left %v under into", ents)
	}
}

// copyOne streams: the bytes of a large result file are not held in
// memory (a Job can leave a file as large as its volume).
func TestCopyOneStreams(t *testing.T) {
	// Not parallel: it measures the process's heap.
	src, tmp := t.TempDir(), t.TempDir()
	const size = 64 << 20
	p := filepath.Join(src, "big.bin")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil { // sparse: zeros
		t.Fatal(err)
	}
	f.Close()
	files, err := pkgwalk.ListRegularFiles(src)
	if err != nil || len(files) != 1 {
		t.Fatalf("walk: %v %v", files, err)
	}
	root, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := copyOne(int(root.Fd()), files[0], tmp); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
		t.Errorf("copying a %d-byte file allocated %d bytes: the file was held in memory", size, alloc)
	}
	fi, err := os.Stat(filepath.Join(tmp, "big.bin"))
	if err != nil || fi.Size() != size {
		t.Fatalf("copy: %v %v", fi, err)
	}
}

// An AMBER run's planned candidate is provider/model, split at the first
// slash: a record of another provider whose name and model join to the same
// string ("acme/model" + "7" for "acme/model/7") is another candidate.
func TestCollectAmberCandidateIsProviderThenModel(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	signer, _ := keyPair(t, tmp, "producer")
	from := filepath.Join(tmp, "from")
	signedRecordOf(t, filepath.Join(from, "amber-same"), signer, hexC, amber.Candidate{Provider: "acme", Model: "model/7"})
	signedRecordOf(t, filepath.Join(from, "amber-other-provider"), signer, hexC, amber.Candidate{Provider: "acme/model", Model: "7"})
	run := func(name string) Run {
		r := planned(Run{Name: name, Kind: KindAmber, CaseManifestSHA256: hexC, Candidate: "acme/model/7"})
		bindAs(t, from, r)
		return r
	}
	rep, err := Collect(context.Background(), []Run{run("amber-same"), run("amber-other-provider")}, from,
		filepath.Join(tmp, "into"), CollectOptions{AmberPub: signer.PublicKey()})
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Runs[0]; got.Verdict != Verified {
		t.Errorf("provider acme, model model/7: %s %v", got.Verdict, got.Problems)
	}
	if got := rep.Runs[1]; got.Verdict != Refused || !errorsAny(got.Errs, errIdentityMismatch) {
		t.Errorf("provider acme/model, model 7: %s %v, want refused by %v", got.Verdict, got.Problems, errIdentityMismatch)
	}
}

// Two planned runs pinned alike (same srel, bpkg and candidate) but with
// another image and command: each result names its own plan entry, so
// results swapped between them, a result without its entry, one from
// another plan and one whose record was exchanged are all refused by
// errPlanEntry — the identity checks alone pass them.
func TestCollectRefusesAnotherPlanEntry(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	world := filepath.Join(tmp, "world")
	srel, bpkg := revealedWorld(t, world)
	entry := func(name, img, arg string) string {
		return `{"name": "` + name + `", "kind": "blind", "srel": "` + srel + `", "bpkg": "` + bpkg + `",
  "candidate": "candidate", "image": "` + img + `", "command": ["cleanroom", "run", "complete", "` + arg + `"],
  "runtime_class": "runc", "limits": {"cpu": "1", "memory": "1Gi", "ephemeral_storage": "1Gi", "deadline_seconds": 60}}`
	}
	imageB := "registry.example/cleanroom@sha256:" + hexB
	list := []byte("[" + entry("run-a", image, "--fast") + ",\n" + entry("run-b", imageB, "--slow") + "]")
	runs, err := ParseRuns(list, "runs.json")
	if err != nil {
		t.Fatal(err)
	}
	other, err := ParseRuns(append(list, '\n'), "runs.json") // the same runs, another plan
	if err != nil {
		t.Fatal(err)
	}
	// A run's digest is its own object's; the plan's is the whole list's.
	if runs[0].Digest == runs[1].Digest || runs[0].Digest != other[0].Digest {
		t.Fatalf("digests: %s %s %s", runs[0].Digest, runs[1].Digest, other[0].Digest)
	}
	if runs[0].PlanSHA256 == other[0].PlanSHA256 {
		t.Fatal("two run lists share a plan digest")
	}
	bound := func(dir string, r Run) {
		copyTree(t, world, dir)
		if _, err := Bind(dir, r.Kind, r.Name, r.Digest, r.PlanSHA256); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		setup func(from string)
		want  [2]string // verdicts of run-a, run-b
	}{
		{"each its own", func(from string) {
			bound(filepath.Join(from, "run-a"), runs[0])
			bound(filepath.Join(from, "run-b"), runs[1])
		}, [2]string{Verified, Verified}},
		{"swapped", func(from string) {
			bound(filepath.Join(from, "run-a"), runs[1])
			bound(filepath.Join(from, "run-b"), runs[0])
		}, [2]string{Refused, Refused}},
		{"run digest of the other entry", func(from string) {
			r := runs[1]
			r.Name = "run-a" // the name right, the image and command not
			bound(filepath.Join(from, "run-a"), r)
			bound(filepath.Join(from, "run-b"), runs[1])
		}, [2]string{Refused, Verified}},
		{"another plan", func(from string) {
			bound(filepath.Join(from, "run-a"), other[0])
			bound(filepath.Join(from, "run-b"), runs[1])
		}, [2]string{Refused, Verified}},
		{"no entry", func(from string) {
			copyTree(t, world, filepath.Join(from, "run-a"))
			bound(filepath.Join(from, "run-b"), runs[1])
		}, [2]string{Refused, Verified}},
		{"record exchanged under the entry", func(from string) {
			bound(filepath.Join(from, "run-a"), runs[0])
			bound(filepath.Join(from, "run-b"), runs[1])
			rec := filepath.Join(from, "run-a", "governance", "blind-run.json")
			b, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			// Still the same run as far as verify sees it: one more
			// space between two members changes only the bytes.
			if err := os.WriteFile(rec, append(b, ' '), 0o644); err != nil {
				t.Fatal(err)
			}
		}, [2]string{Refused, Verified}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			from := filepath.Join(t.TempDir(), "from")
			tc.setup(from)
			rep, err := Collect(context.Background(), runs, from, filepath.Join(t.TempDir(), "into"), CollectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, got := range rep.Runs {
				if got.Verdict != tc.want[i] {
					t.Errorf("%s: %s %v, want %s", got.Name, got.Verdict, got.Problems, tc.want[i])
				}
				if tc.want[i] == Refused && !errorsAny(got.Errs, errPlanEntry) {
					t.Errorf("%s: refused by %v, want %v", got.Name, got.Problems, errPlanEntry)
				}
				// The pins alone do not tell the two runs apart.
				if errorsAny(got.Errs, errIdentityMismatch) {
					t.Errorf("%s: %v (the runs share every pinned identity)", got.Name, got.Problems)
				}
			}
		})
	}
}

// Bind refuses to write an entry that is not a plan entry, and never
// replaces one.
func TestBindRefusals(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "world")
	revealedWorld(t, dir)
	for _, tc := range []struct {
		name, run, runSHA, planSHA string
		rule                       error
	}{
		{"bad name", "../x", hexA, hexB, errName},
		{"short digest", "run-a", "abc", hexB, errPlanEntry},
		{"upper-case plan", "run-a", hexA, strings.ToUpper(hexB), errPlanEntry},
	} {
		if _, err := Bind(dir, KindBlind, tc.run, tc.runSHA, tc.planSHA); !errors.Is(err, tc.rule) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.rule)
		}
	}
	if _, err := Bind(dir, KindBlind, "run-a", hexA, hexB); err != nil {
		t.Fatal(err)
	}
	if _, err := Bind(dir, KindBlind, "run-b", hexA, hexB); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second bind: %v, want fs.ErrExist", err)
	}
}

// collect never writes into a system tree of the host: --into /etc, /usr,
// /proc, /, or a link to one, is refused by its rule before anything is
// created or read.
func TestCollectRefusesSystemTrees(t *testing.T) {
	t.Parallel()
	link := filepath.Join(t.TempDir(), "to-etc")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	runs := []Run{{Name: "amber-good", Kind: KindAmber}}
	for _, into := range []string{"/etc", "/etc/cleanroom-results", "/usr/local/results", "/proc/self/cwd", "/sys", "/dev/shm/r", "/", "/var", link, filepath.Join(link, "results")} {
		rep, err := Collect(context.Background(), runs, t.TempDir(), into, CollectOptions{})
		if err == nil || !strings.Contains(err.Error(), "path is a system tree of this host") || rep != nil {
			t.Errorf("Collect into %s: %v, want the system-tree rule", into, err)
		}
	}
	if _, err := os.Lstat("/etc/cleanroom-results"); err == nil {
		t.Errorf("a refused collect created /etc/cleanroom-results")
	}
}
