package amber

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestVerifyBundleRefusesUnreachableObjects: a bundle whose header names
// only the cutoff ref but whose pack also carries the history after the
// cutoff (a hand-made bundle: the header of one, the pack of another) would
// hand that history to the candidate, since a fetch keeps the whole pack.
func TestVerifyBundleRefusesUnreachableObjects(t *testing.T) {
	t.Parallel()
	needGit(t)
	repo := newTestRepo(t, 2)
	gitT(t, repo.Dir, "update-ref", BundleRef, repo.Cutoff)
	dir := t.TempDir()
	wide := filepath.Join(dir, "wide.bundle")
	gitT(t, repo.Dir, "bundle", "create", "--quiet", wide, BundleRef, "main")
	b, _ := os.ReadFile(wide)
	i := bytes.Index(b, []byte("\n\nPACK"))
	hostile := append([]byte("# v3 git bundle\n@object-format=sha1\n"+repo.Cutoff+" "+BundleRef+"\n"), b[i+1:]...)
	p := filepath.Join(dir, "base.bundle")
	if err := os.WriteFile(p, hostile, 0o644); err != nil {
		t.Fatal(err)
	}
	m := &Manifest{CutoffCommit: repo.Cutoff,
		Construction: Construction{BundleFormatVersion: "3", HashAlgorithm: "sha1", BundleSize: int64(len(hostile))},
		Artifacts:    Artifacts{BaseBundleSHA256: sha256sumTool(t, p)}}
	err := VerifyBundle(context.Background(), p, m, nil)
	if CheckOf(err) == "" {
		// Show what a receiver's checkout would hold.
		ws := filepath.Join(dir, "ws")
		cerr := checkoutBundle(context.Background(), p, m.Artifacts.BaseBundleSHA256, repo.Cutoff, ws)
		has := cerr == nil && exec.Command("git", "-C", ws, "cat-file", "-e", repo.After).Run() == nil
		t.Fatalf("accepted a bundle carrying objects its ref does not reach (workspace holds post-cutoff commit: %v; checkout: %v)", has, cerr)
	}
	if CheckOf(err) != CheckGitFetchFsck || !errors.Is(err, errBundleUnreachable) {
		t.Fatalf("got %v (check %q), want %v at %s", err, CheckOf(err), errBundleUnreachable, CheckGitFetchFsck)
	}
}
