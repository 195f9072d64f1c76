package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/cleanroom-dev/cleanroom/amber"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/sign"
	"github.com/spf13/cobra"
)

func newAmberSummaryCmd() *cobra.Command {
	var pubPath, keyPath, indexDir, indexPub, out string
	c := &cobra.Command{
		Use:   "summary CASEDIR --pub PRODUCER.pub --key PRODUCER.key --index DIR [--out DIR]",
		Short: "Write the signed redacted summary (exactly the closed field set of Distribution §5.1, docs/formats.md)",
		Long: `summary verifies the case's manifest signature and the index, checks that the
index entry names the manifest's hashes, and writes summary.yaml and
summary.yaml.sig (namespace amber-summary@cleanroom) into --out (default
CASEDIR). The retirement state and index_version come from the index.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, err := sign.LoadPublicKey(pubPath)
			if err != nil {
				return err
			}
			signer, err := sign.LoadSigner(keyPath)
			if err != nil {
				return err
			}
			if sign.Fingerprint(signer.PublicKey()) != sign.Fingerprint(pub) {
				return fault.AsUnusable(fmt.Errorf("--key %s is not the producer key %s", signer.Fingerprint(), sign.Fingerprint(pub)))
			}
			vkey, err := readTrustedVKey(indexPub)
			if err != nil {
				return err
			}
			m, msha, err := amber.VerifySignedManifest(args[0], pub)
			if err != nil {
				return err
			}
			ix, err := amber.LoadIndex(indexDir, vkey)
			if err != nil {
				return err
			}
			s, err := amber.NewSummary(m, msha, ix)
			if err != nil {
				return err
			}
			if out == "" {
				out = args[0]
			}
			b, err := amber.WriteSummary(out, s, signer)
			if err != nil {
				return err
			}
			return printResult(cmd, s, func(w io.Writer) {
				fmt.Fprintf(w, "wrote %s/%s and %s (signed by %s)\n", out, amber.SummaryFile, amber.SummarySigFile, signer.Fingerprint())
				_, _ = w.Write(b) // output, as the Fprintf above: no one to tell of a failure
			})
		},
	}
	c.Flags().StringVar(&pubPath, "pub", "", "producer's public key")
	c.Flags().StringVar(&keyPath, "key", "", "producer's private key (signs the summary)")
	c.Flags().StringVar(&indexDir, "index", "", "index directory")
	c.Flags().StringVar(&indexPub, "index-pub", "", "trusted index verifier key (default: the index's index.pub)")
	c.Flags().StringVar(&out, "out", "", "directory for summary.yaml (default CASEDIR)")
	for _, f := range []string{"pub", "key", "index"} {
		_ = c.MarkFlagRequired(f)
	}
	return c
}

func newAmberCompareCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "compare A B",
		Short: "Compare two run records, summaries or cases field by field; comparable only if all seven match",
		Long: `compare puts spec_sha256, cutoff_utc, base.bundle sha256, oracle.pack sha256,
git version, bundle format version and hash algorithm side by side. A and B
are run records (.json), summaries or manifests (.yaml) or case directories.
Exit 0 when comparable, 1 when not.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := amber.LoadComparability(args[0])
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			b, err := amber.LoadComparability(args[1])
			if err != nil {
				return fmt.Errorf("%s: %w", args[1], err)
			}
			c := amber.Compare(a, b)
			res := struct {
				A          string                `json:"a"`
				B          string                `json:"b"`
				Comparable bool                  `json:"comparable"`
				Fields     []amber.ComparedField `json:"fields"`
			}{args[0], args[1], c.Comparable, c.Fields}
			if err := printResult(cmd, res, func(w io.Writer) {
				for _, f := range c.Fields {
					mark := "=="
					if !f.Equal {
						mark = "!="
					}
					fmt.Fprintf(w, "%-22s %s %s %s\n", f.Field, f.A, mark, f.B)
				}
				if c.Comparable {
					fmt.Fprintln(w, "comparable")
				} else {
					fmt.Fprintln(w, "NOT comparable")
				}
			}); err != nil {
				return err
			}
			if !c.Comparable {
				return fault.AsRefused(errors.New("the two records are not comparable (the fields marked differ)"))
			}
			return nil
		},
	}
}

func newAmberAdjudicateCmd() *cobra.Command {
	var leak, retired, caseDir, pubPath string
	c := &cobra.Command{
		Use:   "adjudicate --retired DATE [--leak-date DATE | --case CASEDIR --pub KEY.pub] RECORD…",
		Short: "Apply the leak window to run records (Distribution §6, docs/formats.md)",
		Long: `adjudicate reports, per run record, the state after the leak window: runs
finished before the leak date stay valid; valid runs from the leak date on are
pending_adjudication. Without --leak-date, the case manifest's last leak check
recorded as passed is the leak date; with none passed, no valid run stands.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := amber.AdjudicateOptions{LeakDate: leak, Retired: retired}
			if caseDir != "" {
				if pubPath == "" {
					return fault.AsUnusable(errors.New("--case needs --pub"))
				}
				pub, err := sign.LoadPublicKey(pubPath)
				if err != nil {
					return err
				}
				if o.Manifest, _, err = amber.VerifySignedManifest(caseDir, pub); err != nil {
					return err
				}
			}
			records := map[string]*amber.RunRecord{}
			for _, p := range args {
				r, err := amber.LoadRecordFile(p)
				if err != nil {
					return err
				}
				records[p] = r
			}
			out, err := amber.Adjudicate(records, o)
			if err != nil {
				return err
			}
			return printResult(cmd, map[string]any{"adjudications": out}, func(w io.Writer) {
				for _, a := range out {
					fmt.Fprintf(w, "%s: %s -> %s (%s)\n", a.Record, a.Before, a.After, a.Reason)
				}
			})
		},
	}
	c.Flags().StringVar(&leak, "leak-date", "", "when the case leaked (YYYY-MM-DD or UTC instant)")
	c.Flags().StringVar(&retired, "retired", "", "when the leak was confirmed and the case retired")
	c.Flags().StringVar(&caseDir, "case", "", "case directory (for the last passed leak check)")
	c.Flags().StringVar(&pubPath, "pub", "", "producer's public key (with --case)")
	_ = c.MarkFlagRequired("retired")
	return c
}
