package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/cleanroom-dev/cleanroom/internal/worldinit"
	"github.com/spf13/cobra"
)

func newWorldCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "world",
		Short: "A world of your own: write a minimal, working one to start from",
		Long: `A world is a directory holding the release package at docs/spec/proof-wire/
(or where the world root's cleanroom-package file says; what the implementer sees) and the state root governance/ (the holdout, the
reference adapter, the run record and its receipts). Every run command takes
one with --world.

"world init" writes a new one, with an example protocol to replace by yours.`,
	}
	return c
}

func newWorldInitCmd() *cobra.Command {
	var label string
	c := &cobra.Command{
		Use:   "init DIR",
		Short: "Write a minimal, working world into DIR (absent or empty)",
		Long: `init writes a minimal world that works as written: a placeholder
specification (SPEC.md, the example protocol EXAMPLE-LENGTH-v1), a public
corpus of one message, experiment/ (the implementer's contract, the
clean-room prompt, the recipe and observation schemas, the scorer's
self-test fixtures made for this world, world.json, a README of what each
file is for), an example holdout of one challenge (E1) under
governance/holdout, and a Python reference adapter with its descriptor
governance/reference-adapter.json. Every file says, in a comment or the
README beside it, what you change.

Right after init, from DIR: "holdout fixture docs/spec/proof-wire/experiment"
passes, "release issue docs/spec/proof-wire … --holdout governance/holdout"
issues a release, and "run pin" pins the reference adapter world.json names.
The guide docs/guides/own-experiment.md goes from here to a COMPLETE run.

DIR must not exist or be an empty directory (exit 2 otherwise, naming what
is in it); missing parents are created. The world is written beside DIR and
renamed into place in one step, so nothing is ever half-written; an empty
DIR is replaced by the new directory (a shell whose current directory it
was must cd into it again).

--root-label puts the package at another world-relative path (not under
governance/); init records it in the world root's cleanroom-package, from
which every run command locates the package, and it is the blind package's
root label, pinned in the run's bpkg id.`,
		Example: `  cleanroom world init my-world
  cd my-world && cleanroom holdout fixture docs/spec/proof-wire/experiment`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := worldinit.Init(args[0], worldinit.Options{RootLabel: label})
			if err != nil {
				// An occupied target or an unsupported label: the
				// arguments cannot do the work (nothing was written):
				// no rule refuses them, so they are unusable (2).
				return err
			}
			return printResult(cmd, res, func(w io.Writer) {
				fmt.Fprintf(w, "world   %s\npackage %s\nfiles   %d\n", res.Dir, filepath.Join(res.Dir, filepath.FromSlash(res.Package)), len(res.Files))
				for _, f := range res.Files {
					fmt.Fprintf(w, "  %s\n", f)
				}
				fmt.Fprintf(w, "\nnext: read %s, then replace the example protocol by yours\n", filepath.Join(res.Dir, "README.md"))
			})
		},
	}
	c.Flags().StringVar(&label, "root-label", "", "the package's path in the world, which is also the blind package's root label (default docs/spec/proof-wire; another is recorded in DIR/cleanroom-package)")
	return c
}
