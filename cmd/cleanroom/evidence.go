package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/evidence/schema"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
	"github.com/spf13/cobra"
)

func newEvidenceCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "evidence",
		Short: "The strict JSON reader and canonical encoder: check, canonicalise, self-test",
	}
	return c
}

// checkLine is the outcome for one file of `evidence check`.
type checkLine struct {
	File     string                 `json:"file"`
	Verdict  string                 `json:"verdict"` // accepted, refused, unreadable
	Class    string                 `json:"class,omitempty"`
	Offset   *int64                 `json:"offset,omitempty"`
	Pointer  *string                `json:"pointer,omitempty"`
	Detail   string                 `json:"detail,omitempty"`
	Schema   string                 `json:"schema,omitempty"`
	Problems []evidence.SchemaCause `json:"schema_problems,omitempty"`
}

func (l checkLine) String() string {
	switch l.Verdict {
	case "accepted":
		if l.Schema != "" {
			return fmt.Sprintf("%s: accepted (schema %s)", l.File, l.Schema)
		}
		return l.File + ": accepted"
	case "unreadable":
		return fmt.Sprintf("%s: unreadable: %s", l.File, l.Detail)
	}
	if l.Class == "schema" {
		c := l.Problems[0]
		more := ""
		if n := len(l.Problems) - 1; n > 0 {
			more = fmt.Sprintf(" (and %d more)", n)
		}
		return fmt.Sprintf("%s: refused schema at pointer %q keyword %s: %s%s", l.File, c.InstancePointer, c.KeywordPointer, c.Message, more)
	}
	loc := fmt.Sprintf("offset %d", *l.Offset)
	if l.Pointer != nil && *l.Pointer != "" {
		loc += fmt.Sprintf(" pointer %q", *l.Pointer)
	}
	return fmt.Sprintf("%s: refused %s at %s: %s", l.File, l.Class, loc, l.Detail)
}

func newEvidenceCheckCmd() *cobra.Command {
	var schemaPath string
	c := &cobra.Command{
		Use:   "check FILE...",
		Short: "Read each file with the strict reader (and a JSON Schema) and say whether it is accepted",
		Long: `check reads each FILE with the strict evidence reader and prints one line
per file: accepted, or refused with the rule (class), the byte offset and the
JSON pointer. With --schema, accepted documents are also validated against
that JSON Schema (itself read strictly); a schema refusal names the instance
pointer and the schema keyword.

Exit status: 0 every file accepted, 1 any file (or the schema) refused by
the strict reader, 2 unusable arguments (no file, a file or schema that
cannot be read, a schema that does not compile).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var sch *schema.Schema
			if schemaPath != "" {
				b, err := evidence.ReadFileBytes(schemaPath)
				if err != nil {
					return fmt.Errorf("schema: %w", err)
				}
				if sch, err = schema.Compile(schemaPath, b); err != nil {
					return err
				}
			}
			lines := make([]checkLine, 0, len(args))
			refused, unreadable := 0, 0
			for _, path := range args {
				l := checkFile(path, sch)
				switch l.Verdict {
				case "refused":
					refused++
				case "unreadable":
					unreadable++
				}
				lines = append(lines, l)
			}
			err := printResult(cmd, map[string]any{"files": lines, "refused": refused, "unreadable": unreadable}, func(w io.Writer) {
				for _, l := range lines {
					fmt.Fprintln(w, l)
				}
			})
			switch {
			case err != nil:
				return err
			case unreadable > 0:
				return fault.AsUnusable(fmt.Errorf("%d of %d files could not be read", unreadable, len(args)))
			case refused > 0:
				return fault.AsRefused(fmt.Errorf("%d of %d files refused", refused, len(args)))
			}
			return nil
		},
	}
	c.Flags().StringVar(&schemaPath, "schema", "", "JSON Schema file every accepted document must also satisfy")
	return c
}

func checkFile(path string, sch *schema.Schema) checkLine {
	l := checkLine{File: path}
	b, err := evidence.ReadFileBytes(path)
	if err == nil {
		var v any
		if v, err = evidence.Read(b); err == nil && sch != nil {
			l.Schema = sch.Name()
			err = sch.Validate(v)
		}
	}
	var re *evidence.Error
	var se *evidence.SchemaError
	switch {
	case err == nil:
		l.Verdict = "accepted"
	case errors.As(err, &re):
		l.Verdict, l.Class, l.Detail = "refused", string(re.Class), re.Detail
		l.Offset, l.Pointer = &re.Offset, &re.Pointer
	case errors.As(err, &se):
		l.Verdict, l.Class, l.Problems = "refused", "schema", se.Causes
	default:
		l.Verdict, l.Detail = "unreadable", strings.TrimPrefix(err.Error(), path+": ")
	}
	return l
}

func newEvidenceCanonCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "canon FILE",
		Short: "Print the RFC 8785 canonical bytes of a strictly read JSON file",
		Long: `canon reads FILE with the strict evidence reader and writes its RFC 8785
(JCS) canonical bytes to standard output, with no trailing newline: the bytes
every cleanroom identity hashes. With --json it prints the canonical text and
its SHA-256 instead. A refused file exits 1 naming the rule and location.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := evidence.ReadFile(args[0])
			if err != nil {
				return err
			}
			out, err := evidence.Canonical(v)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if jsonOutput(cmd) {
				return printResult(cmd, map[string]any{"file": args[0], "canonical": string(out), "sha256": pkgwalk.SHA256Hex(out)}, nil)
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
}

func newEvidenceSelftestCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "selftest",
		Short: "Prove the reader's two claims against its built-in vectors",
		Long: `selftest reads the built-in vectors (accepted edges and at least one refusal
of every class) and proves two claims:

  1. ` + evidence.ClaimReadsAsJSONParse + `;
  2. ` + evidence.ClaimOnlyAmbiguous + `.

It exits 1 if any vector disagrees.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rep, testErr := evidence.SelfTest()
			err := printResult(cmd, rep, func(w io.Writer) { printSelfTest(w, rep) })
			if err != nil {
				return err
			}
			return testErr
		},
	}
}

func printSelfTest(w io.Writer, rep evidence.Report) {
	for _, r := range rep.Results {
		mark := "ok  "
		if !r.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %-26s %s\n", mark, r.Name, r.Got)
		if !r.Passed {
			fmt.Fprintf(w, "     want %s\n", r.Want)
		}
	}
	fmt.Fprintf(w, "\n%d vectors: %d accepted, %d refused (%d of the refused are RFC 8259 texts JSON.parse reads)\n",
		rep.Vectors, rep.Accepted, rep.Refused, rep.BeyondRFC)
	for i, c := range rep.Claims {
		verdict := "PROVED"
		if !c.Proved {
			verdict = "NOT PROVED"
		}
		fmt.Fprintf(w, "claim %d: %s — %s against %d vectors\n", i+1, c.Claim, verdict, c.Vectors)
		for _, f := range c.Failures {
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
	fmt.Fprintln(w, "\nrefused beyond RFC 8259, and why:")
	for _, cl := range evidence.Classes {
		if cl.BeyondRFC8259() {
			fmt.Fprintf(w, "  %-18s %s\n", cl, cl.Why())
		}
	}
	if rep.Passed {
		fmt.Fprintln(w, "PASS")
	} else {
		fmt.Fprintln(w, "FAIL")
	}
}
