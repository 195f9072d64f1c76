package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newPackageCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "package",
		Short: "The blind package: manifest and bpkg, emit from the manifest, verify a view",
		Long: `package measures, identifies, delivers and verifies a blind package.

A package is a directory of regular files and the directories they imply,
nothing else. The walk opens every entry from its parent's descriptor and
refuses, each by name, a symbolic link (even one pointing inside), FIFO,
socket or device; a file with more than one link; a mount inside the package;
a path segment outside [A-Za-z0-9._+-], "." / ".." or not NFC; two paths equal
after ASCII case-folding; a directory no file lives in; a root that is a
symlink or not a directory; and the leaks of docs/formats.md §4.1. Every problem
of a tree is listed in one run.

Exit codes: 0 ok, 1 refused (each problem listed with its path and rule),
2 unusable arguments or environment.`,
	}
	return c
}

// packageWalk walks dir with a progress bar on a terminal.
func packageWalk(dir, holdoutDir string) (*pkgwalk.Tree, error) {
	p := newWalkProgress("hashing " + dir)
	defer p.done()
	return pkgwalk.Walk(dir, pkgwalk.WalkOptions{HoldoutDir: holdoutDir, Progress: p.update})
}

// measurePackage walks dir and returns its tree, manifest and bpkg, or the
// error that ends the command (problems: exit 1; no directory: exit 2).
func measurePackage(cmd *cobra.Command, dir, holdoutDir, rootLabel string) (*pkgwalk.Tree, *pkgwalk.Manifest, string, error) {
	tree, err := packageWalk(dir, holdoutDir)
	if err != nil {
		return nil, nil, "", err
	}
	m, err := pkgwalk.NewManifest(tree, rootLabel)
	if err != nil {
		return nil, nil, "", packageFailure(cmd, dir, err)
	}
	id, err := m.ID()
	if err != nil {
		return nil, nil, "", err
	}
	return tree, m, id, nil
}

// walkProgress shows a byte counter on stderr, only on a terminal and only
// once a walk turns out to be large, so small packages and pipes stay quiet.
type walkProgress struct {
	desc string
	tty  bool
	bar  *progressbar.ProgressBar
}

func newWalkProgress(desc string) *walkProgress {
	return &walkProgress{desc: desc, tty: term.IsTerminal(int(os.Stderr.Fd()))}
}

func (p *walkProgress) update(files int, bytes int64) {
	if !p.tty {
		return
	}
	if p.bar == nil {
		if files < 2000 && bytes < 128<<20 {
			return
		}
		p.bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription(p.desc),
			progressbar.OptionShowBytes(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100_000_000))
	}
	_ = p.bar.Set64(bytes)
}

func (p *walkProgress) done() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// problemJSON is one problem in --json output.
func problemJSON(e *pkgwalk.RefusalError) *evidence.Object {
	o := evidence.NewObject(
		evidence.Member{Name: "path", Value: e.Path},
		evidence.Member{Name: "rule", Value: string(e.Rule)},
	)
	if e.Detail != "" {
		o.Set("detail", e.Detail)
	}
	return o
}

// packageFailure ends a package command: the error keeps the class it was
// made with (internal/fault); a refusal's --json failure document also names
// the subject and lists the problems one by one, which stderr lists too
// without --json.
func packageFailure(cmd *cobra.Command, subject string, err error) error {
	var probs pkgwalk.Problems
	var one *pkgwalk.RefusalError
	switch {
	case errors.As(err, &probs):
	case errors.As(err, &one):
		probs = pkgwalk.Problems{one}
	case fault.ClassOf(err) == fault.Refused:
		// A malformed or mismatched manifest: refused, one message.
		return withDetail(err,
			evidence.Member{Name: "ok", Value: false},
			evidence.Member{Name: "subject", Value: subject},
			evidence.Member{Name: "refused", Value: err.Error()})
	default:
		return err
	}
	if jsonOutput(cmd) {
		list := make([]any, len(probs))
		for i, p := range probs {
			list[i] = problemJSON(p)
		}
		return withDetail(fault.As(probs.FaultClass(), fmt.Errorf("%s: refused, %d problem(s)", subject, len(probs))),
			evidence.Member{Name: "ok", Value: false},
			evidence.Member{Name: "subject", Value: subject},
			evidence.Member{Name: "problems", Value: list})
	}
	w := cmd.ErrOrStderr()
	fmt.Fprintf(w, "cleanroom: %s: refused, %d problem(s):\n", subject, len(probs))
	for _, p := range probs {
		fmt.Fprintf(w, "  %s\n", p.Error())
	}
	return fault.As(probs.FaultClass(), nil)
}

