package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/amber"
	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
	"github.com/cleanroom-dev/cleanroom/sign"
	"github.com/spf13/cobra"
)

func newAmberIndexCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "index",
		Short: "The public index: an append-only Merkle log with a signed C2SP checkpoint",
	}
	return c
}

type checkpointView struct {
	Origin       string `json:"origin"`
	IndexVersion int64  `json:"index_version"`
	Root         string `json:"root"`
}

func viewCheckpoint(cp *amber.Checkpoint) checkpointView {
	return checkpointView{cp.Origin, cp.Size, base64.StdEncoding.EncodeToString(cp.Root[:])}
}

func readTrustedVKey(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := evidence.ReadRegularFile(path, evidence.MaxSize)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func newAmberIndexInitCmd() *cobra.Command {
	var origin, keyOut string
	c := &cobra.Command{
		Use:   "init DIR --origin ORIGIN --key-out PATH",
		Short: "Create an empty index and its note key (PATH, kept outside DIR)",
		Long: `init creates an index with a new note key named ORIGIN, written to PATH
(mode 0600, never overwritten; keep it outside DIR). DIR must not exist or be
an empty directory (not a symbolic link): an absent DIR is written whole
beside it and renamed into place, an empty one is filled where it is. A
failure leaves neither a part of an index nor the key, so the same command
can be run again.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ix, err := amber.InitIndex(args[0], origin, keyOut)
			if err != nil {
				return err
			}
			res := struct {
				Dir        string         `json:"index_dir"`
				VKey       string         `json:"index_key"`
				Checkpoint checkpointView `json:"checkpoint"`
			}{args[0], ix.VKey, viewCheckpoint(ix.Checkpoint)}
			return printResult(cmd, res, func(w io.Writer) {
				fmt.Fprintf(w, "index %s created (origin %s)\nverifier key: %s\nprivate key:  %s (keep it off the index host)\n", args[0], origin, ix.VKey, keyOut)
			})
		},
	}
	c.Flags().StringVar(&origin, "origin", "", "log origin, also the key name (e.g. cases.example.org/index)")
	c.Flags().StringVar(&keyOut, "key-out", "", "where to write the index's private note key")
	for _, f := range []string{"origin", "key-out"} {
		_ = c.MarkFlagRequired(f)
	}
	return c
}

func newAmberIndexAppendCmd() *cobra.Command {
	var key, caseDir, pubPath string
	c := &cobra.Command{
		Use:   "append DIR --key INDEX.key --case CASEDIR --pub PRODUCER.pub",
		Short: "Append a case's entry (after verifying its manifest signature) and sign the new checkpoint",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, err := sign.LoadPublicKey(pubPath)
			if err != nil {
				return err
			}
			m, msha, err := amber.VerifySignedManifest(caseDir, pub)
			if err != nil {
				return err
			}
			e := amber.EntryFromManifest(m, msha)
			ix, err := amber.AppendCaseFile(args[0], key, e)
			if err != nil {
				return err
			}
			res := struct {
				Entry      *amber.Entry   `json:"entry"`
				Checkpoint checkpointView `json:"checkpoint"`
			}{e, viewCheckpoint(ix.Checkpoint)}
			return printResult(cmd, res, func(w io.Writer) {
				fmt.Fprintf(w, "appended %s (manifest %s); index_version %d\n", e.CaseID, shortHex(e.ManifestSHA256), ix.Checkpoint.Size)
			})
		},
	}
	c.Flags().StringVar(&key, "key", "", "the index's private note key")
	c.Flags().StringVar(&caseDir, "case", "", "case directory (its manifest.yaml and manifest.yaml.sig are read)")
	c.Flags().StringVar(&pubPath, "pub", "", "producer's public key (KEY.pub)")
	for _, f := range []string{"key", "case", "pub"} {
		_ = c.MarkFlagRequired(f)
	}
	return c
}

func newAmberIndexRetireCmd() *cobra.Command {
	var key, caseID, date string
	c := &cobra.Command{
		Use:   "retire DIR --key INDEX.key --case-id ID --date YYYY-MM-DD",
		Short: "Append the retirement of a case (nothing is edited or deleted)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ix, err := amber.RetireCaseFile(args[0], key, caseID, date)
			if err != nil {
				return err
			}
			e, _, _ := ix.Latest(caseID)
			res := struct {
				Entry      *amber.Entry   `json:"entry"`
				Checkpoint checkpointView `json:"checkpoint"`
			}{e, viewCheckpoint(ix.Checkpoint)}
			return printResult(cmd, res, func(w io.Writer) {
				fmt.Fprintf(w, "%s is %s; index_version %d\n", caseID, e.State, ix.Checkpoint.Size)
			})
		},
	}
	c.Flags().StringVar(&key, "key", "", "the index's private note key")
	c.Flags().StringVar(&caseID, "case-id", "", "case to retire")
	c.Flags().StringVar(&date, "date", "", "retirement date")
	for _, f := range []string{"key", "case-id", "date"} {
		_ = c.MarkFlagRequired(f)
	}
	return c
}

func newAmberIndexVerifyCmd() *cobra.Command {
	var pubPath, since string
	c := &cobra.Command{
		Use:   "verify DIR [--pub index.pub] [--since CHECKPOINT]",
		Short: "Check every entry against the signed root; with --since, prove the index extends a trusted checkpoint",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			vkey, err := readTrustedVKey(pubPath)
			if err != nil {
				return err
			}
			ix, err := amber.LoadIndex(args[0], vkey)
			if err != nil {
				return err
			}
			res := struct {
				Checkpoint checkpointView  `json:"checkpoint"`
				Since      *checkpointView `json:"extends,omitempty"`
				Entries    int             `json:"entries"`
			}{Checkpoint: viewCheckpoint(ix.Checkpoint), Entries: len(ix.Entries)}
			if since != "" {
				old, err := evidence.ReadRegularFile(since, evidence.MaxSize)
				if err != nil {
					return err
				}
				cp, err := ix.VerifySince(old)
				if err != nil {
					return err
				}
				v := viewCheckpoint(cp)
				res.Since = &v
			}
			return printResult(cmd, res, func(w io.Writer) {
				fmt.Fprintf(w, "index %s verified: %d entries under the signed root %s (index_version %d)\n", args[0], len(ix.Entries), res.Checkpoint.Root, ix.Checkpoint.Size)
				if res.Since != nil {
					fmt.Fprintf(w, "extends the trusted checkpoint of index_version %d (consistency proof checked)\n", res.Since.IndexVersion)
				}
			})
		},
	}
	c.Flags().StringVar(&pubPath, "pub", "", "the trusted index verifier key (default: DIR/index.pub, trust on first use)")
	c.Flags().StringVar(&since, "since", "", "a previously trusted checkpoint file")
	return c
}

func newAmberIndexProveCmd() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "prove DIR CASE_ID [--out FILE]",
		Short: "Write a C2SP tlog-proof of the case's latest entry (checked offline against the index key)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ix, err := amber.LoadIndex(args[0], "")
			if err != nil {
				return err
			}
			proof, err := ix.Prove(args[1])
			if err != nil {
				return err
			}
			if out == "" {
				if jsonOutput(cmd) {
					return printResult(cmd, map[string]any{"case_id": args[1], "proof": string(proof)}, nil)
				}
				_, err := cmd.OutOrStdout().Write(proof)
				return err
			}
			// Created exclusively and whole: a proof handed on is never
			// silently replaced, nor left half-written.
			if err := durable.CreateFile(filepath.Clean(out), proof, 0o644); err != nil {
				return err
			}
			return printResult(cmd, map[string]any{"case_id": args[1], "out": out}, func(w io.Writer) { fmt.Fprintf(w, "wrote %s\n", out) })
		},
	}
	c.Flags().StringVar(&out, "out", "", "write the proof here instead of stdout (must not exist)")
	return c
}

func newAmberIndexShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show DIR",
		Short: "List the verified index: every entry and each case's current state",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ix, err := amber.LoadIndex(args[0], "")
			if err != nil {
				return err
			}
			res := struct {
				Checkpoint checkpointView `json:"checkpoint"`
				Entries    []*amber.Entry `json:"entries"`
			}{viewCheckpoint(ix.Checkpoint), ix.Entries}
			if res.Entries == nil {
				res.Entries = []*amber.Entry{}
			}
			return printResult(cmd, res, func(w io.Writer) {
				fmt.Fprintf(w, "origin %s, index_version %d, root %s\n", ix.Checkpoint.Origin, ix.Checkpoint.Size, res.Checkpoint.Root)
				for i, e := range ix.Entries {
					fmt.Fprintf(w, "%6d  %-24s %-22s manifest %s\n", i, e.CaseID, e.State, shortHex(e.ManifestSHA256))
				}
			})
		},
	}
}

func newAmberIndexVerifyProofCmd() *cobra.Command {
	var pubPath string
	c := &cobra.Command{
		Use:   "verify-proof PROOF --pub index.pub",
		Short: "Check a tlog-proof offline against the index key and print the entry it proves",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			vkey, err := readTrustedVKey(pubPath)
			if err != nil {
				return err
			}
			b, err := evidence.ReadRegularFile(args[0], evidence.MaxSize)
			if err != nil {
				return err
			}
			p, err := amber.VerifyProof(b, vkey)
			if err != nil {
				return err
			}
			res := struct {
				Entry      *amber.Entry   `json:"entry"`
				Leaf       int64          `json:"leaf_index"`
				Checkpoint checkpointView `json:"checkpoint"`
			}{p.Entry, p.Index, viewCheckpoint(p.Checkpoint)}
			return printResult(cmd, res, func(w io.Writer) {
				fmt.Fprintf(w, "entry %d of index_version %d (root %s): %s %s manifest %s\n", p.Index, p.Checkpoint.Size,
					res.Checkpoint.Root, p.Entry.CaseID, p.Entry.State, p.Entry.ManifestSHA256)
			})
		},
	}
	c.Flags().StringVar(&pubPath, "pub", "", "the index verifier key you trust")
	_ = c.MarkFlagRequired("pub")
	return c
}
