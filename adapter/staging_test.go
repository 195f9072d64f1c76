package adapter

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// The staged view's I/O directory (cleanroom-io/) is the runner's: a
// subject whose frozen files occupy it cannot be handed its challenges.
// That is the subject's doing, so it is an ABSENT measurement under a named
// rule — never an error that stops the whole measurement (and with it the
// log entry of every subject already measured).
func TestExecuteFrozenFilesInTheIODirectory(t *testing.T) {
	t.Parallel()
	w, s, chs := world(t)
	for _, c := range []struct{ name, file string }{
		{"a file where the directory goes", "cleanroom-io"},
		{"a directory where the challenge file goes", "cleanroom-io/challenges.json/x"},
		{"a frozen output document", "cleanroom-io/observations.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := candidate(t, w, "wsio/c", "#!/bin/sh\nexit 0\n")
			p := filepath.Join(w.Root, filepath.FromSlash(c.file))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(filepath.Join(w.Root, ioDir)) })
			a.PackageFiles = append(a.PackageFiles, c.file)
			d, _, err := pkgwalk.DigestOfPaths(w.Root, a.PackageFiles)
			if err != nil {
				t.Fatal(err)
			}
			a.PackageDigest = d
			m, err := Execute(context.Background(), w, a, Options{Revealed: true, Runner: UnsandboxedRunner{}, Schemas: s,
				Challenges: chs, ExpectRelease: testSrel, ScratchDir: t.TempDir()})
			if err != nil {
				t.Fatalf("the measurement stopped with an error instead of a named refusal: %v", err)
			}
			if m.State != Absent || m.Rule != errReservedPath {
				t.Fatalf("state %s rule %v (%v), want ABSENT %v", m.State, m.Rule, m.Err, errReservedPath)
			}
		})
	}
}