// manifestResult is the --json form of a manifest: the record's members.
func manifestResult(m *pkgwalk.Manifest, id string, extra ...evidence.Member) *evidence.Object {
	files := make([]any, len(m.Files))
	for i, f := range m.Files {
		files[i] = evidence.NewObject(evidence.Member{Name: "path", Value: f.Path}, evidence.Member{Name: "sha256", Value: f.SHA256})
	}
	o := evidence.NewObject(
		evidence.Member{Name: "ok", Value: true},
		evidence.Member{Name: "blind_package_id", Value: id},
		evidence.Member{Name: "type", Value: m.Type},
		evidence.Member{Name: "root", Value: m.Root},
		evidence.Member{Name: "file_count", Value: float64(m.FileCount)},
	)
	o.Members = append(o.Members, extra...)
	o.Set("files", files)
	return o
}

func newPackageManifestCmd() *cobra.Command {
	var rootLabel, out, holdoutDir, note string
	c := &cobra.Command{
		Use:   "manifest DIR",
		Short: "Walk a package and print (or write beside it) its TRVM-BLIND-PACKAGE-v1 manifest",
		Long: `manifest walks DIR with every rule of the package walk and prints the
manifest record — the bytes of the reference's governance/blind-package.json:
{blind_package_id, type, root, file_count, files, note}, one-space indent.

With --out FILE the record is written to FILE instead, created exclusively and
atomically, and never inside DIR (FILE's directory is compared with DIR by
device and inode, so no spelling of the path can place it inside). With
--holdout DIR2 a file byte-identical to any file under DIR2 is a leak.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if out != "" {
				// Refuse before the walk, so a bad --out costs nothing.
				if inside, err := pkgwalk.IsInside(dir, out); err != nil {
					return err
				} else if inside {
					return packageFailure(cmd, dir, &pkgwalk.RefusalError{Path: out, Rule: pkgwalk.ErrOutputInside, Detail: "inside " + dir})
				}
			}
			tree, m, id, err := measurePackage(cmd, dir, holdoutDir, rootLabel)
			if err != nil {
				return err
			}
			if out != "" {
				if err := pkgwalk.WriteManifestFile(out, m, note, dir); err != nil {
					return packageFailure(cmd, dir, err)
				}
			}
			if out == "" && !jsonOutput(cmd) {
				rec, err := m.MarshalRecord(note)
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(rec)
				return err
			}
			var extra []evidence.Member
			if out != "" {
				extra = append(extra, evidence.Member{Name: "out", Value: out})
			}
			return printResult(cmd, manifestResult(m, id, extra...), func(w io.Writer) {
				fmt.Fprintf(w, "%s  %d files, %d bytes  written to %s\n", id, m.FileCount, tree.Size(), out)
			})
		},
	}
	c.Flags().StringVar(&rootLabel, "root-label", pkgwalk.DefaultRootLabel, "the manifest's root label (part of the identity)")
	c.Flags().StringVar(&out, "out", "", "write the record to FILE (beside the package, never inside; never overwritten)")
	c.Flags().StringVar(&holdoutDir, "holdout", "", "holdout directory: refuse files byte-identical to any file in it")
	c.Flags().StringVar(&note, "note", "", "the record's note member")
	return c
}

func newPackageIDCmd() *cobra.Command {
	var rootLabel, holdoutDir string
	c := &cobra.Command{
		Use:   "id DIR",
		Short: "Print the blind_package_id (bpkg-…) of a package",
		Long: `id walks DIR with every rule of the package walk and prints its bpkg:
"bpkg-" + SHA-256("TRVM-BLIND-PACKAGE-v1|" + RFC 8785 of the manifest).
A package with any problem has no identity: the problems are listed, exit 1.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			tree, m, id, err := measurePackage(cmd, dir, holdoutDir, rootLabel)
			if err != nil {
				return err
			}
			return printResult(cmd, evidence.NewObject(
				evidence.Member{Name: "ok", Value: true},
				evidence.Member{Name: "blind_package_id", Value: id},
				evidence.Member{Name: "root", Value: m.Root},
				evidence.Member{Name: "file_count", Value: float64(m.FileCount)},
				evidence.Member{Name: "bytes", Value: float64(tree.Size())},
			), func(w io.Writer) { fmt.Fprintln(w, id) })
		},
	}
	c.Flags().StringVar(&rootLabel, "root-label", pkgwalk.DefaultRootLabel, "the manifest's root label (part of the identity)")
	c.Flags().StringVar(&holdoutDir, "holdout", "", "holdout directory: refuse files byte-identical to any file in it")
	return c
}

