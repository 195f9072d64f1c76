package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom/adapter"
	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/holdout"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/sandbox"
	"github.com/spf13/cobra"
)

// runnerFlags adds the execution flags shared by complete and measure.
func runnerFlags(c *cobra.Command) func() (adapter.RunOptions, error) {
	var noSandbox bool
	var timeout time.Duration
	var memory int64
	c.Flags().BoolVar(&noSandbox, "no-sandbox", false, "run adapters as plain child processes (NO network or file-system isolation; recorded as unsandboxed)")
	c.Flags().DurationVar(&timeout, "timeout", adapter.DefaultTimeout, "wall-clock limit per adapter")
	c.Flags().Int64Var(&memory, "memory", 2<<30, "memory limit per adapter in bytes (sandbox only)")
	return func() (adapter.RunOptions, error) {
		o := adapter.RunOptions{Timeout: timeout, Memory: memory}
		if noSandbox {
			o.Runner = adapter.UnsandboxedRunner{}
			return o, nil
		}
		if _, err := sandbox.CheckKernel(); err != nil {
			return o, fmt.Errorf("the adapters run in the candidate sandbox: %w (--no-sandbox runs them unisolated, recorded as such)", err)
		}
		o.Runner = adapter.SandboxRunner{}
		return o, nil
	}
}

func measurementJSON(m *adapter.RunMeasurement) *evidence.Object {
	out := &evidence.Object{}
	if m == nil {
		return out
	}
	if m.SelfTest != nil {
		out.Set("self_test", m.SelfTest.OK())
	}
	subs := []any{}
	for i, s := range m.Subjects {
		o := evidence.NewObject(
			evidence.Member{Name: "implementation", Value: s.Implementation},
			evidence.Member{Name: "role", Value: s.Role},
			evidence.Member{Name: "state", Value: s.State},
			evidence.Member{Name: "runner", Value: s.Runner},
			evidence.Member{Name: "sandboxed", Value: s.Sandboxed})
		if s.Report != nil {
			o.Set("score", s.Report.JSON())
			o.Set("verdict", s.Report.Verdict())
			failing := []any{}
			for _, x := range notPassing(m, s) {
				failing = append(failing, evidence.NewObject(
					evidence.Member{Name: "challenge", Value: x.ID}, evidence.Member{Name: "index", Value: x.Index},
					evidence.Member{Name: "op", Value: x.Op}, evidence.Member{Name: "path", Value: x.Path},
					evidence.Member{Name: "expected", Value: x.Expected}, evidence.Member{Name: "observed", Value: x.Observed},
					evidence.Member{Name: "verdict", Value: x.Outcome()}))
			}
			o.Set("not_passing", failing)
		} else {
			o.Set("reason", s.Reason)
		}
		if i < len(m.Archived) && m.Archived[i].Observation != nil {
			a := m.Archived[i]
			o.Set("archived", evidence.NewObject(
				evidence.Member{Name: "observation", Value: "governance/" + a.Observation.File},
				evidence.Member{Name: "scored", Value: "governance/" + a.Scored.File}))
		}
		subs = append(subs, o)
	}
	out.Set("subjects", subs)
	if m.Logged.File != "" {
		out.Set("logged", "governance/"+experiment.MeasurementsDirName+"/"+m.Logged.File)
	}
	if m.Interop != nil {
		out.Set("interop", m.Interop.JSON())
	}
	fs := []any{}
	for _, f := range m.Findings {
		fs = append(fs, findingJSON(f))
	}
	out.Set("findings", fs)
	out.Set("outstanding", m.Outstanding)
	return out
}

