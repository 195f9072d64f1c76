package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/spf13/cobra"
)

func newHoldoutCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "holdout",
		Short: "The holdout: commitment, challenge check, scorer, fixture self-test, interop comparison",
		Long: `holdout measures implementations against a committed challenge set.

The scorer loads no protocol code: it reads observation documents through the
strict reader and both schemas of the pinned package (never a copy inside this
binary), evaluates eight predicate operators, and refuses a document rather
than scoring it when it crosses a boundary rule.`,
	}
	return c
}

// loadChallenges reads --challenges: a holdout directory or a JSON array
// file (the fixture form). Its errors carry their class from where they are
// made (internal/fault): an argument that cannot be read is unusable, what
// is read and breaks a rule is refused.
func loadChallenges(arg string) ([]*holdout.Challenge, error) {
	fi, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		h, err := holdout.LoadDir(arg)
		if err != nil {
			return nil, err
		}
		return h.Challenges, nil
	}
	b, err := evidence.ReadFileBytes(arg)
	if err != nil {
		return nil, err
	}
	return holdout.ParseChallenges(b, arg)
}

// refusedJSON gives a holdout command's refusal the {refused} member of
// the scorer's output form (TRVM scoreRun) in its --json failure document.
// Only a refusal: an input that could not be read (exit 2) is not one, and
// a script reading --json must not be told it was.
func refusedJSON(err error) error {
	if fault.ClassOf(err) != fault.Refused {
		return err
	}
	return withDetail(err, evidence.Member{Name: "refused", Value: err.Error()})
}

