package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/cleanroom-dev/cleanroom/amber"
	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/evidence/schema"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/sign"
	"github.com/spf13/cobra"
)

func newAmberCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "amber",
		Short: "AMBER cases: keys, case build and verify, the signed index, summaries, runs and records",
		Long: `amber implements the AMBER Distribution Protocol's tooling: a producer builds
and signs a case (base.bundle, oracle.pack, manifest.yaml, manifest.yaml.sig)
and appends it to the signed index; an evaluation host verifies the case by
possession and runs a candidate against it; an external consumer verifies a
signed run record by value.`,
	}
	return c
}

func newAmberKeyCmd() *cobra.Command {
	return &cobra.Command{Use: "key", Short: "Signing keys (OpenSSH Ed25519)"}
}

func newAmberCaseCmd() *cobra.Command {
	return &cobra.Command{Use: "case", Short: "Build and verify AMBER cases"}
}

func newAmberKeyGenCmd() *cobra.Command {
	var out, identity string
	c := &cobra.Command{
		Use:   "gen --out PATH",
		Short: "Write an OpenSSH Ed25519 key pair (PATH, PATH.pub) and print its allowed_signers line",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := sign.GenerateKeyWithComment(out, identity); err != nil {
				return err // an existing key (sign.ErrKeyExists) is an output that exists: unusable
			}
			s, err := sign.LoadSigner(out)
			if err != nil {
				return err
			}
			line := sign.AllowedSignersLine(identity, s.PublicKey())
			res := struct {
				Private        string `json:"private_key"`
				Public         string `json:"public_key"`
				SigningKeyID   string `json:"signing_key_id"`
				AllowedSigners string `json:"allowed_signers"`
			}{out, out + ".pub", s.Fingerprint(), strings.TrimSuffix(line, "\n")}
			return printResult(cmd, res, func(w io.Writer) {
				fmt.Fprintf(w, "wrote %s and %s\nsigning_key_id: %s\nallowed_signers line:\n%s", out, out+".pub", s.Fingerprint(), line)
			})
		},
	}
	c.Flags().StringVar(&out, "out", "", "private key path (PATH.pub is written beside it)")
	c.Flags().StringVar(&identity, "identity", "producer", "identity for the key comment and the allowed_signers line")
	_ = c.MarkFlagRequired("out")
	return c
}

