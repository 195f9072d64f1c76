package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/sign"
	"github.com/spf13/cobra"
)

func newRunCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "run",
		Short: "The run lifecycle: pin, freeze, reveal, abort; list, verify, status, id",
		Long: `A run is the record governance/blind-run.json (TRVM-BLIND-IMPLEMENTATION-RUN-v3)
of a world: the package at docs/spec/proof-wire/ (or where the world root's
cleanroom-package says, see "world init --root-label") and the state root
governance/ (blind-run.json, receipts/, holdout/). --world selects the world
root; without it the world is found as git finds a repository: the current
directory or the nearest one above it (on the same filesystem) that holds
docs/spec/proof-wire/ or governance/blind-run.json. The state root is never
selectable.

States: PINNED → CANDIDATE_FROZEN → REVEALED → COMPLETE, and ABORTED from any
non-terminal state. The reveal is refused before the candidate is frozen.
Every transition writes an immutable receipt
governance/receipts/<run_id>.<STATUS>.json first, then the record, under an
exclusive lock on the state root; the record each transition writes is
archived at governance/receipts/<run_id>/blind-run.json.

Every run whose receipts are in the state root is addressable: run list
shows them, and status, verify, report and finding list take --run with the
run_id of a run's latest state (default: the current record). run_id hashes
the record's content, so a pin of content identical to an earlier pin is the
same PINNED state and shares its receipt; runs become distinct histories at
the first transition where they differ.

Exit status: 0 success, 1 refused (the run or the input broke a rule; every
problem is named), 2 unusable arguments.`,
	}
	c.PersistentFlags().String("world", "", "world root (holding docs/spec/proof-wire/ and governance/); default: the nearest directory from here upwards that holds docs/spec/proof-wire/ or governance/blind-run.json")
	c.PersistentFlags().Duration("lock-timeout", 0, "how long a transition waits for another one holding the state root's lock")
	return c
}

// openWorld opens the --world of cmd. Without --world it finds the world
// holding the current directory as git finds a repository
// (experiment.FindWorld), and says on stderr which one when it is not the
// current directory itself, so an operator never acts on a world by
// surprise.
func openWorld(cmd *cobra.Command) (*experiment.World, error) {
	dir, _ := cmd.Flags().GetString("world")
	if cmd.Flags().Changed("world") {
		return experiment.OpenWorld(dir)
	}
	w, err := experiment.FindWorld(".")
	if err != nil {
		return nil, fmt.Errorf("%w (run it inside a world, or pass --world DIR)", err)
	}
	if here, herr := experiment.OpenWorld("."); herr == nil && here.Root != w.Root {
		fmt.Fprintf(cmd.ErrOrStderr(), "cleanroom: world %s (the nearest directory above the current one holding %s/, %s or %s/%s; --world selects another)\n",
			w.Root, experiment.PackageDirName, experiment.PackageMarkerName, experiment.StateDirName, experiment.RecordFileName)
	}
	return w, nil
}

// lockContext bounds how long a transition waits for the state lock.
func lockContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	d, _ := cmd.Flags().GetDuration("lock-timeout")
	return context.WithTimeout(cmd.Context(), d)
}

// signFlag adds --sign-key to a transition and returns a loader.
func signFlag(c *cobra.Command) func() (experiment.TransitionOptions, error) {
	var key string
	c.Flags().StringVar(&key, "sign-key", "", "OpenSSH Ed25519 private key: write a detached SSHSIG <receipt>.sig (namespace "+experiment.ReceiptNamespace+")")
	return func() (experiment.TransitionOptions, error) {
		if key == "" {
			return experiment.TransitionOptions{}, nil
		}
		s, err := sign.LoadSigner(key)
		if err != nil {
			return experiment.TransitionOptions{}, err
		}
		return experiment.TransitionOptions{Signer: s}, nil
	}
}