func newHoldoutScoreCmd() *cobra.Command {
	var challenges, observations, pkg, expRel, expImpl string
	c := &cobra.Command{
		Use:   "score --challenges DIR|FILE --observations DOC",
		Short: "Score one observation document against a challenge set",
		Long: `score evaluates every predicate of every challenge against one
TRVM-HOLDOUT-OBSERVATION-v1 document.

Each predicate is PASS, FAIL or UNRESOLVED (a path that does not resolve, or
LT over a non-number); a challenge the document does not observe is missing.
The verdict is PASS only when fail = unresolved = missing = 0.

The document is REFUSED (exit 1, nothing scored) when it does not cross the
strict reader, when any challenge violates the recipe schema, when the document
violates the observation schema, when its implementation or spec_release_id is
not the expected one, or when an observation's fixture_root is not the
challenge's fixture.root. Both schemas come from --package.

With --json the output is {results:[{id, op, path, pass, detail}], missing,
total, pass, fail, unresolved, implementation, spec_release_id}, or the
failure document {error, exit_code, refused: "…"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := holdout.LoadPackageSchemas(pkg)
			if err != nil {
				return err
			}
			chs, err := loadChallenges(challenges)
			if err != nil {
				return refusedJSON(err)
			}
			doc, err := evidence.ReadFile(observations)
			if err != nil {
				return refusedJSON(err)
			}
			rep, err := holdout.Score(s, chs, doc, holdout.Options{ExpectRelease: expRel, ExpectImplementation: expImpl})
			if err != nil {
				var re *holdout.RefusedError
				if errors.As(err, &re) {
					if !jsonOutput(cmd) {
						w := cmd.ErrOrStderr()
						fmt.Fprintf(w, "cleanroom: %s: refused, %d problem(s), nothing scored:\n", observations, len(re.Problems))
						for _, p := range re.Problems {
							fmt.Fprintf(w, "  %s\n", p.Text)
						}
						return fault.AsRefused(nil)
					}
					return refusedJSON(err)
				}
				return err
			}
			if err := printResult(cmd, rep.JSON(), func(w io.Writer) { printScore(w, rep) }); err != nil {
				return err
			}
			if v := rep.Verdict(); v != "PASS" {
				return fault.AsRefused(fmt.Errorf("%s: verdict %s", observations, v))
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&challenges, "challenges", "", "holdout directory (INDEX.json + challenges) or a JSON array of challenges")
	f.StringVar(&observations, "observations", "", "the observation document to score")
	f.StringVar(&pkg, "package", experiment.PackageDirName, "the pinned package root whose experiment/ holds both schemas")
	f.StringVar(&expRel, "expect-release", "", "refuse unless the document's spec_release_id is this srel")
	f.StringVar(&expImpl, "expect-implementation", "", "refuse unless the document's implementation is this label")
	for _, f := range []string{"challenges", "observations"} {
		_ = c.MarkFlagRequired(f)
	}
	return c
}

func printScore(w io.Writer, rep *holdout.Report) {
	fmt.Fprintf(w, "implementation %s, release %s\n", rep.Implementation, rep.SpecReleaseID)
	last := ""
	for _, r := range rep.Results {
		if r.ID != last {
			fmt.Fprintf(w, "%s\n", r.ID)
			last = r.ID
		}
		fmt.Fprintf(w, "  %-10s %-14s %s  %s\n", r.Outcome(), r.Op, r.Path, r.Detail)
	}
	for _, m := range rep.Missing {
		fmt.Fprintf(w, "%s\n  MISSING    (no observation for this challenge)\n", m)
	}
	fmt.Fprintf(w, "total %d: pass %d, fail %d, unresolved %d, missing %d\n", rep.Total, rep.Pass, rep.Fail, rep.Unresolved, len(rep.Missing))
	fmt.Fprintf(w, "verdict %s\n", rep.Verdict())
}

func newHoldoutFixtureCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "fixture EXPERIMENT_DIR",
		Short: "Run the scorer's self-test over a package's synthetic fixture",
		Long: `fixture scores experiment/fixtures/ of a package with that package's own
schemas: the synthetic challenges must give exactly the expected
pass/fail/unresolved counts with all eight operators evaluated, every negative
case must be REFUSED, a copy differing only in its implementation label must
give no interop finding, and one changed artifact_root must give exactly one.
Any disagreement is exit 1: a scorer that fails its self-test scores nothing.
A fixture file of the wrong shape (a missing by_challenge, a count that is
not a non-negative integer, a member the self-test does not read) is exit 1
too, "self-test fixture malformed", naming the file and the member.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := holdout.SelfTest(args[0])
			if err != nil {
				// Classed where made: a fixture that is there and
				// malformed broke a rule; one that cannot be read is unusable.
				return err
			}
			if err := printResult(cmd, fixtureJSON(r), func(w io.Writer) { printFixture(w, r) }); err != nil {
				return err
			}
			if !r.OK() {
				return fmt.Errorf("%w: %d problems", holdout.ErrSelfTest, len(r.Problems))
			}
			return nil
		},
	}
}

func fixtureJSON(r *holdout.FixtureReport) *evidence.Object {
	by := &evidence.Object{}
	if r.Report != nil {
		for id, c := range r.Report.ByChallenge() {
			by.Set(id, evidence.NewObject(
				evidence.Member{Name: "pass", Value: c.Pass},
				evidence.Member{Name: "fail", Value: c.Fail},
				evidence.Member{Name: "unresolved", Value: c.Unresolved}))
		}
	}
	negs := make([]any, len(r.Negatives))
	for i, n := range r.Negatives {
		reason := ""
		if n.Err != nil {
			reason = n.Err.Error()
		}
		negs[i] = evidence.NewObject(
			evidence.Member{Name: "id", Value: n.ID},
			evidence.Member{Name: "rule", Value: n.Rule},
			evidence.Member{Name: "refused", Value: n.Refused},
			evidence.Member{Name: "reason", Value: reason})
	}
	probs := make([]any, len(r.Problems))
	for i, p := range r.Problems {
		probs[i] = p
	}
	ops := make([]any, len(r.Operators))
	for i, o := range r.Operators {
		ops[i] = o
	}
	ok := "FIXTURE PASS"
	if !r.OK() {
		ok = "FIXTURE FAIL"
	}
	return evidence.NewObject(
		evidence.Member{Name: "verdict", Value: ok},
		evidence.Member{Name: "by_challenge", Value: by},
		evidence.Member{Name: "operators", Value: ops},
		evidence.Member{Name: "negatives", Value: negs},
		evidence.Member{Name: "interop_twin_findings", Value: len(r.TwinFindings)},
		evidence.Member{Name: "interop_mutation_findings", Value: len(r.MutationFindings)},
		evidence.Member{Name: "problems", Value: probs})
}

