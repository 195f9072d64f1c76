package pkgwalk_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// The bpkg recomputes from a walk of the package on disk (TRVM-FORMATS
// §6: "63 files on disk + 2 recorded sha"; in ../shared the absent files
// are the five experiment/*.mjs programs, so 60 + 5 in the world and 61 + 5
// at revision 2, the extra file being the archived rev-2 release). The
// walk runs with every rule of §4.1, the holdout-copy leak rule included,
// and finds no problem. Expected values are the §1 table's; the file counts
// the absent set and the seal digests were computed independently (python
// over the files).
func TestConformanceBpkgFromWalk(t *testing.T) {
	t.Parallel()
	cases := []struct {
		world  string
		onDisk int
		total  int
		want   string
		seal   string // seal_digest (§11.1) of the files on disk
	}{
		{"world", 60, 65, "bpkg-9ad5de9420259a6bf247a3629bb69419d53dd1d178bf98beabb270865b22e585",
			"ec32d34ca1c3cd078c23e3976d795137685166336dbaac3f87d1bd2dc681ca2a"},
		{"world-rev2", 61, 66, "bpkg-350de8116e9118c2b24e260bc4890fcfce0a7973dbd5a4a168af3cf3df791a04",
			"7aeee76bc22ce4d5b335b96c770af9c189351d20093c85f6beae6eece47e039d"},
	}
	absent := []string{
		"experiment/evidence.mjs",
		"experiment/holdout_runner.mjs",
		"experiment/holdout_schema.mjs",
		"experiment/holdout_score_core.mjs",
		"experiment/run_state.mjs",
	}
	for _, c := range cases {
		t.Run(c.world, func(t *testing.T) {
			w := testshared.World(t, c.world)
			tree, err := pkgwalk.Walk(filepath.Join(w, "docs", "spec", "proof-wire"),
				pkgwalk.WalkOptions{HoldoutDir: filepath.Join(w, "governance", "holdout")})
			if err != nil {
				t.Fatal(err)
			}
			m, err := pkgwalk.NewManifest(tree, "")
			if err != nil {
				t.Fatalf("the reference package is refused: %v", err)
			}
			if m.FileCount != c.onDisk || m.Root != "docs/spec/proof-wire" || m.Type != "TRVM-BLIND-PACKAGE-v1" {
				t.Fatalf("walked manifest: %d files, root %q, type %q; want %d, docs/spec/proof-wire, TRVM-BLIND-PACKAGE-v1",
					m.FileCount, m.Root, m.Type, c.onDisk)
			}
			// sha256 of "path<TAB>sha256" lines joined by LF, no final LF.
			if got := tree.SealDigest(); got != c.seal {
				t.Errorf("seal_digest = %s, want %s", got, c.seal)
			}
			rec, err := pkgwalk.ReadManifestFile(filepath.Join(w, "governance", "blind-package.json"))
			if err != nil {
				t.Fatal(err)
			}
			// Stand the recorded digest in for each file the world leaves
			// out; every file present must already agree with the record.
			var gone []string
			files := append([]pkgwalk.FileDigest(nil), m.Files...)
			for _, f := range rec.Files {
				if got, ok := m.Lookup(f.Path); ok {
					if got.SHA256 != f.SHA256 {
						t.Errorf("%s: walked %s, recorded %s", f.Path, got.SHA256, f.SHA256)
					}
					continue
				}
				gone = append(gone, f.Path)
				files = append(files, f)
			}
			if strings.Join(gone, ",") != strings.Join(absent, ",") {
				t.Errorf("recorded but absent %q, want %q", gone, absent)
			}
			pkgwalk.SortByPath(files)
			full := &pkgwalk.Manifest{Type: m.Type, Root: m.Root, FileCount: len(files), Files: files}
			if full.FileCount != c.total {
				t.Errorf("%d files with the recorded ones, want %d", full.FileCount, c.total)
			}
			id, err := full.ID()
			if err != nil {
				t.Fatal(err)
			}
			if id != c.want {
				t.Errorf("bpkg = %s, want %s", id, c.want)
			}
		})
	}
}
