package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// syntheticPackageID is the bpkg of pkgwalk/testdata/synthetic, computed
// outside this code (see pkgwalk's tests) and pinned.
const syntheticPackageID = "bpkg-b37a3a1f55a4026bc5a39a7254dd8b87e133d0c5337d9fd996b54dc96924d060"

// runCLI runs the command tree with captured output and returns the exit
// code main would return.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = execute(args, &out, &errb)
	return code, out.String(), errb.String()
}

// copySyntheticPackage copies the synthetic package to a fresh directory.
func copySyntheticPackage(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "pkg")
	src := filepath.Join(testshared.RepoRoot(t), "pkgwalk", "testdata", "synthetic")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestPackageCommands(t *testing.T) {
	t.Parallel()
	pkg := copySyntheticPackage(t)
	work := t.TempDir()
	dest := filepath.Join(work, "mount")
	record := filepath.Join(work, "blind-package.json")

	// id
	code, out, errs := runCLI(t, "package", "id", pkg)
	if code != 0 || out != syntheticPackageID+"\n" {
		t.Fatalf("id: %d %q %s", code, out, errs)
	}
	code, out, _ = runCLI(t, "package", "id", "--json", pkg)
	o, err := evidence.ReadObject([]byte(out))
	if code != 0 || err != nil {
		t.Fatalf("id --json: %d %v %q", code, err, out)
	}
	if v, _ := o.Get("blind_package_id"); v != syntheticPackageID {
		t.Errorf("id --json: %v", v)
	}

	// manifest to stdout is the record; --out writes the same bytes beside.
	code, out, errs = runCLI(t, "package", "manifest", pkg)
	if code != 0 {
		t.Fatalf("manifest: %d %s", code, errs)
	}
	m, err := pkgwalk.ParseManifestRecord([]byte(out))
	if err != nil {
		t.Fatalf("manifest output is not a valid record: %v", err)
	}
	if id, _ := m.ID(); id != syntheticPackageID {
		t.Errorf("manifest record id %s", id)
	}
	if code, _, errs = runCLI(t, "package", "manifest", pkg, "--out", record); code != 0 {
		t.Fatalf("manifest --out: %d %s", code, errs)
	}
	if b, _ := os.ReadFile(record); string(b) != out {
		t.Errorf("--out bytes differ from stdout bytes")
	}

	// emit, then verify both ways.
	code, out, errs = runCLI(t, "package", "emit", "--from", pkg, "--into", dest, "--expect", syntheticPackageID, "--manifest-out", filepath.Join(work, "emitted.json"))
	if code != 0 || !strings.Contains(out, "verified") {
		t.Fatalf("emit: %d %q %s", code, out, errs)
	}
	for _, args := range [][]string{
		{"package", "verify", dest, "--manifest", record},
		{"package", "verify", dest, "--expect", syntheticPackageID},
		{"package", "verify", dest, "--manifest", filepath.Join(work, "emitted.json"), "--expect", syntheticPackageID},
	} {
		if code, out, errs := runCLI(t, args...); code != 0 || !strings.Contains(out, "VERIFIED") {
			t.Errorf("%v: %d %q %s", args, code, out, errs)
		}
	}
}

