package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/experiment"
	"github.com/cleanroom-dev/cleanroom/fleet"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/sign"
	"github.com/spf13/cobra"
)

func newFleetCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "fleet",
		Short: "Many runs on an existing orchestrator: Kubernetes manifests out, verified records back",
	}
	return c
}

// readRuns reads and checks a run list (--runs, a required flag); a broken
// rule is exit 1, an unreadable file exit 2.
func readRuns(path string) ([]fleet.Run, []byte, error) {
	b, err := evidence.ReadFileBytes(path)
	if err != nil {
		return nil, nil, err
	}
	runs, err := fleet.ParseRuns(b, path)
	if err != nil {
		return nil, nil, err
	}
	return runs, b, nil
}

func newFleetPlanCmd() *cobra.Command {
	var runsPath, out string
	c := &cobra.Command{
		Use:   "plan --runs FILE --out DIR",
		Short: "Render a run list as Kubernetes manifests: a Job and a NetworkPolicy per run",
		Long: `plan reads a run list (a JSON array; each run: name, kind "blind" with srel
and bpkg or "amber" with case_manifest_sha256, candidate, image pinned by
digest, command, runtime_class runc|gvisor, allow [IP:PORT…], limits {cpu,
memory, ephemeral_storage, deadline_seconds}, optional results_claim) through
the strict reader, refuses it at the first broken rule, and writes DIR (which
must not exist) whole: k8s/<name>.yaml per run (the NetworkPolicy denying all
ingress and all egress but the allowlist, then the Job: the runtime class,
no host namespaces, no service-account token, read-only root filesystem, no
privilege escalation, all capabilities dropped, seccomp RuntimeDefault,
requests = limits, never retried, the pinned identities and the plan entry as
annotations and environment) and runs.json, the list as given, beside k8s/.
Apply with kubectl apply -f DIR/k8s/; end each run's command with
cleanroom fleet bind, and collect with --runs DIR/runs.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			runs, raw, err := readRuns(runsPath)
			if err != nil {
				return err
			}
			plan, err := fleet.WritePlan(runs, raw, out)
			if err != nil {
				return err
			}
			return printResult(cmd, plan, func(w io.Writer) {
				fmt.Fprintf(w, "plan sha256 %s\n", plan.PlanSHA256)
				for _, p := range plan.Runs {
					fmt.Fprintf(w, "%-6s %-24s %s  runtime %s, %d egress rule(s)\n", p.Kind, p.Name, p.File, p.RuntimeClass, p.Allow)
				}
				fmt.Fprintf(w, "%d run(s) planned in %s\n", len(plan.Runs), plan.Dir)
			})
		},
	}
	c.Flags().StringVar(&runsPath, "runs", "", "the run list (JSON array)")
	c.Flags().StringVar(&out, "out", "", "the plan directory to create")
	for _, f := range []string{"runs", "out"} {
		_ = c.MarkFlagRequired(f)
	}
	return c
}

func newFleetBindCmd() *cobra.Command {
	var dir, kind, run, runSHA, planSHA string
	env := func(name string) string { return os.Getenv(name) }
	c := &cobra.Command{
		Use:   "bind [--results DIR] [--kind K --run NAME --run-sha256 HEX --plan-sha256 HEX]",
		Short: "Name the run's plan entry beside its record (the last step of a planned Job)",
		Long: `bind writes DIR/` + fleet.EntryFileName + `: the run's name, its run_sha256, the
plan's sha256 and the sha256 of the record DIR holds (a blind world's run
record, or an AMBER run.json). Run it at the end of a planned Job's command,
once the record is final: every flag defaults to the environment the plan's
Job sets (CLEANROOM_RESULTS, CLEANROOM_KIND, CLEANROOM_RUN,
CLEANROOM_RUN_SHA256, CLEANROOM_PLAN_SHA256). fleet collect refuses a result
whose entry is missing, names another run or plan, or was bound to another
record (rule "plan entry"). An existing entry is never replaced.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" || kind == "" || run == "" || runSHA == "" || planSHA == "" {
				return fault.AsUnusable(fmt.Errorf("bind needs --results, --kind, --run, --run-sha256 and --plan-sha256 (or the plan's Job environment)"))
			}
			e, err := fleet.Bind(dir, kind, run, runSHA, planSHA)
			if err != nil {
				return err
			}
			return printResult(cmd, e, func(w io.Writer) {
				fmt.Fprintf(w, "bound %s to run %s (run_sha256 %s, plan %s, record %s)\n",
					dir, e.Run, e.RunSHA256, e.PlanSHA256, e.RecordSHA256)
			})
		},
	}
	c.Flags().StringVar(&dir, "results", env(fleet.EnvResults), "the run's result directory ($"+fleet.EnvResults+")")
	c.Flags().StringVar(&kind, "kind", env(fleet.EnvKind), "blind or amber ($"+fleet.EnvKind+")")
	c.Flags().StringVar(&run, "run", env(fleet.EnvRun), "the run's name ($"+fleet.EnvRun+")")
	c.Flags().StringVar(&runSHA, "run-sha256", env(fleet.EnvRunDigest), "the run's run_sha256 ($"+fleet.EnvRunDigest+")")
	c.Flags().StringVar(&planSHA, "plan-sha256", env(fleet.EnvPlanDigest), "the plan's sha256 ($"+fleet.EnvPlanDigest+")")
	return c
}