func findingJSON(f *holdout.FindingRecord) *evidence.Object {
	class := any(nil)
	if f.Class != "" {
		class = f.Class
	}
	return evidence.NewObject(
		evidence.Member{Name: "finding_id", Value: f.ID},
		evidence.Member{Name: "path", Value: f.Path},
		evidence.Member{Name: "a", Value: f.A}, evidence.Member{Name: "a_value", Value: f.AValue},
		evidence.Member{Name: "b", Value: f.B}, evidence.Member{Name: "b_value", Value: f.BValue},
		evidence.Member{Name: "class", Value: class},
		evidence.Member{Name: "ruling", Value: f.Ruling},
		evidence.Member{Name: "opened_in", Value: f.OpenedIn},
		evidence.Member{Name: "run_id", Value: f.RunID})
}

func printMeasurement(w io.Writer, m *adapter.RunMeasurement) {
	if m == nil {
		return
	}
	if m.SelfTest != nil {
		verdict := "FIXTURE PASS"
		if !m.SelfTest.OK() {
			verdict = "FIXTURE FAIL"
		}
		fmt.Fprintf(w, "self-test  %s\n", verdict)
	}
	for _, s := range m.Subjects {
		how := s.Runner
		if s.Runner != "" && !s.Sandboxed {
			how += " (NOT SANDBOXED)"
		}
		if s.Report != nil {
			r := s.Report
			fmt.Fprintf(w, "%-10s %-9s %s  %d predicates: %d pass, %d fail, %d unresolved, %d missing → %s  [%s]\n",
				s.Implementation, s.Role, s.State, r.Total, r.Pass, r.Fail, r.Unresolved, len(r.Missing), r.Verdict(), how)
			// Every predicate that did not pass, by name, with both values:
			// "7 pass, 1 fail" alone leaves the operator guessing which.
			for _, x := range notPassing(m, s) {
				fmt.Fprintf(w, "  ✗ %s %s\n", s.Implementation, x.Describe())
			}
			continue
		}
		fmt.Fprintf(w, "%-10s %-9s %s  %s\n", s.Implementation, s.Role, s.State, s.Reason)
	}
	if m.Interop != nil {
		verdict := m.Interop.Verdict()
		if verdict == holdout.Unclassified && m.Outstanding == 0 {
			verdict = "ALL FINDINGS CLASSIFIED"
		}
		fmt.Fprintf(w, "interop    %s (%d pairs, %d findings, %d unclassified)\n", verdict, len(m.Interop.Pairs), m.Interop.Findings, m.Outstanding)
	}
	for _, f := range m.Findings {
		class := "UNCLASSIFIED_FINDING"
		if f.Class != "" {
			class = f.Class
		}
		fmt.Fprintf(w, "  %s  %s\n    %s: %s\n    %s: %s\n    %s\n", f.ID, f.Path, f.A, f.AValue, f.B, f.BValue, class)
	}
	if m.Logged.File != "" {
		fmt.Fprintf(w, "logged     governance/%s/%s (observations and scored results archived in governance/%s/)\n", experiment.MeasurementsDirName, m.Logged.File, experiment.EvidenceDirName)
	}
}

// notPassing lists a measured subject's predicates that failed, are
// unresolved or belong to a challenge its document does not observe.
func notPassing(m *adapter.RunMeasurement, s *adapter.Measurement) []holdout.Result {
	var chs []*holdout.Challenge
	if m.Holdout != nil {
		chs = m.Holdout.Challenges
	}
	var out []holdout.Result
	for _, x := range s.Report.Rows(chs) {
		if x.Outcome() != "PASS" {
			out = append(out, x)
		}
	}
	return out
}

func newRunCompleteCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "complete",
		Short: "Measure the revealed run and, if everything holds, move it to COMPLETE",
		Long: `complete runs the scorer's self-test over the package's fixture (a failing
self-test stops everything), loads the committed challenge set (it must
recompute the release's holdout_commitment and validate against the recipe
schema), runs every frozen adapter in the candidate sandbox after re-checking
its package and binary digests, scores each observation document and
compares every pair. New disagreements are opened in the findings register
(governance/findings/) as UNCLASSIFIED_FINDINGs. Every observation document
and its scored results (every predicate: op, path, expected, observed,
verdict) are archived in governance/evidence/ and linked from the
measurements log (governance/measurements/), whatever happens next; every
predicate that did not pass is printed with its expected and observed
values.

It is refused (exit 1) while any frozen subject is unmeasured (refused,
failed, timed out: an absent measurement, never a zero), any predicate is
unsatisfied, unresolved or missing, fewer than two documents were compared,
or any finding of this run is unclassified (cleanroom run finding classify;
findings opened in other runs do not block this one). Otherwise it
archives each observation at governance/receipts/<run_id>/observations/,
writes the RESULT (TRVM-BLIND-RUN-RESULT-v3), replays it and only then writes
the COMPLETE receipt and the record.

--no-sandbox runs adapters as plain processes without isolation; use it only
where the sandbox is unavailable — every measurement records it.`,
		Args: cobra.NoArgs,
	}
	loadSign := signFlag(c)
	runner := runnerFlags(c)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return runMeasurement(cmd, runner, func(w *experiment.World, opt adapter.RunOptions) (*adapter.RunMeasurement, *experiment.Transition, *experiment.Result, error) {
			var err error
			if opt.Transition, err = loadSign(); err != nil {
				return nil, nil, nil, err
			}
			return adapter.CompleteRun(cmd.Context(), w, opt)
		})
	}
	return c
}

// runMeasurement opens the world, runs do (a measurement, with or without
// the transition) and prints what it saw, refused or not.
func runMeasurement(cmd *cobra.Command, runner func() (adapter.RunOptions, error),
	do func(*experiment.World, adapter.RunOptions) (*adapter.RunMeasurement, *experiment.Transition, *experiment.Result, error)) error {
	w, err := openWorld(cmd)
	if err != nil {
		return err
	}
	opt, err := runner()
	if err != nil {
		return err
	}
	opt.Progress = progressLine(cmd)
	m, t, res, err := do(w, opt)
	if fault.ClassOf(err) == fault.NoIsolation {
		return err // nothing was measured
	}
	out := measurementJSON(m)
	if t != nil {
		out.Set("status", string(t.Status))
		out.Set("run_id", t.RunID)
	}
	if res != nil {
		out.Set("result", res.Object())
	}
	if err != nil {
		out.Set("refused", err.Error())
	}
	if perr := printResult(cmd, out, func(o io.Writer) {
		printMeasurement(o, m)
		if t != nil {
			fmt.Fprintf(o, "%s %s\n", t.Status, t.RunID)
		}
	}); perr != nil {
		return perr
	}
	if err != nil {
		return err
	}
	return nil
}

func newRunMeasureCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "measure",
		Short: "Run the self-test, every permitted adapter, the scorer and interop — without any transition",
		Long: `measure is complete without the transition: it prints what completion would
see (and opens new findings in the register), archiving every observation
and its scored results in governance/evidence/ and logging the measurement
in governance/measurements/. Candidates are run only when the receipt chain
witnesses REVEALED; before that they are NOT_RUN and their challenge file is
never written. A finished run (COMPLETE or ABORTED) is not measured.`,
		Args: cobra.NoArgs,
	}
	runner := runnerFlags(c)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return runMeasurement(cmd, runner, func(w *experiment.World, opt adapter.RunOptions) (*adapter.RunMeasurement, *experiment.Transition, *experiment.Result, error) {
			m, err := adapter.MeasureRun(cmd.Context(), w, opt)
			return m, nil, nil, err
		})
	}
	return c
}

func newRunFindingCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "finding",
		Short: "The findings register: list and classify interop disagreements",
		Long: `Every interop disagreement is opened in governance/findings/ as an
UNCLASSIFIED_FINDING. A person classifies it as one of the world's finding
classes: those it declares (finding_classes in
docs/spec/proof-wire/experiment/world.json), or the reference protocol's six:
` + strings.Join(holdout.Classes, ", ") + `.
Entries are immutable files 000001.json, 000002.json, … each carrying the
SHA-256 of the one before; a finding is classified once.`,
	}
	return c
}