// doTransition opens the world, loads the signing key and runs one
// transition under the --lock-timeout, printing it with extra.
func doTransition(cmd *cobra.Command, loadSign func() (experiment.TransitionOptions, error),
	step func(ctx context.Context, w *experiment.World, opt experiment.TransitionOptions) (*experiment.Transition, error),
	extra func(t *experiment.Transition, out io.Writer)) error {
	w, err := openWorld(cmd)
	if err != nil {
		return err
	}
	opt, err := loadSign()
	if err != nil {
		return err
	}
	ctx, cancel := lockContext(cmd)
	defer cancel()
	t, err := step(ctx, w, opt)
	if err != nil {
		return err
	}
	var ex func(io.Writer)
	if extra != nil {
		ex = func(out io.Writer) { extra(t, out) }
	}
	return printTransition(cmd, t, ex)
}

// splitList splits a comma-separated flag value, trimming each element.
func splitList(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	var out []string
	for _, x := range strings.Split(s, ",") {
		out = append(out, strings.TrimSpace(x))
	}
	return out
}

func printTransition(cmd *cobra.Command, t *experiment.Transition, extra func(w io.Writer)) error {
	return printResult(cmd, t, func(w io.Writer) {
		fmt.Fprintf(w, "%s %s\n", t.Status, t.RunID)
		if t.PreviousRunID != "" {
			fmt.Fprintf(w, "  previous   %s\n", t.PreviousRunID)
		}
		fmt.Fprintf(w, "  receipt    %s (sha256 %s)\n", t.Receipt, shortHex(t.ReceiptSHA256))
		for _, e := range t.Earlier {
			fmt.Fprintf(w, "  same state as earlier run %s, %s\n", e.RunID, e.Outcome)
		}
		switch {
		case len(t.Earlier) > 0:
			fmt.Fprintf(w, "             run_id hashes the record's content (docs/formats.md §5.2): identical content is the\n"+
				"             same state, so this receipt is shared with that history, never rewritten. The earlier\n"+
				"             run stays addressable: cleanroom run verify --run %s\n", t.Earlier[0].RunID)
			if t.Status == experiment.StatusPinned {
				fmt.Fprintln(w, "             This run becomes a history of its own at the freeze, when anything about the candidate\n"+
					"             differs (label, files, binary, environment). A pin of identical content cannot get a new\n"+
					"             run_id; to start from a distinct identity, pin different content (cleanroom release issue).")
			}
		case t.Reused:
			fmt.Fprintln(w, "             (already written with these exact bytes: a transition retried after an interruption,\n"+
				"             or identical to an earlier run's last one)")
		}
		if t.Signature != "" {
			fmt.Fprintf(w, "  signature  %s\n", t.Signature)
		}
		if extra != nil {
			extra(w)
		}
	})
}

func newRunPinCmd() *cobra.Command {
	var refFile, impl, command, files, binary string
	c := &cobra.Command{
		Use:   "pin",
		Short: "Start a run: pin the release, the package, the instrument and the reference subject",
		Long: `pin writes a new record at PINNED selecting the tree's release (which must
verify and be archived byte for byte), the walked package's bpkg (refused on
any walk problem or leak), the instrument digest and the reference adapter.
Refused while a non-terminal run exists: abort it first.

By default the reference is the one the world declares (reference_adapter
in docs/spec/proof-wire/experiment/world.json), or, in a world that declares
nothing, the TRVM JavaScript adapter (refused as "no reference adapter" when
its files are not there). --reference FILE reads one as data
({implementation, role, command, package_files, binary_path, …}; digests are
recomputed, never read), and --implementation, --command, --package-files
and --binary override or describe it.`,
		Args: cobra.NoArgs,
	}
	loadSign := signFlag(c)
	c.Flags().StringVar(&refFile, "reference", "", "reference adapter as a JSON file")
	c.Flags().StringVar(&impl, "implementation", "", "reference implementation label")
	c.Flags().StringVar(&command, "command", "", "reference command, comma-separated ({{CHALLENGES}}, {{OUT}} placeholders)")
	c.Flags().StringVar(&files, "package-files", "", "reference package files, comma-separated, world-relative")
	c.Flags().StringVar(&binary, "binary", "", "reference executable, world-relative")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		opt := experiment.PinOptions{}
		if refFile != "" {
			b, err := evidence.ReadFileBytes(refFile)
			if err != nil {
				return err
			}
			if opt.Reference, err = experiment.ParseAdapterSpec(b, refFile); err != nil {
				return err
			}
		}
		if impl != "" {
			opt.Reference.Implementation = impl
		}
		if files != "" {
			opt.Reference.PackageFiles = splitList(files)
		}
		if command != "" {
			opt.Reference.Command = splitList(command)
		}
		if binary != "" {
			opt.Reference.Binary = binary
		}
		return doTransition(cmd, loadSign, func(ctx context.Context, w *experiment.World, topt experiment.TransitionOptions) (*experiment.Transition, error) {
			opt.TransitionOptions = topt
			return experiment.Pin(ctx, w, opt)
		}, func(t *experiment.Transition, out io.Writer) {
			r := t.Record
			fmt.Fprintf(out, "  release    %s\n  package    %s\n  instrument %s\n", r.SpecReleaseID, r.BlindPackageID, r.InstrumentDigest)
			for _, a := range r.Adapters {
				fmt.Fprintf(out, "  reference  %s %s\n", a.Implementation, a.PackageDigest)
			}
			sup := t.Superseded
			if sup == "" {
				sup = "nothing: this is the first run"
			}
			fmt.Fprintf(out, "  supersedes %s\nPinning is a human act; no gate performs it.\n", sup)
		})
	}
	return c
}