func printFixture(w io.Writer, r *holdout.FixtureReport) {
	if r.Report != nil {
		by := r.Report.ByChallenge()
		for _, res := range r.Report.Results {
			if c, ok := by[res.ID]; ok {
				fmt.Fprintf(w, "%s: pass %d, fail %d, unresolved %d\n", res.ID, c.Pass, c.Fail, c.Unresolved)
				delete(by, res.ID)
			}
		}
		fmt.Fprintf(w, "predicates %d = %d/%d/%d; operators evaluated %d\n", r.Report.Total, r.Report.Pass, r.Report.Fail, r.Report.Unresolved, len(r.Operators))
	}
	refused := 0
	for _, n := range r.Negatives {
		if n.Refused {
			refused++
		}
	}
	fmt.Fprintf(w, "negatives refused %d of %d\n", refused, len(r.Negatives))
	fmt.Fprintf(w, "interop: label-only twin %d findings, one mutated member %d finding(s)\n", len(r.TwinFindings), len(r.MutationFindings))
	for _, p := range r.Problems {
		fmt.Fprintf(w, "PROBLEM: %s\n", p)
	}
	if r.OK() {
		fmt.Fprintln(w, "FIXTURE PASS")
	} else {
		fmt.Fprintln(w, "FIXTURE FAIL")
	}
}

