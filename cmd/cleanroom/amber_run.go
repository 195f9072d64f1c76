package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cleanroom-dev/cleanroom/amber"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/sign"
	"github.com/spf13/cobra"
)

func newAmberRunCmd() *cobra.Command {
	var o amber.RunOptions
	var candidate, pubPath, keyPath, indexPub, sealed, control, stateDir string
	c := &cobra.Command{
		Use:   "run CASEDIR --candidate PROVIDER/MODEL --pub KEY.pub --key KEY --index DIR --sealed IP:PORT --out RUNDIR -- CMD…",
		Short: "Run a candidate against a case in the sandbox and write the signed run record",
		Long: `run verifies the case by possession, refuses a case that is not in the index
or is retired, clones base.bundle into RUNDIR/workspace (no remote, no
credentials), and runs CMD in the candidate sandbox with the manifest's
isolation class: the mechanism-level isolation check and the seal probe of
the sealed store (--sealed, where oracle.pack is served) run before CMD
starts. After CMD ends, the oracle's evaluate script scores the workspace in
a separate container, and RUNDIR/run.json is written and signed (namespace
amber-run-record@cleanroom). Needs root and the sandbox.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash != 1 {
				return fault.AsUnusable(errors.New("usage: amber run CASEDIR [flags] -- CMD…"))
			}
			o.CaseDir, o.Args = args[0], args[1:]
			prov, model, ok := strings.Cut(candidate, "/")
			if !ok || prov == "" || model == "" {
				return fault.AsUnusable(fmt.Errorf("--candidate %q: want PROVIDER/MODEL", candidate))
			}
			o.Provider, o.Model = prov, model
			var err error
			if o.Producer, err = sign.LoadPublicKey(pubPath); err != nil {
				return err
			}
			if o.Signer, err = sign.LoadSigner(keyPath); err != nil {
				return err
			}
			if o.IndexVKey, err = readTrustedVKey(indexPub); err != nil {
				return err
			}
			s, err := addrPortFlag("--sealed", sealed)
			if err != nil {
				return err
			}
			o.Sealed = *s
			if control != "" {
				if o.Control, err = addrPortFlag("--control", control); err != nil {
					return err
				}
			}
			iso := &amber.SandboxIsolation{StateDir: stateDir}
			if err := iso.Available(); err != nil {
				return err
			}
			o.Isolation = iso
			o.Progress = progressLine(cmd)
			res, err := amber.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			r := res.Record
			if err := printResult(cmd, r, func(w io.Writer) {
				fmt.Fprintf(w, "run of %s by %s/%s: %s\n", r.CaseID, r.Candidate.Provider, r.Candidate.Model, r.TerminalState)
				fmt.Fprintf(w, "  reason         %s\n", r.Reason)
				fmt.Fprintf(w, "  scores         %s\n", plainMap(r.Scores))
				fmt.Fprintf(w, "  index_version  %d (root %s)\n", r.IndexVersion, r.IndexRoot)
				fmt.Fprintf(w, "  record         %s/%s (+ .sig)\n", res.Dir, amber.RecordFile)
			}); err != nil {
				return err
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&candidate, "candidate", "", "candidate PROVIDER/MODEL")
	f.StringVar(&pubPath, "pub", "", "producer's public key (verifies the case)")
	f.StringVar(&keyPath, "key", "", "key that signs the run record (the producer's)")
	f.StringVar(&o.IndexDir, "index", "", "index directory")
	f.StringVar(&indexPub, "index-pub", "", "trusted index verifier key (default: the index's index.pub)")
	f.StringVar(&sealed, "sealed", "", "address of the sealed store (IP:PORT), probed before the candidate starts")
	f.StringVar(&control, "control", "", "positive control IP:PORT (allowlisted cases)")
	f.StringVar(&o.Out, "out", "", "run directory to create")
	f.StringSliceVar(&o.Env, "env", nil, "KEY=VALUE for the candidate (repeatable)")
	f.DurationVar(&o.Timeout, "timeout", 0, "candidate wall-clock limit (default the sandbox's)")
	f.StringVar(&stateDir, "state-dir", "", "sandbox state directory (default the sandbox's)")
	for _, f := range []string{"pub", "key", "index", "sealed", "out"} {
		_ = c.MarkFlagRequired(f)
	}
	return c
}

func newAmberRecordCmd() *cobra.Command {
	c := &cobra.Command{Use: "record", Short: "Verify run records"}
	return c
}

func newAmberRecordVerifyCmd() *cobra.Command {
	var pubPath, indexPub, summary, spec string
	var byValue bool
	v := &cobra.Command{
		Use:   "verify RUN.json --pub KEY.pub [--by-value --index-pub index.pub [--summary summary.yaml] [--spec CORE.md]]",
		Short: "Verify a run record's signature; --by-value also checks it against the signed index entry and summary",
		Long: `verify checks the record's detached signature (amber-run-record@cleanroom) and
its form. With --by-value it is the external consumer's check of §7.1: the
record's embedded tlog-proof must verify against the index key at the
index_version and root the record cites, and its entry must name the
record's manifest, bundle, oracle, spec and cutoff; a signed summary, when
given, must agree; a spec file, when given, must hash to spec_sha256.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, err := sign.LoadPublicKey(pubPath)
			if err != nil {
				return err
			}
			res := struct {
				Record    string   `json:"record"`
				Passed    []string `json:"passed"`
				State     string   `json:"terminal_state"`
				CaseID    string   `json:"case_id"`
				IndexVers int64    `json:"index_version"`
			}{Record: args[0]}
			if !byValue {
				r, err := amber.VerifyRecordSignature(args[0], pub)
				if err != nil {
					return err
				}
				res.Passed = amber.RecordSignatureChecks()
				res.State, res.CaseID, res.IndexVers = r.TerminalState, r.CaseID, r.IndexVersion
			} else {
				if indexPub == "" {
					return fault.AsUnusable(errors.New("--by-value needs --index-pub (the index key the consumer trusts)"))
				}
				vkey, err := readTrustedVKey(indexPub)
				if err != nil {
					return err
				}
				rep, err := amber.VerifyRecordByValue(args[0], pub, vkey, summary, spec)
				if err != nil {
					return err
				}
				res.Passed = rep.Passed
				res.State, res.CaseID, res.IndexVers = rep.Record.TerminalState, rep.Record.CaseID, rep.Record.IndexVersion
			}
			return printResult(cmd, res, func(w io.Writer) {
				for _, p := range res.Passed {
					fmt.Fprintf(w, "ok    %s\n", p)
				}
				fmt.Fprintf(w, "record of %s verified: %s (index_version %d)\n", res.CaseID, res.State, res.IndexVers)
			})
		},
	}
	v.Flags().StringVar(&pubPath, "pub", "", "producer's public key")
	v.Flags().BoolVar(&byValue, "by-value", false, "verify against the signed index entry (and summary)")
	v.Flags().StringVar(&indexPub, "index-pub", "", "the index verifier key the consumer trusts")
	v.Flags().StringVar(&summary, "summary", "", "signed summary.yaml (its .sig beside it)")
	v.Flags().StringVar(&spec, "spec", "", "the Core specification file (spec_sha256 by possession)")
	_ = v.MarkFlagRequired("pub")
	return v
}