// Refusals exit 1 and name each problem's path and rule; usage errors exit 2.
func TestPackageCommandRefusals(t *testing.T) {
	t.Parallel()
	pkg := copySyntheticPackage(t)
	work := t.TempDir()
	if err := os.Symlink("SPEC.md", filepath.Join(pkg, "alias.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(pkg, "EMPTY"), 0o755); err != nil {
		t.Fatal(err)
	}

	code, _, errs := runCLI(t, "package", "id", pkg)
	if code != 1 || !strings.Contains(errs, `"alias.md": `+string(pkgwalk.ErrSymlink)) || !strings.Contains(errs, `"EMPTY": `+string(pkgwalk.ErrEmptyDir)) {
		t.Errorf("id of a refused package: %d\n%s", code, errs)
	}
	code, out, _ := runCLI(t, "package", "manifest", "--json", pkg)
	o, err := evidence.ReadObject([]byte(out))
	if code != 1 || err != nil {
		t.Fatalf("manifest --json of a refused package: %d %v %q", code, err, out)
	}
	probs, _ := o.Get("problems")
	if list, ok := probs.([]any); !ok || len(list) != 2 {
		t.Fatalf("problems: %v", probs)
	} else {
		first := list[0].(*evidence.Object)
		if p, _ := first.Get("path"); p != "EMPTY" {
			t.Errorf("problems not sorted: first is %v", p)
		}
		if r, _ := first.Get("rule"); r != string(pkgwalk.ErrEmptyDir) {
			t.Errorf("first rule %v", r)
		}
	}

	clean := copySyntheticPackage(t)
	dirty := t.TempDir()
	if err := os.WriteFile(filepath.Join(dirty, "planted"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"emit of a package that is not the pin", []string{"package", "emit", "--from", clean, "--into", filepath.Join(work, "a"), "--expect", "bpkg-" + strings.Repeat("0", 64)}, 1, string(pkgwalk.ErrNotPinned)},
		{"emit into a dirty destination", []string{"package", "emit", "--from", clean, "--into", dirty, "--expect", syntheticPackageID}, 1, "destination is not an empty directory"},
		{"manifest --out inside the package", []string{"package", "manifest", clean, "--out", filepath.Join(clean, "vectors", "m.json")}, 1, string(pkgwalk.ErrOutputInside)},
		{"emit --manifest-out inside the source", []string{"package", "emit", "--from", clean, "--into", filepath.Join(work, "b"), "--expect", syntheticPackageID, "--manifest-out", filepath.Join(clean, "m.json")}, 1, string(pkgwalk.ErrOutputInside)},
		{"verify against another pin", []string{"package", "verify", clean, "--expect", "bpkg-" + strings.Repeat("1", 64)}, 1, string(pkgwalk.ErrNotPinned)},
		{"verify without a pin", []string{"package", "verify", clean}, 2, "--expect"},
		{"emit without --into", []string{"package", "emit", "--from", clean, "--expect", syntheticPackageID}, 2, "--into"},
		{"malformed pin", []string{"package", "emit", "--from", clean, "--into", filepath.Join(work, "c"), "--expect", "bpkg-xyz"}, 2, "not a blind_package_id (bpkg- and 64 lowercase hex digits)"},
		{"missing directory", []string{"package", "id", filepath.Join(work, "absent")}, 2, "no such file"},
		{"unknown flag", []string{"package", "id", clean, "--follow-links"}, 2, "unknown flag"},
		{"no argument", []string{"package", "id"}, 2, "arg"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCLI(t, c.args...)
			if code != c.code || !strings.Contains(out+errs, c.want) {
				t.Errorf("exit %d (want %d), output:\n%s%s\nwant it to contain %q", code, c.code, out, errs, c.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(clean, "vectors", "m.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a manifest was written inside the package")
	}
}

// Conformance: the reference world's recorded manifest verifies as a
// record, and the world's package (with its .mjs files absent by design)
// is refused against it, naming exactly the missing programs.
func TestPackageVerifyReferenceWorld(t *testing.T) {
	t.Parallel()
	world := testshared.World(t, "world")
	record := filepath.Join(world, "governance", "blind-package.json")
	code, out, _ := runCLI(t, "package", "verify", "--json", filepath.Join(world, "docs", "spec", "proof-wire"), "--manifest", record,
		"--expect", "bpkg-9ad5de9420259a6bf247a3629bb69419d53dd1d178bf98beabb270865b22e585")
	o, err := evidence.ReadObject([]byte(out))
	if code != 1 || err != nil {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	probs, _ := o.Get("problems")
	list, _ := probs.([]any)
	if len(list) == 0 {
		t.Fatal("no problems listed")
	}
	for _, p := range list {
		po := p.(*evidence.Object)
		path, _ := po.Get("path")
		rule, _ := po.Get("rule")
		if rule != "manifested file missing" || !strings.HasSuffix(path.(string), ".mjs") {
			t.Errorf("unexpected problem %v: %v", path, rule)
		}
	}
}

// The demo's package stage runs on the synthetic package and on the
// repository's synthetic world.
func TestDemoPackage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ pkg, holdout string }{
		{copySyntheticPackage(t), ""},
		{filepath.Join(testshared.RepoRoot(t), "testdata", "world", "docs", "spec", "proof-wire"), filepath.Join(testshared.RepoRoot(t), "testdata", "world", "governance", "holdout")},
	} {
		if _, err := os.Stat(c.pkg); err != nil {
			t.Skipf("%s absent: %v", c.pkg, err)
		}
		res, err := demoPackage(t.Context(), c.pkg, c.holdout, t.TempDir())
		if err != nil {
			t.Fatalf("%s: %v", c.pkg, err)
		}
		if !strings.Contains(res, "emitted and verified") {
			t.Errorf("result %q", res)
		}
	}
}

// An emit whose --manifest-out cannot be written fails as a whole: the
// delivered tree is removed again (an absent destination stays absent, an
// empty one stays empty), so the same command can simply be run again.
func TestPackageEmitManifestOutFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	pkg := copySyntheticPackage(t)
	work := t.TempDir()
	existing := filepath.Join(work, "existing.json")
	if err := os.WriteFile(existing, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyDest := filepath.Join(work, "empty")
	if err := os.Mkdir(emptyDest, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name        string
		into        string
		manifestOut string
		code        int
		want        string
	}{
		{"manifest-out exists", filepath.Join(work, "a"), existing, 2, "already exists"},
		{"manifest-out exists, empty destination", emptyDest, existing, 2, "already exists"},
		{"manifest-out in a missing directory", filepath.Join(work, "b"), filepath.Join(work, "nowhere", "m.json"), 2, "no such file"},
		{"manifest-out inside the empty destination", emptyDest, filepath.Join(emptyDest, "m.json"), 1, string(pkgwalk.ErrOutputInside)},
		{"manifest-out on a full file system", filepath.Join(work, "c"), filepath.Join(testshared.FullFS(t), "m.json"), 2, "no space left"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, statErr := os.Stat(c.into)
			existed := statErr == nil
			code, out, errs := runCLI(t, "package", "emit", "--from", pkg, "--into", c.into, "--expect", syntheticPackageID, "--manifest-out", c.manifestOut)
			if code != c.code || !strings.Contains(out+errs, c.want) {
				t.Errorf("exit %d (want %d), output:\n%s%s\nwant it to contain %q", code, c.code, out, errs, c.want)
			}
			ents, err := os.ReadDir(c.into)
			switch {
			case existed && (err != nil || len(ents) != 0):
				t.Errorf("the empty destination holds %d entries after a failed emit (%v)", len(ents), err)
			case !existed && !errors.Is(err, os.ErrNotExist):
				t.Errorf("a failed emit left %s behind (%d entries, %v)", c.into, len(ents), err)
			}
			if b, _ := os.ReadFile(existing); string(b) != "kept" {
				t.Errorf("the existing file was changed: %q", b)
			}
			// Nothing left in the way: the same emit without the bad
			// --manifest-out succeeds.
			if code, _, errs := runCLI(t, "package", "emit", "--from", pkg, "--into", c.into, "--expect", syntheticPackageID); code != 0 {
				t.Errorf("emit again: %d %s", code, errs)
			}
			if err := os.RemoveAll(c.into); err != nil {
				t.Fatal(err)
			}
			if existed {
				if err := os.Mkdir(c.into, 0o755); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestPackageEmitKilledRetry: `package emit` stopped and SIGKILLed while
// it copies leaves no partial destination (only its staging directory
// beside it): an absent --into stays absent, an existing empty one stays
// empty; the same command run again completes, leaving nothing beside the
// destination, and an existing one keeps its mode.
func TestPackageEmitKilledRetry(t *testing.T) {
	t.Parallel()
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) { testPackageEmitKilledRetry(t, existing) })
	}
}

func testPackageEmitKilledRetry(t *testing.T, existing bool) {
	bin, _ := cliBinary(t)
	pkg := copySyntheticPackage(t)
	// Enough files that the copy is still running when it is stopped.
	for i := range 3000 {
		d := filepath.Join(pkg, "requirements", fmt.Sprintf("r%02d", i/100))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("n%04d.md", i)), []byte(fmt.Sprintf("# note %d\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, id, errs := runCLI(t, "package", "id", pkg)
	if code != 0 {
		t.Fatalf("package id: %d %s", code, errs)
	}
	id = strings.TrimSpace(id)
	work := t.TempDir()
	into := filepath.Join(work, "out")
	if existing {
		if err := os.Mkdir(into, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	// What a killed emit must leave: the name as it was found.
	asFound := func() error {
		if !existing {
			if _, err := os.Lstat(into); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s exists: %v", into, err)
			}
			return nil
		}
		ents, err := os.ReadDir(into)
		if err != nil || len(ents) > 0 {
			return fmt.Errorf("%s holds %d entries: %v", into, len(ents), err)
		}
		return nil
	}
	cmd := exec.Command(bin, "package", "emit", "--from", pkg, "--into", into, "--expect", id)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// Stopped once the staging directory holds anything: mid-copy.
	var stages []string
	for deadline := time.Now().Add(time.Minute); len(stages) == 0; time.Sleep(time.Millisecond) {
		all, _ := filepath.Glob(filepath.Join(work, durable.TempPrefix+"out*"))
		for _, s := range all {
			if ents, _ := os.ReadDir(s); len(ents) > 0 {
				stages = append(stages, s)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the emit never staged anything")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if asFound() != nil {
		t.Skip("the emit published before it could be stopped")
	}
	cmd.Process.Kill()
	cmd.Wait()
	if err := asFound(); err != nil {
		t.Fatalf("a killed emit left a partial destination: %v", err)
	}
	if code, out, errs := runCLI(t, "package", "emit", "--from", pkg, "--into", into, "--expect", id); code != 0 {
		t.Fatalf("the retried emit: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runCLI(t, "package", "verify", into, "--expect", id); code != 0 {
		t.Errorf("the retried emit's destination does not verify: %s", errs)
	}
	if left, _ := filepath.Glob(filepath.Join(work, durable.TempPrefix+"*")); len(left) != 0 {
		t.Errorf("left beside the destination: %v", left)
	}
	if fi, err := os.Stat(into); existing && (err != nil || fi.Mode().Perm() != 0o750) {
		t.Errorf("the existing destination's mode: %v %v, want 0750", fi.Mode(), err)
	}
}