func newRunFreezeCmd() *cobra.Command {
	var o experiment.FreezeOptions
	var files, command string
	c := &cobra.Command{
		Use:   "freeze",
		Short: "Freeze the candidate (PINNED → CANDIDATE_FROZEN): source, binary and environment digested",
		Long: `freeze adds a candidate adapter: the digest of --files (world-relative files
or directories), the sha256 of --binary, and the environment --toolchain,
--model, --tool-version — all required, because which agent with what access
is part of what the result means. The command defaults to
<binary>,{{CHALLENGES}},{{OUT}}. The run must verify as it stands, and the
record the freeze writes must verify too.`,
		Args: cobra.NoArgs,
	}
	loadSign := signFlag(c)
	c.Flags().StringVar(&o.Implementation, "implementation", "", "candidate implementation label ([A-Za-z0-9][A-Za-z0-9._-]{0,63})")
	c.Flags().StringVar(&files, "files", "", "candidate source files, comma-separated, world-relative")
	c.Flags().StringVar(&o.Binary, "binary", "", "candidate executable, world-relative")
	c.Flags().StringVar(&command, "command", "", "command, comma-separated (default <binary>,{{CHALLENGES}},{{OUT}})")
	c.Flags().StringVar(&o.Toolchain, "toolchain", "", "toolchain that built the candidate")
	c.Flags().StringVar(&o.Model, "model", "", "model that wrote the candidate")
	c.Flags().StringVar(&o.ToolVersion, "tool-version", "", "version of the harness/tool used")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		o.Files, o.Command = splitList(files), splitList(command)
		return doTransition(cmd, loadSign, func(ctx context.Context, w *experiment.World, opt experiment.TransitionOptions) (*experiment.Transition, error) {
			o.TransitionOptions = opt
			return experiment.Freeze(ctx, w, o)
		}, func(t *experiment.Transition, out io.Writer) {
			if a, ok := t.Record.Adapter(o.Implementation); ok {
				fmt.Fprintf(out, "  candidate  %s package %s binary %s %s\n", a.Implementation, shortHex(a.PackageDigest), *a.BinaryPath, shortHex(*a.BinaryDigest))
				fmt.Fprintf(out, "  environment toolchain=%q model=%q tool_version=%q\n", a.Environment.Toolchain, a.Environment.Model, a.Environment.ToolVersion)
			}
			fmt.Fprintln(out, "The reveal is now permitted; it was refused before this.")
		})
	}
	return c
}