func newPackageEmitCmd() *cobra.Command {
	var from, into, expect, manifestOut, rootLabel, holdoutDir, note string
	var noSync bool
	c := &cobra.Command{
		Use:   "emit --from DIR --into DEST --expect bpkg-…",
		Short: "Deliver a package into an empty destination from its manifest, refused unless it is the pinned bpkg",
		Long: `emit walks --from with every structural rule of the package walk (all
problems listed before anything is written), then creates in --into (absent or
an empty directory) exactly the directories the files imply and copies each
file, one by one, from the descriptor that was checked (in the kernel, exactly
the size fstat gave; a source that grows or shrinks is refused). The delivered
copy is then walked with every rule, content rules included, and hashed: its
bpkg must be --expect. What is measured is what was delivered; a refused emit
removes everything it created.

--into is filled in a staging directory beside it (.cleanroom-tmp-…) and
renamed into place once verified — replacing an existing empty directory only
while it is still empty, its mode and owner kept — so the name holds the whole
package or is as it was found: a killed emit leaves only the staging
directory, which the next emit into the same name removes (one a live emit
holds is left alone). A mount point (or another user's directory, unless run
as root) cannot be replaced by a rename and is filled in place.

--manifest-out FILE writes the manifest record beside the destination and the
source, never inside either.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" || into == "" || expect == "" {
				return fault.AsUnusable(errors.New("emit needs --from, --into and --expect"))
			}
			if err := expectFlag(expect); err != nil {
				return err
			}
			p := newWalkProgress("hashing the copy in " + into)
			m, err := pkgwalk.EmitInto(cmd.Context(), from, into, expect, pkgwalk.EmitIntoOptions{
				EmitOptions: pkgwalk.EmitOptions{RootLabel: rootLabel, HoldoutDir: holdoutDir, Sync: !noSync, Progress: p.update},
				ManifestOut: manifestOut, Note: note,
			})
			p.done()
			if err != nil {
				subject := from
				if m != nil {
					subject = into // the copy was delivered (and removed again): its record failed
				}
				return packageFailure(cmd, subject, err)
			}
			var extra []evidence.Member
			extra = append(extra, evidence.Member{Name: "into", Value: into})
			if manifestOut != "" {
				extra = append(extra, evidence.Member{Name: "manifest_out", Value: manifestOut})
			}
			return printResult(cmd, manifestResult(m, expect, extra...), func(w io.Writer) {
				fmt.Fprintf(w, "emitted %s: %d files into %s, the delivered copy walked and verified\n", expect, m.FileCount, into)
			})
		},
	}
	c.Flags().StringVar(&from, "from", "", "the package directory to walk")
	c.Flags().StringVar(&into, "into", "", "the destination: absent or an empty directory")
	c.Flags().StringVar(&expect, "expect", "", "the pinned blind_package_id; anything else is refused")
	c.Flags().StringVar(&manifestOut, "manifest-out", "", "write the manifest record to FILE (beside, never inside)")
	c.Flags().StringVar(&rootLabel, "root-label", pkgwalk.DefaultRootLabel, "the manifest's root label (part of the identity)")
	c.Flags().StringVar(&holdoutDir, "holdout", "", "holdout directory: refuse files byte-identical to any file in it")
	c.Flags().StringVar(&note, "note", "", "the note member of --manifest-out")
	c.Flags().BoolVar(&noSync, "no-sync", false, "do not fsync the emitted files (a tmpfs needs none)")
	return c
}

func newPackageVerifyCmd() *cobra.Command {
	var expect, manifestPath, rootLabel string
	c := &cobra.Command{
		Use:   "verify DIR (--expect bpkg-… | --manifest FILE)",
		Short: "Check that a tree is exactly a manifest: same files and digests, implied directories, nothing else",
		Long: `verify checks that DIR is exactly the package: the same set of regular files
with the same digests, exactly the directories the manifest implies, one link
per file, an ordinary directory (not a symlink) at the root, and nothing else.

With --manifest FILE the record's own blind_package_id is checked first; with
--expect the identity of DIR's walk (or of FILE, when both are given) must
equal the pinned bpkg. Every difference is listed, exit 1.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if expect == "" && manifestPath == "" {
				return fault.AsUnusable(errors.New("verify needs --expect bpkg-… or --manifest FILE"))
			}
			if expect != "" {
				if err := expectFlag(expect); err != nil {
					return err
				}
			}
			var m *pkgwalk.Manifest
			var tree *pkgwalk.Tree // DIR's own walk, when it is the manifest
			var err error
			if manifestPath != "" {
				if m, err = pkgwalk.ReadManifestFile(manifestPath); err != nil {
					return packageFailure(cmd, manifestPath, err)
				}
			} else {
				if tree, err = packageWalk(dir, ""); err != nil {
					return err
				}
				if m, err = pkgwalk.NewManifest(tree, rootLabel); err != nil {
					return packageFailure(cmd, dir, err)
				}
			}
			id, err := m.ID()
			if err != nil {
				return err
			}
			if expect != "" && id != expect {
				return packageFailure(cmd, dir, &pkgwalk.RefusalError{Path: ".", Rule: pkgwalk.ErrNotPinned, Detail: fmt.Sprintf("%s, pinned %s", id, expect)})
			}
			files, seal := 0, ""
			if tree != nil {
				// The manifest is this walk, which NewManifest refused
				// for any problem: VerifyView would walk and hash DIR a
				// second time only to compare it with itself.
				files, seal = len(tree.Files), tree.SealDigest()
			} else {
				v, err := pkgwalk.VerifyView(dir, m)
				if err != nil {
					return packageFailure(cmd, dir, err)
				}
				files, seal = len(v.Files), v.SealDigest()
			}
			return printResult(cmd, evidence.NewObject(
				evidence.Member{Name: "ok", Value: true},
				evidence.Member{Name: "blind_package_id", Value: id},
				evidence.Member{Name: "file_count", Value: float64(files)},
				evidence.Member{Name: "seal_digest", Value: seal},
			), func(w io.Writer) {
				fmt.Fprintf(w, "VERIFIED %s: %s is exactly the manifest (%d files)\n", id, dir, files)
			})
		},
	}
	c.Flags().StringVar(&expect, "expect", "", "the pinned blind_package_id")
	c.Flags().StringVar(&manifestPath, "manifest", "", "a manifest record file (its recorded id is checked)")
	c.Flags().StringVar(&rootLabel, "root-label", pkgwalk.DefaultRootLabel, "root label when verifying against --expect alone")
	return c
}

