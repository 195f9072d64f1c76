package cleanroom_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// unusedSentinelsFile lists the exported error sentinels (Err…) that no
// other package uses, as they stood when TestExportedSentinelsUsed was
// written (issue 21 item 8). The list only shrinks: a sentinel nobody
// outside its package tests for is unexported, not exported "in case".
const unusedSentinelsFile = "testdata/unused-sentinels.txt"

// TestExportedSentinelsUsed finds every exported Err… variable or constant
// of the module and the packages that refer to it (their code or their
// tests; a package's own tests do not count). A sentinel no other package
// uses must be unexported, or be in unusedSentinelsFile; an entry there
// that is used now, or gone, must leave the file.
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
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := path.Join(module, filepath.ToSlash(filepath.Dir(p)))
		if filepath.Dir(p) == "." {
			dir = module
		}
		if !strings.HasSuffix(p, "_test.go") {
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
	if len(declared) < 50 {
		t.Fatalf("found only %d exported sentinels: the walk is broken", len(declared))
	}
	var unused []string
	for d := range declared {
		if !used[d] {
			unused = append(unused, strings.TrimPrefix(d, module+"/"))
		}
	}
	slices.Sort(unused)
	b, err := os.ReadFile(unusedSentinelsFile)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			listed = append(listed, l)
		}
	}
	for _, u := range unused {
		if !slices.Contains(listed, u) {
			t.Errorf("%s is exported and no other package uses it: unexport it (or use it)", u)
		}
	}
	for _, l := range listed {
		if !slices.Contains(unused, l) {
			t.Errorf("%s is listed in %s but is used outside its package now, or gone: drop the line", l, unusedSentinelsFile)
		}
	}
	t.Logf("%d exported sentinels, %d used by no other package", len(declared), len(unused))
}