func newHoldoutInteropCmd() *cobra.Command {
	var pkg string
	c := &cobra.Command{
		Use:   "interop DOC...",
		Short: "Deep-compare observation documents of different implementations",
		Long: `interop compares every pair of observation documents member by member
(every member, not only what predicates read). Each difference is an
UNCLASSIFIED_FINDING with its path and both values, for a person to classify.
Fewer than two documents is NOT MEASURED, never PASS (exit 1). Every document
must cross the strict reader and, with --package, the observation schema;
documents naming different releases are refused.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var s *holdout.Schemas
			if pkg != "" {
				var err error
				if s, err = holdout.LoadPackageSchemas(pkg); err != nil {
					return err
				}
			}
			docs := make([]holdout.Document, 0, len(args))
			for _, a := range args {
				v, err := evidence.ReadFile(a)
				if err != nil {
					return refusedJSON(err)
				}
				if s != nil {
					if err := s.Observation.Validate(v); err != nil {
						return refusedJSON(fmt.Errorf("%s: %w", a, err))
					}
				}
				label := filepath.Base(a)
				if o, ok := v.(*evidence.Object); ok {
					if l, ok := o.Get("implementation"); ok {
						if ls, ok := l.(string); ok {
							label = ls
						}
					}
				}
				docs = append(docs, holdout.Document{Implementation: label, Value: v})
			}
			r, err := holdout.CompareAll(docs)
			if err != nil {
				return refusedJSON(err)
			}
			if err := printResult(cmd, r.JSON(), func(w io.Writer) { printInterop(w, r) }); err != nil {
				return err
			}
			if v := r.Verdict(); v != "PASS" {
				return fault.AsRefused(fmt.Errorf("interop %s: %d finding(s) between the documents", v, r.Findings))
			}
			return nil
		},
	}
	c.Flags().StringVar(&pkg, "package", "", "validate every document against this package's observation schema")
	return c
}

func printInterop(w io.Writer, r *holdout.Interop) {
	for _, p := range r.Pairs {
		fmt.Fprintf(w, "%s vs %s: %d finding(s)\n", p.A, p.B, len(p.Findings))
		for _, f := range p.Findings {
			fmt.Fprintf(w, "  %s  %s\n    %s: %s\n    %s: %s\n", f.Classification, f.Path, p.A, f.A, p.B, f.B)
		}
	}
	fmt.Fprintf(w, "interop %s (%d pairs, %d findings)\n", r.Verdict(), len(r.Pairs), r.Findings)
}

func newHoldoutCheckCmd() *cobra.Command {
	var pkg string
	c := &cobra.Command{
		Use:   "check DIR",
		Short: "Validate a holdout directory: index, every challenge against the package's recipe schema",
		Long: `check reads a holdout directory (INDEX.json and exactly the files it names)
through the strict reader and validates every challenge against the recipe
schema of --package. An unknown recipe operator, an unknown member or a
challenge that disagrees with its index entry is refused (exit 1). When the
package holds SPEC-RELEASE.json, the directory must also recompute the
release's holdout_commitment and holdout_entries (paths relative to the
package root), or it is refused: a set altered after the commitment is not
the committed set.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := holdout.LoadPackageSchemas(pkg)
			if err != nil {
				return err
			}
			// A directory that is not there is unusable input, not a
			// holdout set refused.
			if err := inputDir(args[0], args[0]); err != nil {
				return err
			}
			// With the package's SPEC-RELEASE.json the set must also be the
			// one the release committed to (experiment.CheckHoldout).
			h, rel, err := experiment.CheckHoldout(pkg, args[0], s)
			if err != nil {
				return err
			}
			committed := "no SPEC-RELEASE.json in the package: commitment not checked"
			if rel != nil {
				committed = fmt.Sprintf("matches the release's holdout_commitment %s", rel.HoldoutCommitment)
			}
			preds := 0
			for _, c := range h.Challenges {
				preds += len(c.Predicates())
			}
			out := evidence.NewObject(
				evidence.Member{Name: "holdout", Value: args[0]},
				evidence.Member{Name: "entries", Value: len(h.Entries)},
				evidence.Member{Name: "predicates", Value: preds},
				evidence.Member{Name: "valid", Value: true},
				evidence.Member{Name: "commitment", Value: committed})
			return printResult(cmd, out, func(w io.Writer) {
				fmt.Fprintf(w, "%s: %d challenges, %d predicates, every challenge valid against %s\n%s\n", args[0], len(h.Entries), preds, holdout.RecipeSchemaFile, committed)
			})
		},
	}
	c.Flags().StringVar(&pkg, "package", experiment.PackageDirName, "the pinned package root whose experiment/ holds the recipe schema")
	return c
}

func newHoldoutCommitmentCmd() *cobra.Command {
	var pkg string
	c := &cobra.Command{
		Use:   "commitment DIR --package PKGDIR",
		Short: "Print the holdout_commitment and holdout_entries of a holdout directory",
		Long: `commitment computes the path-list digest of every file under DIR with each
path made relative to the package root --package (docs/formats.md §3.5: for the
reference layout every path reads ../../../governance/holdout/<file>), and the
number of INDEX.json entries. The tree must hold exactly entries + 1 files.
The same digest is what release issue records and reveal checks.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// A directory that is not there (or a FIFO, a file, a dangling
			// link) is unusable input, as for holdout check; it must never
			// digest to a commitment of nothing.
			if err := inputDir(args[0], args[0]); err != nil {
				return err
			}
			c, n, err := experiment.HoldoutCommitment(pkg, args[0])
			if err != nil {
				return err
			}
			out := evidence.NewObject(
				evidence.Member{Name: "holdout_commitment", Value: c},
				evidence.Member{Name: "holdout_entries", Value: n})
			return printResult(cmd, out, func(w io.Writer) { fmt.Fprintf(w, "%s %d\n", c, n) })
		},
	}
	c.Flags().StringVar(&pkg, "package", experiment.PackageDirName, "the package root the paths are made relative to")
	return c
}