func newFleetCollectCmd() *cobra.Command {
	var runsPath, from, into, pub, signer string
	c := &cobra.Command{
		Use:   "collect --runs FILE --from DIR --into DIR [--pub KEY.pub] [--signer-key KEY.pub]",
		Short: "Copy what the Jobs wrote into the local results layout and verify each run",
		Long: `collect takes, for every run of the list, FROM/<name> (what the run's Job left
under /results: a world root for a blind run, run.json and run.json.sig for an
AMBER run), copies it to INTO/<name> (refusing symbolic links and special
files; an existing INTO/<name> is never replaced) and verifies it there: a
blind run as run verify does (with --signer-key, receipt signatures are
required) and its record must pin the planned srel, bpkg and candidate; an
AMBER record as amber record verify does against --pub, and must name the
planned case manifest and candidate (provider/model). Every result must hold
the plan entry fleet bind wrote for this run of this run list (name,
run_sha256, the list's sha256) bound to the record beside it: results swapped
between two runs pinned alike are refused. Every run is reported;
the exit is 1 unless every run verified. INTO is never a system tree of this
host (/, /etc, /usr, /proc, /sys, /dev, /var/lib, …, or a link to one): it is
refused before anything is written (exit 2).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			runs, _, err := readRuns(runsPath)
			if err != nil {
				return err
			}
			opt := fleet.CollectOptions{Verify: experiment.VerifyOptions{}}
			if pub != "" {
				if opt.AmberPub, err = sign.LoadPublicKey(pub); err != nil {
					return err
				}
			}
			if signer != "" {
				if opt.Verify.SignerKey, err = sign.LoadPublicKey(signer); err != nil {
					return err
				}
			}
			rep, err := fleet.Collect(cmd.Context(), runs, from, into, opt)
			if err != nil {
				return err
			}
			if err := printResult(cmd, rep, func(w io.Writer) { printCollect(w, rep) }); err != nil {
				return err
			}
			if !rep.OK() {
				bad := 0
				for _, r := range rep.Runs {
					if r.Verdict != fleet.Verified {
						bad++
					}
				}
				return fault.AsRefused(fmt.Errorf("%d of %d run(s) did not verify", bad, len(rep.Runs)))
			}
			return nil
		},
	}
	c.Flags().StringVar(&runsPath, "runs", "", "the run list the plan was made from")
	c.Flags().StringVar(&from, "from", "", "the results the Jobs wrote, one directory per run name")
	c.Flags().StringVar(&into, "into", "", "the local results directory")
	c.Flags().StringVar(&pub, "pub", "", "producer's public key for AMBER run records")
	c.Flags().StringVar(&signer, "signer-key", "", "OpenSSH public key whose receipt signatures blind runs must carry")
	for _, f := range []string{"runs", "from", "into"} {
		_ = c.MarkFlagRequired(f)
	}
	return c
}

func printCollect(w io.Writer, rep *fleet.CollectReport) {
	for _, r := range rep.Runs {
		fmt.Fprintf(w, "%-8s %-6s %-24s %s", r.Verdict, r.Kind, r.Name, r.Status)
		if len(r.Passed) > 0 {
			fmt.Fprintf(w, " (%d checks passed)", len(r.Passed))
		}
		fmt.Fprintln(w)
		for _, p := range r.Problems {
			fmt.Fprintf(w, "         %s\n", strings.ReplaceAll(p, "\n", "\n         "))
		}
	}
	for _, u := range rep.Unplanned {
		fmt.Fprintf(w, "unplanned %s (no run of the list names it: not collected)\n", u)
	}
}