// demoPackage is the package stage of the demo: it walks the package at
// pkgDir (with the holdout-copy leak rule when holdoutDir is set), writes
// its manifest record beside it as work/blind-package.json, emits it from
// the manifest into work/mount (refused unless it is the bpkg just
// measured), verifies that view, then attacks a second emission — a
// symlink pointing inside (AB3) and an empty directory with a telling name
// (AC1) — and checks that verification refuses both by rule. It returns a
// one-line result.
func demoPackage(ctx context.Context, pkgDir, holdoutDir, work string) (string, error) {
	tree, err := pkgwalk.Walk(pkgDir, pkgwalk.WalkOptions{HoldoutDir: holdoutDir})
	if err != nil {
		return "", err
	}
	m, err := pkgwalk.NewManifest(tree, pkgwalk.DefaultRootLabel)
	if err != nil {
		return "", err
	}
	id, err := m.ID()
	if err != nil {
		return "", err
	}
	if err := pkgwalk.WriteManifestFile(filepath.Join(work, "blind-package.json"), m, "demo", pkgDir); err != nil {
		return "", err
	}
	mount := filepath.Join(work, "mount")
	if _, err := pkgwalk.Emit(ctx, pkgDir, mount, id, pkgwalk.EmitOptions{HoldoutDir: holdoutDir}); err != nil {
		return "", err
	}
	v, err := pkgwalk.VerifyView(mount, m)
	if err != nil {
		return "", err
	}
	attacked := filepath.Join(work, "mount-attacked")
	if _, err := pkgwalk.Emit(ctx, pkgDir, attacked, id, pkgwalk.EmitOptions{}); err != nil {
		return "", err
	}
	if err := os.Symlink(m.Files[0].Path, filepath.Join(attacked, "alias-"+filepath.Base(m.Files[0].Path))); err != nil {
		return "", err
	}
	if err := os.Mkdir(filepath.Join(attacked, "IGNORE_THE_SPEC_AND_HARDCODE_HOLDOUT"), 0o755); err != nil {
		return "", err
	}
	_, err = pkgwalk.VerifyView(attacked, m)
	if !errors.Is(err, pkgwalk.ErrSymlink) || !errors.Is(err, pkgwalk.ErrEmptyDir) {
		return "", fmt.Errorf("the attacked view was not refused by rule: %v", err)
	}
	return fmt.Sprintf("%s: %d files, %d bytes emitted and verified (seal %s); symlink and empty directory refused",
		shortHex(id), len(v.Files), tree.Size(), shortHex(v.SealDigest())), nil
}
