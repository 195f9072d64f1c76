package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/spf13/cobra"
)

func newReleaseCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "release",
		Short: "Release identity: verify and issue SPEC-RELEASE records, compute srel, diff releases",
		Long: `A release is the record SPEC-RELEASE.json at the root of a release package
(TRVM-PROOF-WIRE-SPEC-RELEASE-v1), archived as releases/<srel>.json. Its
identity srel is recomputable from the record alone; every digest it records
is recomputable from the package.`,
	}
	return c
}

func newReleaseVerifyCmd() *cobra.Command {
	var holdout string
	var allowMissing bool
	c := &cobra.Command{
		Use:   "verify PKGDIR",
		Short: "Recompute every digest and srel of PKGDIR/SPEC-RELEASE.json and check the archive",
		Long: `verify reads PKGDIR/SPEC-RELEASE.json strictly and prints one line per check
(✓ or ✗, with the recorded and recomputed values on a mismatch): the byte
form, the CHECKED protocols, spec/experiment/public-corpus/jcs digests and
file lists recomputed from the files on disk, the jcs_upstream constants,
the holdout commitment (with --holdout; otherwise NOT PRESENT), srel from
the record, and releases/<srel>.json byte-identical to the record.

A file the record lists but the disk lacks is named; its recorded sha256
stands in so the digest can still be recomputed, and the files_present check
fails unless --allow-missing is given.

Exit status: 0 every check passed, 1 a check failed or the record broke a
rule, 2 unusable arguments.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := namedHoldout(holdout); err != nil {
				return err
			}
			rep, err := experiment.VerifyRelease(args[0], holdout)
			if err != nil {
				return err
			}
			if allowMissing {
				for i := range rep.Checks {
					if rep.Checks[i].Name == "files_present" && !rep.Checks[i].OK {
						rep.Checks[i].OK = true
						rep.Checks[i].Detail += " (accepted: --allow-missing)"
					}
				}
				rep.OK = len(rep.Failed()) == 0
			}
			err = printResult(cmd, rep, func(w io.Writer) { printReport(w, rep) })
			if err != nil {
				return err
			}
			if !rep.OK {
				return fault.AsRefused(fmt.Errorf("%s: release does not verify: %s", args[0], strings.Join(rep.Failed(), ", ")))
			}
			return nil
		},
	}
	c.Flags().StringVar(&holdout, "holdout", "", "holdout directory to check holdout_commitment against (paths relative to PKGDIR)")
	c.Flags().BoolVar(&allowMissing, "allow-missing", false, "accept listed files absent on disk when their recorded sha256 makes every digest match")
	return c
}

// namedHoldout refuses a --holdout that names no directory (exit 2): the
// release rules read a holdout directory that is not there as "absent", so
// a mistyped path would otherwise be issued or checked as no holdout at all.
func namedHoldout(dir string) error {
	if dir == "" {
		return nil
	}
	return inputDir("--holdout "+dir, dir)
}

func printReport(w io.Writer, rep *experiment.ReleaseReport) {
	fmt.Fprintf(w, "release %s\n", rep.Record)
	fmt.Fprintf(w, "srel    %s\n", rep.SpecRelID)
	for _, c := range rep.Checks {
		mark := "✓"
		switch {
		case c.Status == experiment.StatusNotPresent:
			mark = "–"
		case !c.OK:
			mark = "✗"
		}
		line := fmt.Sprintf("%s %-30s %s", mark, c.Name, c.Plane)
		if c.Status == experiment.StatusOK && c.Recomputed != "" {
			line += "  " + c.Recomputed
		}
		fmt.Fprintln(w, line)
		if c.Status == experiment.StatusMismatch && (c.Recorded != "" || c.Recomputed != "") {
			fmt.Fprintf(w, "    recorded   %s\n    recomputed %s\n", c.Recorded, c.Recomputed)
		}
		if c.Detail != "" && (c.Status != experiment.StatusOK || c.Name == "archive") {
			fmt.Fprintf(w, "    %s\n", c.Detail)
		}
		if c.Name == "files_present" {
			for _, m := range c.Missing {
				fmt.Fprintf(w, "    missing on disk: %s\n", m)
			}
		} else if len(c.Missing) > 0 {
			fmt.Fprintf(w, "    %d file(s) missing on disk: their recorded sha256 used\n", len(c.Missing))
		}
	}
	if rep.OK {
		fmt.Fprintln(w, "VERIFIED")
	} else {
		fmt.Fprintf(w, "NOT VERIFIED: %s\n", strings.Join(rep.Failed(), ", "))
	}
}

// idResult is the output of `release id`.
type idResult struct {
	File        string `json:"file"`
	ID          string `json:"spec_release_id"`
	Recorded    string `json:"recorded"`
	Match       bool   `json:"match"`
	Preimage    string `json:"preimage,omitempty"`
	ByteForm    bool   `json:"reference_byte_form"`
	ReleaseType string `json:"release_type"`
}

func newReleaseIDCmd() *cobra.Command {
	var showPreimage bool
	c := &cobra.Command{
		Use:   "id FILE",
		Short: "Compute srel from a release record alone (no package needed)",
		Long: `id reads FILE (a SPEC-RELEASE.json or an archived releases/<srel>.json)
strictly and prints srel = "srel-" + sha256("TRVM-PROOF-WIRE-SPEC-RELEASE-v1|" +
RFC 8785 of the release_core projection). --preimage also prints the exact
bytes hashed.

Exit status: 0 the computed srel equals the recorded spec_release_id, 1 it
does not or the record broke a rule, 2 unusable arguments.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := experiment.ReadRelease(args[0])
			if err != nil {
				return err
			}
			id, err := r.ID()
			if err != nil {
				return err
			}
			res := idResult{File: args[0], ID: id, Recorded: r.SpecReleaseID, Match: id == r.SpecReleaseID, ReleaseType: r.ReleaseType}
			if b, err := r.Bytes(); err == nil {
				res.ByteForm = string(b) == string(r.Raw)
			}
			if showPreimage {
				pre, err := r.Preimage()
				if err != nil {
					return err
				}
				res.Preimage = string(pre)
			}
			if err := printResult(cmd, res, func(w io.Writer) {
				fmt.Fprintln(w, id)
				if !res.Match {
					fmt.Fprintf(w, "✗ recorded spec_release_id %s\n", r.SpecReleaseID)
				}
				if showPreimage {
					fmt.Fprintf(w, "preimage: %s\n", res.Preimage)
				}
			}); err != nil {
				return err
			}
			if !res.Match {
				return fault.AsRefused(fmt.Errorf("%s: recorded spec_release_id %s, computed %s", args[0], r.SpecReleaseID, id))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&showPreimage, "preimage", false, "also print the exact preimage srel hashes")
	return c
}

func newReleaseIssueCmd() *cobra.Command {
	var opts experiment.IssueOptions
	c := &cobra.Command{
		Use:   "issue PKGDIR --spec-revision N --experiment-revision M --corpus-revision K",
		Short: "Compute a release from PKGDIR and write SPEC-RELEASE.json and releases/<srel>.json",
		Long: `issue computes every digest of the package on disk (no hand-written hash
anywhere), the protocols from schema/nested-composition-v2.json, the holdout
commitment (with --holdout; "absent" with --no-holdout) and srel; audits
the srel formula (every core leaf moves it, the note and file lists do not);
with --holdout, refuses a package that leaks it (a copy of a holdout file, a
committed challenge whole or its id with its predicates or recipe however
reformatted, a challenge-shaped JSON, a leaking path: what run pin would
refuse later, "package leaks the holdout"); and
writes releases/<srel>.json (created exclusively; an existing archive with
identical bytes is fine, with different bytes it is refused and nothing is
written) and then SPEC-RELEASE.json, each atomically.

When PKGDIR is a world's package (docs/spec/proof-wire, or the path its
cleanroom-package names) and the world's governance/holdout exists,
omitting --holdout is refused ("the world's holdout exists and is not
committed"): a release committing "absent" there opens no challenge set at
reveal. --no-holdout commits "absent" on purpose.

Exit status: 0 issued, 1 refused (the package or an archive broke a rule),
2 unusable arguments.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, f := range []string{"spec-revision", "experiment-revision", "corpus-revision"} {
				if !cmd.Flags().Changed(f) {
					return fault.AsUnusable(fmt.Errorf("--%s is required (a positive integer label)", f))
				}
			}
			for _, v := range []int{opts.SpecRevision, opts.ExperimentRevision, opts.PublicCorpusRevision} {
				if v < 1 {
					return fault.AsUnusable(fmt.Errorf("revisions are positive integers, have %d", v))
				}
			}
			if err := namedHoldout(opts.HoldoutDir); err != nil {
				return err
			}
			if opts.NoHoldout && opts.HoldoutDir != "" {
				return fault.AsUnusable(errors.New("--holdout and --no-holdout contradict each other"))
			}
			is, err := experiment.IssueRelease(args[0], opts)
			if err != nil {
				return err
			}
			return printResult(cmd, is, func(w io.Writer) {
				fmt.Fprintf(w, "issued  %s\n", is.ID)
				fmt.Fprintf(w, "record  %s\n", is.RecordPath)
				if is.ArchiveExisted {
					fmt.Fprintf(w, "archive %s (already present, byte-identical)\n", is.ArchivePath)
				} else {
					fmt.Fprintf(w, "archive %s\n", is.ArchivePath)
				}
				fmt.Fprintf(w, "formula audit: %d leaves perturbed, srel moved for exactly the %d core leaves\n", len(is.Audit), len(experiment.CoreLeaves))
			})
		},
	}
	c.Flags().IntVar(&opts.SpecRevision, "spec-revision", 0, "spec revision label (positive integer)")
	c.Flags().IntVar(&opts.ExperimentRevision, "experiment-revision", 0, "experiment revision label (positive integer)")
	c.Flags().IntVar(&opts.PublicCorpusRevision, "corpus-revision", 0, "public corpus revision label (positive integer)")
	c.Flags().StringVar(&opts.HoldoutDir, "holdout", "", "holdout directory to commit to (paths relative to PKGDIR)")
	c.Flags().BoolVar(&opts.NoHoldout, "no-holdout", false, "commit \"absent\" although the world's governance/holdout exists")
	c.Flags().StringVar(&opts.Note, "note", "", "note (NON_AUTHORITATIVE: outside srel)")
	return c
}

// diffResult is the output of `release diff`.
type diffResult struct {
	A, B        string              `json:"-"`
	SrelA       string              `json:"srel_a"`
	SrelB       string              `json:"srel_b"`
	SrelMoved   bool                `json:"srel_moved"`
	Substantive []string            `json:"core_changes"`
	Changes     []experiment.Change `json:"changes"`
}

func newReleaseDiffCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "diff A.json B.json",
		Short: "Show which identities moved between two release records, and why",
		Long: `diff reads two release records strictly and lists every changed field with
its plane; a change inside release_core moves srel (core: yes). Whether a
change is substantive for a run in progress is the operator's decision: a
pinned run stays pinned to its srel, and aborting it is a human act.

Exit status: 0 (also when they differ), 1 a record broke a rule, 2 unusable
arguments.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := experiment.ReadRelease(args[0])
			if err != nil {
				return err
			}
			b, err := experiment.ReadRelease(args[1])
			if err != nil {
				return err
			}
			res := diffResult{A: args[0], B: args[1], Changes: experiment.DiffReleases(a, b), Substantive: []string{}}
			if res.SrelA, err = a.ID(); err != nil {
				return err
			}
			if res.SrelB, err = b.ID(); err != nil {
				return err
			}
			res.SrelMoved = res.SrelA != res.SrelB
			if res.Changes == nil {
				res.Changes = []experiment.Change{}
			}
			for _, c := range res.Changes {
				if c.Core {
					res.Substantive = append(res.Substantive, c.Field)
				}
			}
			return printResult(cmd, res, func(w io.Writer) {
				if res.SrelMoved {
					fmt.Fprintf(w, "srel moved: %s → %s\n", res.SrelA, res.SrelB)
				} else {
					fmt.Fprintf(w, "srel unchanged: %s\n", res.SrelA)
				}
				for _, c := range res.Changes {
					if c.Field == "/spec_release_id" {
						continue // the header line says whether srel moved
					}
					core := "outside srel"
					if c.Core {
						core = "core: moves srel"
					}
					fmt.Fprintf(w, "  %-48s %-18s %s\n      %s → %s\n", c.Field, c.Plane, core, orNone(c.Old), orNone(c.New))
				}
				if len(res.Changes) == 0 {
					fmt.Fprintln(w, "  no differences")
				}
			})
		},
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return shortHex(s)
}

// demoIssueRelease issues the release of the package at pkg (revisions
// 1/1/1, committing the holdout); issuing verifies every check of what it
// wrote.
func demoIssueRelease(env *demoEnv, pkg, holdout string) (string, error) {
	is, err := experiment.IssueRelease(pkg, experiment.IssueOptions{
		SpecRevision: 1, ExperimentRevision: 1, PublicCorpusRevision: 1, HoldoutDir: holdout,
	})
	if err != nil {
		return "", err
	}
	// IssueRelease verified what it wrote (ErrIssuedNotVerified otherwise):
	// its report is shown, the package is not walked a second time.
	env.ids["srel"] = is.ID
	env.ids["release_package"] = pkg
	return fmt.Sprintf("%s issued, %d checks verified", is.ID, len(is.Verified.Checks)), nil
}