func newRunRevealCmd() *cobra.Command {
	var o experiment.RevealOptions
	c := &cobra.Command{
		Use:   "reveal",
		Short: "Open the challenge set (CANDIDATE_FROZEN → REVEALED)",
		Long: `reveal is refused from any state but CANDIDATE_FROZEN, and unless the run
verifies in full (chain, digests, executables, package) and the holdout
matches the release's commitment. --holdout DIR names the challenge set
(default governance/holdout); a directory elsewhere is installed into
governance/holdout and must match there.`,
		Args: cobra.NoArgs,
	}
	loadSign := signFlag(c)
	c.Flags().StringVar(&o.Holdout, "holdout", "", "challenge set directory (default governance/holdout)")
	c.Flags().StringVar(&o.Reason, "reason", "", "receipt note (default \"challenge set opened\")")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return doTransition(cmd, loadSign, func(ctx context.Context, w *experiment.World, opt experiment.TransitionOptions) (*experiment.Transition, error) {
			o.TransitionOptions = opt
			return experiment.Reveal(ctx, w, o)
		}, nil)
	}
	return c
}

func newRunAbortCmd() *cobra.Command {
	var reason string
	c := &cobra.Command{
		Use:   "abort",
		Short: "End the run from any non-terminal state",
		Long: `abort moves a non-terminal run to ABORTED, writing --reason into the
receipt's note. It does not require the run to verify: a run you cannot
abort when it is broken is a trap.`,
		Args: cobra.NoArgs,
	}
	loadSign := signFlag(c)
	c.Flags().StringVar(&reason, "reason", "", "why the run ends (required)")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if strings.TrimSpace(reason) == "" {
			return fault.AsUnusable(errors.New("--reason is required"))
		}
		return doTransition(cmd, loadSign, func(ctx context.Context, w *experiment.World, opt experiment.TransitionOptions) (*experiment.Transition, error) {
			return experiment.Abort(ctx, w, reason, opt)
		}, nil)
	}
	return c
}

func newRunVerifyCmd() *cobra.Command {
	var signer string
	c := &cobra.Command{
		Use:   "verify",
		Short: "Verify the run (docs/formats.md §5.7), printing each check",
		Long: `verify checks the world's run as it is now: SPEC-RELEASE readable, the record's
bytes through the strict reader, its closed shape, type and status, run_id
recomputed, the release archived, the instrument members and digest, every
package digest, the executed subjects (binary bytes, commands, paths inside
the world), a candidate for a revealed run, the tree's release, the receipt
chain back to PINNED, the blind package, for a COMPLETE run the RESULT
replayed from the archive, and every observation and scored result the
run's measurements archived in governance/evidence/, re-digested.
--signer-key also requires a valid detached signature beside every receipt
on the chain. --run selects an earlier run (cleanroom run list); its
archived record is checked the same way, against the tree as it is now.`,
		Args: cobra.NoArgs,
	}
	c.Flags().StringVar(&signer, "signer-key", "", "OpenSSH public key whose receipt signatures are required")
	runFlag(c)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		w, opt, _, err := selectRun(cmd, experiment.VerifyOptions{Evidence: true})
		if err != nil {
			return err
		}
		if signer != "" {
			if opt.SignerKey, err = sign.LoadPublicKey(signer); err != nil {
				return err
			}
		}
		rep, err := experiment.Verify(cmd.Context(), w, opt)
		if err != nil {
			return err
		}
		if err := printResult(cmd, rep, func(out io.Writer) { printRunReport(out, rep) }); err != nil {
			return err
		}
		if !rep.OK() {
			return fault.AsRefused(fmt.Errorf("the run does not verify: %d problem(s)", len(rep.Problems())))
		}
		return nil
	}
	return c
}

func printRunReport(out io.Writer, rep *experiment.RunReport) {
	fmt.Fprintf(out, "world  %s\n", rep.World)
	if rep.RunID != "" {
		fmt.Fprintf(out, "run    %s %s\n", rep.RunID, rep.Status)
	}
	for _, c := range rep.Checks {
		mark := "✓"
		switch {
		case c.Skipped != "" && c.OK && len(c.Problems) == 0:
			mark = "–"
		case !c.OK:
			mark = "✗"
		}
		line := mark + " " + c.Name
		if c.Skipped != "" {
			line += " (" + c.Skipped + ")"
		}
		fmt.Fprintln(out, line)
		for _, d := range c.Details {
			fmt.Fprintf(out, "    %s\n", d)
		}
	}
	for _, e := range rep.Explained {
		fmt.Fprintf(out, "  note: governance/%s is the temporary file of an interrupted transition (never published; removed by the next transition)\n", e)
	}
	if rep.OK() {
		fmt.Fprintln(out, "VERIFIED")
	} else {
		fmt.Fprintf(out, "NOT VERIFIED: %d problem(s)\n", len(rep.Problems()))
	}
}

