package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// wantCommands is the command tree, written out by hand: every command
// path under the root, " (hidden)" after the hidden ones. A command the
// table drops, lists twice or puts under the wrong group changes it.
// (completion's four are cobra's; help is added only when a command runs.)
var wantCommands = `
amber
amber adjudicate
amber case
amber case build
amber case verify
amber compare
amber index
amber index append
amber index init
amber index prove
amber index retire
amber index show
amber index verify
amber index verify-proof
amber key
amber key gen
amber record
amber record verify
amber run
amber summary
completion
completion bash
completion fish
completion powershell
completion zsh
demo
evidence
evidence canon
evidence check
evidence selftest
fleet
fleet bind
fleet collect
fleet plan
holdout
holdout check
holdout commitment
holdout fixture
holdout interop
holdout score
man (hidden)
package
package emit
package id
package manifest
package verify
release
release diff
release id
release issue
release verify
room
room agent
room drive
room relay
room serve
room sessions
room transcript
run
run abort
run complete
run finding
run finding classify
run finding list
run freeze
run id
run list
run measure
run pin
run question
run question add
run question list
run report
run reveal
run status
run verify
sandbox
sandbox bundle
sandbox check
sandbox exec
sandbox gc
sandbox hook (hidden)
sandbox probe
sandbox scrub
sandbox seal-hook (hidden)
version
world
world init
`

// TestCommandTree: the tree newRootCmd builds from the command table is
// exactly wantCommands, each command once.
func TestCommandTree(t *testing.T) {
	var got []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			p := strings.TrimPrefix(s.CommandPath(), "cleanroom ")
			if s.Hidden {
				p += " (hidden)"
			}
			got = append(got, p)
			walk(s)
		}
	}
	walk(newRootCmd())
	want := strings.Split(strings.TrimSpace(wantCommands), "\n")
	for _, w := range want {
		if n := len(slices.DeleteFunc(slices.Clone(got), func(g string) bool { return g != w })); n != 1 {
			t.Errorf("%q is in the tree %d times, want once", w, n)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			t.Errorf("%q is in the tree and not in wantCommands", g)
		}
	}
}

// TestCommandsJoinTheTreeInOnePlace: no file of the command line registers
// a command from an init function or adds one to a group; commands.go's
// table does both (init.go's init is the container entry point, not a
// command).
func TestCommandsJoinTheTreeInOnePlace(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Name.Name == "init" && n.Recv == nil && name != "init.go" {
					t.Errorf("%s: func init: commands are listed in commands.go, not registered from init", fset.Position(n.Pos()))
				}
			case *ast.SelectorExpr:
				if n.Sel.Name == "AddCommand" && name != "commands.go" {
					t.Errorf("%s: AddCommand outside commands.go: add the command to commandTable", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	if checked < 10 {
		t.Fatalf("checked %d files: not run in the package's directory?", checked)
	}
}