func newAmberCaseBuildCmd() *cobra.Command {
	var o amber.BuildOptions
	var keyPath string
	var provenance []string
	var cutoffOutput string
	c := &cobra.Command{
		Use:   "build --repo DIR --cutoff-commit C --cutoff-utc T --oracle DIR --profile P --case-id ID --spec CORE.md --protocol DIST.md --key KEY --out CASEDIR",
		Short: "Build and sign a case: base.bundle, oracle.pack, manifest.yaml, manifest.yaml.sig",
		Long: `build writes CASEDIR (which must not exist) with the four case files. The
bundle is made with git from one temporary ref at the cutoff commit (no tags,
no notes); a shallow or partial-clone source, a submodule or LFS content
reachable from the cutoff, and a spec or protocol file with CRLF, a BOM or
invalid UTF-8 are refused. Without --allow the case is full_isolation.

A --cutoff-utc earlier than the cutoff commit's committer date is refused
(the base state would postdate its own cutoff) unless
--cutoff-before-commit-date REASON overrides it; the reason and the
committer date are then recorded in the manifest's provenance
(cutoff_before_committer_date_override, cutoff_commit_committer_utc).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := sign.LoadSigner(keyPath)
			if err != nil {
				return err
			}
			o.Signer = s
			if cutoffOutput != "" {
				if o.CutoffRuleOutput, err = evidence.ReadRegularFile(cutoffOutput, evidence.MaxSize); err != nil {
					return err
				}
			}
			if len(provenance) > 0 {
				o.Provenance = map[string]any{}
				for _, kv := range provenance {
					k, v, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return fault.AsUnusable(fmt.Errorf("--provenance %q: want KEY=VALUE", kv))
					}
					o.Provenance[k] = v
				}
			}
			c, err := amber.Build(cmd.Context(), o)
			if err != nil {
				return err
			}
			res := struct {
				Dir            string          `json:"case_dir"`
				ManifestSHA256 string          `json:"manifest_sha256"`
				Manifest       *amber.Manifest `json:"manifest"`
			}{c.Dir, c.ManifestSHA256, c.Manifest}
			return printResult(cmd, res, func(w io.Writer) {
				m := c.Manifest
				fmt.Fprintf(w, "case %s built in %s\n", m.CaseID, c.Dir)
				fmt.Fprintf(w, "  cutoff           %s at %s\n", m.CutoffCommit, m.CutoffUTC)
				fmt.Fprintf(w, "  base.bundle      sha256 %s (%d bytes, v%s, %s, git %s)\n", m.Artifacts.BaseBundleSHA256, m.Construction.BundleSize,
					m.Construction.BundleFormatVersion, m.Construction.HashAlgorithm, m.Construction.GitVersion)
				fmt.Fprintf(w, "  oracle.pack      sha256 %s\n", m.Artifacts.OraclePackSHA256)
				fmt.Fprintf(w, "  manifest.yaml    sha256 %s, signed by %s\n", c.ManifestSHA256, m.Producer.SigningKeyID)
				fmt.Fprintf(w, "  isolation        %s\n", m.Eligibility.IsolationClass)
			})
		},
	}
	f := c.Flags()
	f.StringVar(&o.Repo, "repo", "", "source git repository")
	f.StringVar(&o.CutoffCommit, "cutoff-commit", "", "the resolved cutoff commit")
	f.StringVar(&o.CutoffUTC, "cutoff-utc", "", "the cutoff instant, YYYY-MM-DDTHH:MM:SSZ")
	f.StringVar(&o.OracleDir, "oracle", "", "oracle directory (packed into the sealed oracle.pack)")
	f.StringVar(&o.Profile, "profile", "", "profile identifier")
	f.StringVar(&o.CaseID, "case-id", "", "case identifier")
	f.StringVar(&o.SpecFile, "spec", "", "AMBER Core specification file (pinned by spec_sha256)")
	f.StringVar(&o.ProtocolFile, "protocol", "", "Distribution protocol file (pinned by protocol_sha256)")
	f.StringVar(&keyPath, "key", "", "producer's OpenSSH Ed25519 private key")
	f.StringVar(&o.Producer, "producer", "producer", "producer identity")
	f.StringSliceVar(&o.Allow, "allow", nil, "egress allowlist entry HOST:PORT (repeatable; makes the case allowlisted)")
	f.StringVar(&o.Out, "out", "", "case directory to create")
	f.StringSliceVar(&provenance, "provenance", nil, "provenance KEY=VALUE (repeatable)")
	f.StringVar(&o.TopologyRule, "topology-rule", "", "time-to-topology rule (default: "+amber.DefaultTopologyRule+")")
	f.StringVar(&o.TopologyEvidence, "topology-evidence", "", "time-to-topology evidence class (default: "+amber.DefaultTopologyEvidence+")")
	f.StringVar(&o.CutoffRule, "cutoff-rule", "", "preregistered cutoff rule")
	f.StringVar(&cutoffOutput, "cutoff-rule-output", "", "file holding the cutoff-rule script's output (default: the commit id and a newline)")
	f.StringVar(&o.CandidateInputBundle, "candidate-input", "", "the declared Candidate Input Bundle (default: "+amber.DefaultCandidateInputBundle+")")
	f.StringVar(&o.AvailableInformation, "available-info", "", "the available-information manifest (default: "+amber.DefaultAvailableInformation+")")
	f.StringVar(&o.EligibilityEvidence, "eligibility-evidence", "", "evidence class of the eligibility determination (default: "+amber.DefaultEligibilityEvidence+")")
	f.StringVar(&o.LeakProcedure, "leak-check", "", "leak-check procedure")
	f.StringVar(&o.LeakDate, "leak-check-date", "", "leak-check date (default: today, UTC)")
	f.StringVar(&o.LeakResult, "leak-check-result", "", "leak-check result: passed or failed (default passed)")
	f.StringVar(&o.CutoffOverride, "cutoff-before-commit-date", "", "REASON: build although --cutoff-utc is earlier than the cutoff commit's committer date (recorded in the manifest's provenance)")
	for _, name := range []string{"repo", "cutoff-commit", "cutoff-utc", "oracle", "profile", "case-id", "spec", "protocol", "key", "out"} {
		_ = c.MarkFlagRequired(name)
	}
	return c
}

func newAmberCaseVerifyCmd() *cobra.Command {
	var pubPath, schemaPath string
	var noOracle bool
	c := &cobra.Command{
		Use:   "verify CASEDIR --pub KEY.pub",
		Short: "Verify a case by possession: signature, then bundle, then oracle",
		Long: `verify checks, in order and stopping at the first failure: the manifest
signature over its exact bytes (namespace amber-case-manifest@cleanroom), the
manifest's rules (and the upstream schema with --schema), signing_key_id, the
bundle header, sha256 and size, git bundle verify, a fetch with
transfer.fsckObjects and git fsck --full --strict in a scratch repository,
then the oracle's sha256 and form. The failing check is named.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, err := sign.LoadPublicKey(pubPath)
			if err != nil {
				return err
			}
			var opts amber.VerifyOptions
			opts.SkipOracle = noOracle
			if schemaPath != "" {
				b, err := evidence.ReadRegularFile(schemaPath, evidence.MaxSize)
				if err != nil {
					return err
				}
				if opts.Schema, err = schema.Compile(schemaPath, b); err != nil {
					return err
				}
			}
			rep, verr := amber.VerifyCase(cmd.Context(), args[0], pub, opts)
			res := struct {
				Dir            string   `json:"case_dir"`
				OK             bool     `json:"ok"`
				Passed         []string `json:"passed"`
				Failed         string   `json:"failed,omitempty"`
				Error          string   `json:"error,omitempty"`
				ManifestSHA256 string   `json:"manifest_sha256,omitempty"`
			}{Dir: args[0], OK: verr == nil, Passed: rep.Passed, ManifestSHA256: rep.ManifestSHA256}
			if res.Passed == nil {
				res.Passed = []string{}
			}
			if verr != nil {
				res.Failed, res.Error = amber.CheckOf(verr), verr.Error()
			}
			if err := printResult(cmd, res, func(w io.Writer) {
				for _, p := range rep.Passed {
					fmt.Fprintf(w, "ok    %s\n", p)
				}
				if verr != nil {
					fmt.Fprintf(w, "FAIL  %s: %v\n", res.Failed, verr)
				} else {
					fmt.Fprintf(w, "case %s verified (manifest sha256 %s)\n", rep.Manifest.CaseID, rep.ManifestSHA256)
				}
			}); err != nil {
				return err
			}
			if verr != nil {
				// The report went to stdout; the refusal goes to stderr too.
				return fmt.Errorf("case %s: check %s failed: %w", args[0], res.Failed, verr)
			}
			return nil
		},
	}
	c.Flags().StringVar(&pubPath, "pub", "", "producer's public key (KEY.pub)")
	c.Flags().StringVar(&schemaPath, "schema", "", "also validate the manifest against this JSON Schema (the upstream manifest.schema.json)")
	c.Flags().BoolVar(&noOracle, "no-oracle", false, "the host holds no oracle.pack: skip the oracle checks")
	_ = c.MarkFlagRequired("pub")
	return c
}