// timelineEntry is `run status` output.
type timelineEntry struct {
	Status   string   `json:"status"`
	RunID    string   `json:"run_id"`
	Time     string   `json:"time"`
	Receipt  string   `json:"receipt"`
	SHA256   string   `json:"receipt_sha256"`
	Note     string   `json:"note"`
	Admitted []string `json:"admitted,omitempty"`
}

func newRunStatusCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the run's witnessed history as a timeline",
		Long: `status prints the receipt chain of the current run (--run: an earlier one,
see run list), oldest first: the state, when its receipt was written, the
receipt's sha256, and who was frozen with what (the subjects each step
admitted). Only receipts the chain walk reaches
are shown; a problem with the run is printed below the timeline.`,
		Args: cobra.NoArgs,
	}
	runFlag(c)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		w, opt, _, err := selectRun(cmd, experiment.VerifyOptions{})
		if err != nil {
			return err
		}
		rep, entries, err := experiment.Timeline(cmd.Context(), w, opt)
		if err != nil {
			return err
		}
		var out []timelineEntry
		for _, e := range entries {
			out = append(out, timelineEntry{Status: string(e.Status), RunID: e.RunID, Time: e.Time.UTC().Format(time.RFC3339), Receipt: e.Receipt,
				SHA256: e.ReceiptSHA256, Note: e.Note, Admitted: e.AdmittedTexts()})
		}
		problems := []string{}
		for _, p := range rep.Problems() {
			problems = append(problems, p.Error())
		}
		v := map[string]any{"run_id": rep.RunID, "status": string(rep.Status), "timeline": out, "problems": problems}
		if err := printResult(cmd, v, func(o io.Writer) {
			if rep.RunID == "" {
				fmt.Fprintln(o, "no run record")
			}
			for _, e := range out {
				fmt.Fprintf(o, "%s  %-16s %s\n", e.Time, e.Status, e.RunID)
				fmt.Fprintf(o, "    receipt %s  sha256 %s\n    note    %s\n", e.Receipt, shortHex(e.SHA256), e.Note)
				for _, a := range e.Admitted {
					fmt.Fprintf(o, "    admits  %s\n", a)
				}
			}
			for _, p := range problems {
				fmt.Fprintf(o, "✗ %s\n", p)
			}
		}); err != nil {
			return err
		}
		if len(problems) > 0 {
			return fault.AsRefused(fmt.Errorf("the run does not verify: %d problem(s)", len(problems)))
		}
		return nil
	}
	return c
}

func newRunIDCmd() *cobra.Command {
	var showPreimage bool
	c := &cobra.Command{
		Use:   "id FILE",
		Short: "Print the run_id a run record's content implies (no world needed)",
		Long: `id reads FILE strictly (closed shape, roles, labels) and prints
run_id = "brun-" + sha256 of the TRVM-BLIND-RUN-CORE-v1 preimage (TAB lines,
not JSON). --preimage prints the preimage too.

Exit status: 0 the computed run_id equals the recorded one, 1 it does not or
the record broke a rule, 2 unusable arguments.`,
		Args: cobra.ExactArgs(1),
	}
	c.Flags().BoolVar(&showPreimage, "preimage", false, "also print the exact preimage")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		b, err := evidence.ReadFileBytes(args[0])
		if err != nil {
			return err
		}
		r, err := experiment.ParseRecord(b, args[0])
		if err != nil {
			return err
		}
		id := r.ComputeRunID()
		v := map[string]any{"file": args[0], "run_id": id, "recorded": r.RunID, "match": id == r.RunID}
		if showPreimage {
			v["preimage"] = r.Preimage()
		}
		if err := printResult(cmd, v, func(o io.Writer) {
			fmt.Fprintln(o, id)
			if id != r.RunID {
				fmt.Fprintf(o, "✗ recorded run_id %s\n", r.RunID)
			}
			if showPreimage {
				fmt.Fprint(o, r.Preimage())
			}
		}); err != nil {
			return err
		}
		if id != r.RunID {
			return fault.AsRefused(fmt.Errorf("%s: recorded run_id %s, computed %s", args[0], r.RunID, id))
		}
		return nil
	}
	return c
}

