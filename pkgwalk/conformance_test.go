package pkgwalk_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/testshared"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// The recorded manifests of the reference worlds reproduce their pinned
// identities, and re-serialise to the very bytes recorded.
func TestConformanceRecordedManifests(t *testing.T) {
	t.Parallel()
	cases := []struct {
		world, want string
	}{
		{"world", "bpkg-9ad5de9420259a6bf247a3629bb69419d53dd1d178bf98beabb270865b22e585"},
		{"world-rev2", "bpkg-350de8116e9118c2b24e260bc4890fcfce0a7973dbd5a4a168af3cf3df791a04"},
	}
	for _, c := range cases {
		t.Run(c.world, func(t *testing.T) {
			path := filepath.Join(testshared.World(t, c.world), "governance", "blind-package.json")
			m, err := pkgwalk.ReadManifestFile(path)
			if err != nil {
				t.Fatalf("ReadManifestFile: %v", err)
			}
			id, err := m.ID()
			if err != nil {
				t.Fatal(err)
			}
			if id != c.want {
				t.Errorf("ID = %s, want %s", id, c.want)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.MarshalRecord(m.Note)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, raw) {
				t.Errorf("MarshalRecord differs from the recorded bytes (%d vs %d bytes)", len(got), len(raw))
			}
		})
	}
}

// Every file present in the world's package hashes to what the recorded
// manifest says; the only recorded files absent are the .mjs programs.
func TestConformanceWorldFilesMatchManifest(t *testing.T) {
	t.Parallel()
	world := testshared.World(t, "world")
	m, err := pkgwalk.ReadManifestFile(filepath.Join(world, "governance", "blind-package.json"))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := pkgwalk.Walk(filepath.Join(world, "docs", "spec", "proof-wire"), pkgwalk.WalkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tree.Err(); err != nil {
		t.Fatalf("the reference package has problems: %v", err)
	}
	present := map[string]bool{}
	for _, f := range tree.Files {
		present[f.Path] = true
		want, ok := m.Lookup(f.Path)
		if !ok {
			t.Errorf("%s: present but not in the recorded manifest", f.Path)
			continue
		}
		if want.SHA256 != f.SHA256 {
			t.Errorf("%s: sha256 %s, manifest %s", f.Path, f.SHA256, want.SHA256)
		}
	}
	for _, f := range m.Files {
		if !present[f.Path] && filepath.Ext(f.Path) != ".mjs" {
			t.Errorf("%s: recorded but absent, and not a .mjs program", f.Path)
		}
	}
	if len(tree.Files) < 50 {
		t.Errorf("only %d files walked", len(tree.Files))
	}
}
