package cleanroom_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestExportedSentinelsUsed finds every exported Err… variable or constant
// of the module and the packages that refer to it. A sentinel is exported
// only for a caller outside its package that branches on it (issue 21 item
// 8): a use in another package's code counts, a use in tests does not (its
// own tests see it unexported; another package's tests assert the rule by
// its text, as a caller there sees it). An exported sentinel no other
// package's code uses must be unexported.
func TestExportedSentinelsUsed(t *testing.T) {
	const module = "github.com/cleanroom-dev/cleanroom"
	declared := map[string]bool{} // "importpath.Name"
	used := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != "." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "third_party" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil // a test is no caller branching on a sentinel
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := path.Join(module, filepath.ToSlash(filepath.Dir(p))) // the root's "." joins to module itself
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || (g.Tok != token.VAR && g.Tok != token.CONST) {
				continue
			}
			for _, spec := range g.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Err") && n.IsExported() && f.Name.Name != "main" {
						declared[dir+"."+n.Name] = true
					}
				}
			}
		}
		imports := map[string]string{} // local name → import path
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			if !strings.HasPrefix(ip, module) {
				continue
			}
			name := path.Base(ip)
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = ip
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok {
					if ip, ok := imports[x.Name]; ok && ip != dir {
						used[ip+"."+sel.Sel.Name] = true
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk must see a sentinel that is declared in one package and
	// branched on in another, or it proves nothing.
	const known = module + "/sandbox.ErrIsolation"
	if !declared[known] || !used[known] {
		t.Fatalf("%s: declared %v, used %v: the walk is broken", known, declared[known], used[known])
	}
	var unused []string
	for d := range declared {
		if !used[d] {
			unused = append(unused, strings.TrimPrefix(d, module+"/"))
		}
	}
	slices.Sort(unused)
	for _, u := range unused {
		t.Errorf("%s is exported and no other package's code uses it: unexport it (or use it)", u)
	}
	t.Logf("%d exported sentinels, each used by another package's code", len(declared))
}