func newRunFindingListCmd() *cobra.Command {
	var unclassified, quiet bool
	list := &cobra.Command{
		Use:   "list [--unclassified] [-q] [--run brun-…]",
		Short: "List every finding with its class and the run that opened it",
		Long: `list prints every finding of the register: its id, path, the two
implementations, its class and ruling (or UNCLASSIFIED_FINDING), and the
run that opened it (the run_id it was measured under). --unclassified keeps
only the findings nobody has classified yet; -q prints only their ids, one
per line (for scripts).
--run keeps the findings one run opened (cleanroom run list): those measured
under a state on its history.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, _, sel, err := selectRun(cmd, experiment.VerifyOptions{})
			if err != nil {
				return err
			}
			reg, err := w.FindingsRegister()
			if err != nil {
				return err
			}
			all, err := reg.Findings()
			if err != nil {
				return err
			}
			fs := all
			if sel != nil && sel.Summary != nil {
				// A finding belongs to the run whose history holds the state
				// it was opened at.
				fs = slices.DeleteFunc(slices.Clone(fs), func(f *holdout.FindingRecord) bool { return !sel.Summary.Contains(f.RunID) })
			}
			if unclassified {
				fs = slices.DeleteFunc(slices.Clone(fs), func(f *holdout.FindingRecord) bool { return f.Class != "" })
			}
			if quiet {
				for _, f := range fs {
					fmt.Fprintln(cmd.OutOrStdout(), f.ID)
				}
				return nil
			}
			arr := []any{}
			for _, f := range fs {
				arr = append(arr, findingJSON(f))
			}
			return printResult(cmd, evidence.NewObject(evidence.Member{Name: "findings", Value: arr}), func(o io.Writer) {
				switch {
				case len(fs) == 0 && unclassified:
					fmt.Fprintln(o, "no unclassified findings")
				case len(fs) == 0:
					fmt.Fprintln(o, "no findings")
				}
				for _, f := range fs {
					class := "UNCLASSIFIED_FINDING"
					if f.Class != "" {
						class = f.Class + " — " + f.Ruling
					}
					fmt.Fprintf(o, "%s  %s  (%s vs %s)\n  %s\n  opened in run %s (%s)\n", f.ID, f.Path, f.A, f.B, class, f.RunID, f.OpenedIn)
				}
			})
		},
	}
	list.Flags().BoolVar(&unclassified, "unclassified", false, "only the findings not yet classified")
	list.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the finding ids, one per line")
	runFlag(list)
	return list
}

func newRunFindingClassifyCmd() *cobra.Command {
	var class, ruling string
	classify := &cobra.Command{
		Use:   "classify ID --class C --ruling TEXT",
		Short: "Classify a finding (once; the entry is immutable)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := openWorld(cmd)
			if err != nil {
				return err
			}
			reg, err := w.FindingsRegister()
			if err != nil {
				return err
			}
			// The id, the class and the ruling are all arguments: naming no
			// finding is as unusable as naming no class, or no ruling
			// (holdout classes all three unusable).
			f, err := reg.Classify(args[0], class, ruling)
			if err != nil {
				return err
			}
			return printResult(cmd, findingJSON(f), func(o io.Writer) {
				fmt.Fprintf(o, "%s  %s → %s (%s)\n", f.ID, f.Path, f.Class, f.ClassifiedIn)
			})
		},
	}
	classify.Flags().StringVar(&class, "class", "", "one of the world's finding classes (the reference protocol's: "+strings.Join(holdout.Classes, ", ")+")")
	// The shell completes the ids of the findings not yet classified.
	classify.ValidArgsFunction = func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		w := completionWorld(cmd)
		if w == nil || len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		fs, err := holdout.OpenRegister(w.StateDir()).Findings()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var ids []cobra.Completion
		for _, f := range fs {
			if f.Class == "" {
				ids = append(ids, cobra.CompletionWithDesc(f.ID, f.Path))
			}
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
	classify.Flags().StringVar(&ruling, "ruling", "", "the ruling, in words")
	_ = classify.RegisterFlagCompletionFunc("class", completeClasses)
	return classify
}

func newRunQuestionCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "question",
		Short: "The questions log: what the implementer asked, why the text was not enough, the ruling",
		Long: `A question about the frozen specification is recorded, never answered by
editing the specification mid-run: frozen_spec_revision, the question
verbatim, why the specification was insufficient, the ruling, its
classification (one of the world's finding classes, see run finding) and the superseding revision, if
any. Entries are immutable, digest-linked files in governance/questions/.`,
	}
	return c
}

func newRunQuestionAddCmd() *cobra.Command {
	var q holdout.Question
	var sup int
	add := &cobra.Command{
		Use:   "add --revision N --question TEXT --why TEXT --ruling TEXT --class C [--superseding-revision M]",
		Short: "Record a question and its ruling",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := openWorld(cmd)
			if err != nil {
				return err
			}
			if sup != 0 {
				q.SupersedingRevision = &sup
			}
			if q.Classes, err = w.FindingClasses(); err != nil {
				return err
			}
			e, err := holdout.AskQuestion(w.StateDir(), q)
			if err != nil {
				return err
			}
			return printResult(cmd, e.Value, func(o io.Writer) { fmt.Fprintf(o, "recorded %s (sha256 %s)\n", e.File, e.SHA256) })
		},
	}
	f := add.Flags()
	f.IntVar(&q.FrozenSpecRevision, "revision", 0, "the frozen spec revision the question is against")
	f.StringVar(&q.Question, "question", "", "the question, verbatim")
	f.StringVar(&q.WhyInsufficient, "why", "", "why the specification was insufficient")
	f.StringVar(&q.Ruling, "ruling", "", "the ruling")
	f.StringVar(&q.Classification, "class", "", "one of the world's finding classes (the reference protocol's: "+strings.Join(holdout.Classes, ", ")+")")
	f.IntVar(&sup, "superseding-revision", 0, "the revision that settles it, if any")
	_ = add.RegisterFlagCompletionFunc("class", completeClasses)
	return add
}

func newRunQuestionListCmd() *cobra.Command {
	list := &cobra.Command{
		Use:   "list",
		Short: "List the questions log",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w, err := openWorld(cmd)
			if err != nil {
				return err
			}
			es, err := holdout.Questions(w.StateDir())
			if err != nil {
				return err
			}
			arr := []any{}
			for _, e := range es {
				arr = append(arr, e.Value)
			}
			return printResult(cmd, evidence.NewObject(evidence.Member{Name: "questions", Value: arr}), func(o io.Writer) {
				if len(es) == 0 {
					fmt.Fprintln(o, "no questions")
				}
				for _, e := range es {
					fmt.Fprintf(o, "%s  rev %s  [%s]\n  Q: %s\n  why: %s\n  ruling: %s\n", e.File, plainValue(resolveNum(e.Value, "frozen_spec_revision")), e.Str("classification"), e.Str("question"), e.Str("why_insufficient"), e.Str("ruling"))
				}
			})
		},
	}
	return list
}

func resolveNum(o *evidence.Object, name string) any {
	v, _ := o.Get(name)
	return v
}

// completeClasses completes --class with the finding classes of the world
// --world names (its declared ones, or the reference protocol's six).
func completeClasses(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	// completionWorld, not openWorld: a completion prints nothing else.
	w := completionWorld(cmd)
	if w == nil {
		return holdout.Classes, cobra.ShellCompDirectiveNoFileComp
	}
	cs, err := w.FindingClasses()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	return cs, cobra.ShellCompDirectiveNoFileComp
}