// runFlag adds --run to a command that reads a run.
func runFlag(c *cobra.Command) {
	c.Flags().String("run", "", "the run to read, by the run_id of its latest state (cleanroom run list; default: the current record)")
	_ = c.RegisterFlagCompletionFunc("run", func(cmd *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		w := completionWorld(cmd)
		if w == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		runs, err := w.Runs()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var ids []cobra.Completion
		for _, r := range runs {
			ids = append(ids, cobra.CompletionWithDesc(r.RunID, string(r.Status)))
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	})
}

// completionWorld is the world a completion reads (--world, or the one
// holding the current directory), or nil: completing prints nothing else.
func completionWorld(cmd *cobra.Command) *experiment.World {
	dir, _ := cmd.Flags().GetString("world")
	var w *experiment.World
	var err error
	if cmd.Flags().Changed("world") {
		w, err = experiment.OpenWorld(dir)
	} else {
		w, err = experiment.FindWorld(".")
	}
	if err != nil {
		return nil
	}
	return w
}

// selectRun opens the --world and, when --run names a run, sets opt to
// verify that run's record instead of the current one. sel is nil without
// --run.
func selectRun(cmd *cobra.Command, opt experiment.VerifyOptions) (*experiment.World, experiment.VerifyOptions, *experiment.SelectedRun, error) {
	w, err := openWorld(cmd)
	if err != nil {
		return nil, opt, nil, err
	}
	id, _ := cmd.Flags().GetString("run")
	if id == "" {
		return w, opt, nil, nil
	}
	sel, err := w.SelectRun(id)
	if err != nil {
		return nil, opt, nil, err
	}
	return w, sel.VerifyOptions(opt), sel, nil
}

func newRunListCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "list",
		Short: "List every run of the world: its states, when each was witnessed, and its outcome",
		Long: `list reads every receipt in governance/receipts/ and shows each run: its
history from PINNED to the state it reached (the time each receipt was
written), its outcome, and whether it is the current record. A run is named
by the run_id of its latest state; give that to --run of status, verify,
report and finding list.

A state marked "shared" is on more than one run's history: run_id hashes the
record's content (docs/formats.md §5.2), so a later pin (or freeze, …) of
identical content reaches the same state and its receipt is not written
twice. Receipts are listed as they are; run verify --run checks a run.`,
		Args: cobra.NoArgs,
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		w, err := openWorld(cmd)
		if err != nil {
			return err
		}
		runs, err := w.Runs()
		if err != nil {
			return err
		}
		if runs == nil {
			runs = []experiment.RunSummary{}
		}
		return printResult(cmd, map[string]any{"world": w.Root, "runs": runs}, func(o io.Writer) {
			if len(runs) == 0 {
				fmt.Fprintln(o, "no runs: nothing is pinned in this world (cleanroom run pin)")
			}
			for i, r := range runs {
				if i > 0 {
					fmt.Fprintln(o)
				}
				cur := ""
				if r.Current {
					cur = "  (current record)"
				}
				fmt.Fprintf(o, "%s %s%s\n  outcome  %s\n", r.RunID, r.Status, cur, r.Outcome)
				for _, st := range r.States {
					shared := ""
					if st.Shared {
						shared = "  (shared)"
					}
					fmt.Fprintf(o, "  %s  %-16s %s%s\n", st.Time.UTC().Format(time.RFC3339), st.Status, shortHex(st.RunID), shared)
				}
				if !r.RecordArchived {
					fmt.Fprintln(o, "  its record was not archived (made before records were archived): --run cannot verify it")
				}
				for _, p := range r.Problems {
					fmt.Fprintf(o, "  ✗ %s\n", p)
				}
			}
		})
	}
	return c
}
