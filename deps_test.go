package cleanroom_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The import graph of the module, pinned in the style of the standard
// library's go/build/deps_test.go. docs/design.md draws it and says why.
//
// Packages are named relative to the module ("." is the module root). A
// rule "A, B < C, D" says C and D may import A and B and everything A and
// B may import; rules chain ("A < B < C"). A package appears on the right
// of exactly one rule, after every package it may import has appeared; NONE
// on the left declares a package that imports nothing of the module. A
// module package missing from the rules, a rule naming a package that does
// not exist, and an import along no rule all fail TestDependencies.
const dependencyRules = `
# Leaves: the standard library and third-party modules only.
NONE < ., internal/capbuf, internal/deathsig, internal/fault, internal/fsx, internal/hosttree, internal/ident, internal/textsafe, internal/testshared, pkgwalk/internal/sha2x,
	sandbox/seal, sandbox/cgprime, sandbox/sandboxinit, bench/mcpclient, docs;

internal/fsx < internal/durable;
internal/fault, internal/fsx < evidence;
# Schema validation: not linked by the room (evidence/schema's own test).
evidence < evidence/schema;

evidence, internal/durable, internal/ident, pkgwalk/internal/sha2x < pkgwalk;
evidence, internal/durable < sign;
internal/deathsig, internal/durable, internal/fault, internal/fsx, internal/hosttree, sandbox/cgprime, sandbox/sandboxinit, sandbox/seal < sandbox;

# Blind runs. The holdout (scorer, challenge set, findings register) knows
# nothing of runs; experiment replays a COMPLETE run with it.
evidence/schema, internal/durable, pkgwalk < holdout;
holdout, sign < experiment;
experiment < internal/worldinit;
experiment, sandbox < adapter;

# The clean room: no container runtime, no holdout.
internal/deathsig, pkgwalk, sandbox/seal < harness < harness/roomstage < cmd/cleanroom-room;
# Any agent in the sandbox against the clean room.
harness, internal/capbuf, sandbox < agentroom;

# AMBER and fleets.
evidence/schema, internal/capbuf, pkgwalk, sandbox, sign < amber;
amber, experiment < fleet;

# Rendering.
adapter, harness, holdout, internal/textsafe < internal/report;

# The command line.
sandbox/cgprime < cmd/cleanroom/internal/earlyprime;
., adapter, agentroom, amber, fleet, harness/roomstage, internal/report, internal/worldinit,
	cmd/cleanroom/internal/earlyprime < cmd/cleanroom;

# Tests' and benchmarks' helpers.
., experiment < internal/testshared/runworld;
evidence, internal/durable, bench/mcpclient < bench/compare;
`

// Rules beyond the edges, on what a package links from outside the module.
var (
	// sandbox/seal is linked by the room's own binary, which is built
	// without cgo and the container runtime: the standard library and
	// x/sys only.
	// internal/fault, internal/fsx and internal/ident are used by every
	// layer, so they may not pull anything in.
	sealOnly = map[string][]string{
		"sandbox/seal":   {"golang.org/x/sys/"},
		"internal/fsx":   {"golang.org/x/sys/"},
		"internal/ident": {},
		"internal/fault": {},
		// The room links it too (harness starts the sealed server).
		"internal/deathsig": {},
	}
	// The room's binary starts several times per session and links no
	// container runtime and no Kubernetes types.
	forbiddenDeps = map[string][]string{
		"cmd/cleanroom-room": {"github.com/opencontainers/runc", "k8s.io/", "sigs.k8s.io/"},
	}
)

// listedPackage is what TestDependencies reads of `go list -json`.
type listedPackage struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Deps       []string
	Module     *struct{ Path string }
}

// parseRules turns dependencyRules into, for each package, the set of
// module packages it may import.
func parseRules(rules string) (map[string]map[string]bool, error) {
	allowed := map[string]map[string]bool{}
	var lines []string
	for _, l := range strings.Split(rules, "\n") {
		if i := strings.IndexByte(l, '#'); i >= 0 {
			l = l[:i]
		}
		lines = append(lines, l)
	}
	for _, rule := range strings.Split(strings.Join(lines, " "), ";") {
		if strings.TrimSpace(rule) == "" {
			continue
		}
		parts := strings.Split(rule, "<")
		if len(parts) < 2 {
			return nil, fmt.Errorf("rule %q: want A < B", strings.TrimSpace(rule))
		}
		sides := make([][]string, len(parts))
		for i, p := range parts {
			for _, name := range strings.Split(p, ",") {
				if name = strings.TrimSpace(name); name != "" {
					sides[i] = append(sides[i], name)
				}
			}
			if len(sides[i]) == 0 {
				return nil, fmt.Errorf("rule %q: an empty side", strings.TrimSpace(rule))
			}
		}
		for i := 1; i < len(sides); i++ {
			below := map[string]bool{}
			for _, l := range sides[i-1] {
				if l == "NONE" {
					continue
				}
				lower, ok := allowed[l]
				if !ok {
					return nil, fmt.Errorf("rule %q: %s is used before its own rule", strings.TrimSpace(rule), l)
				}
				below[l] = true
				for p := range lower {
					below[p] = true
				}
			}
			for _, r := range sides[i] {
				if _, dup := allowed[r]; dup {
					return nil, fmt.Errorf("rule %q: %s already has a rule", strings.TrimSpace(rule), r)
				}
				allowed[r] = below
			}
		}
	}
	return allowed, nil
}

// checkGraph returns one problem per import along no rule, per module
// package missing from the rules and per rule naming no package.
func checkGraph(module string, pkgs []listedPackage, allowed map[string]map[string]bool) []string {
	rel := func(path string) (string, bool) {
		if path == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(path, module+"/")
		return r, ok
	}
	var problems []string
	seen := map[string]bool{}
	std := map[string]bool{}
	for _, p := range pkgs {
		std[p.ImportPath] = p.Standard
	}
	for _, p := range pkgs {
		name, ok := rel(p.ImportPath)
		if !ok || p.Module == nil || p.Module.Path != module {
			continue
		}
		seen[name] = true
		may, ok := allowed[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s is in no rule: add it to dependencyRules and docs/design.md", name))
			continue
		}
		for _, imp := range p.Imports {
			if r, ok := rel(imp); ok && !may[r] {
				problems = append(problems, fmt.Sprintf("%s imports %s: no rule allows this edge", name, r))
			}
		}
		if prefixes, ok := sealOnly[name]; ok {
			for _, imp := range p.Imports {
				if !std[imp] && !slices.ContainsFunc(prefixes, func(pre string) bool { return strings.HasPrefix(imp, pre) }) {
					problems = append(problems, fmt.Sprintf("%s imports %s: it may import only the standard library and %v", name, imp, prefixes))
				}
			}
		}
		for _, pre := range forbiddenDeps[name] {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, pre) {
					problems = append(problems, fmt.Sprintf("%s links %s: it must not link %s", name, d, pre))
					break
				}
			}
		}
	}
	for name := range allowed {
		if !seen[name] {
			problems = append(problems, fmt.Sprintf("rule for %s: no such package in the module", name))
		}
	}
	slices.Sort(problems)
	return problems
}

func TestDependencies(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the packages with")
	}
	allowed, err := parseRules(dependencyRules)
	if err != nil {
		t.Fatal(err)
	}
	modOut, err := exec.Command(goTool, "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	module := strings.TrimSpace(string(modOut))
	cmd := exec.Command(goTool, "list", "-deps", "-json", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -json ./...: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list listed no packages")
	}
	for _, p := range checkGraph(module, pkgs, allowed) {
		t.Error(p)
	}
}

// TestDependencyCheck shows the checker refusing what it is there to
// refuse, on a made-up module, so that TestDependencies passing means
// something.
func TestDependencyCheck(t *testing.T) {
	t.Parallel()
	const mod = "example.com/m"
	allowed, err := parseRules(`NONE < a, sandbox/seal; a < b; b < c < cmd/cleanroom-room; NONE < unused;`)
	if err != nil {
		t.Fatal(err)
	}
	m := &struct{ Path string }{mod}
	pkgs := []listedPackage{
		{ImportPath: "fmt", Standard: true},
		{ImportPath: mod + "/a", Module: m, Imports: []string{"fmt", mod + "/b"}},
		{ImportPath: mod + "/b", Module: m, Imports: []string{mod + "/a"}},
		{ImportPath: mod + "/c", Module: m, Imports: []string{mod + "/a"}},
		{ImportPath: mod + "/sandbox/seal", Module: m, Imports: []string{"fmt", "golang.org/x/sys/unix", "github.com/vishvananda/netlink"}},
		{ImportPath: mod + "/cmd/cleanroom-room", Module: m, Imports: []string{mod + "/c"}, Deps: []string{"github.com/opencontainers/runc/libcontainer"}},
		{ImportPath: mod + "/d", Module: m},
	}
	want := []string{
		"a imports b: no rule allows this edge",
		"cmd/cleanroom-room links github.com/opencontainers/runc/libcontainer: it must not link github.com/opencontainers/runc",
		"d is in no rule: add it to dependencyRules and docs/design.md",
		"rule for unused: no such package in the module",
		"sandbox/seal imports github.com/vishvananda/netlink: it may import only the standard library and [golang.org/x/sys/]",
	}
	if got := checkGraph(mod, pkgs, allowed); !slices.Equal(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
	for _, bad := range []struct{ rules, want string }{
		{"a < b;", "a is used before its own rule"},
		{"NONE < a; NONE < a;", "a already has a rule"},
		{"a;", "want A < B"},
		{"NONE < ;", "an empty side"},
	} {
		if _, err := parseRules(bad.rules); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("parseRules(%q) = %v, want an error saying %q", bad.rules, err, bad.want)
		}
	}
}
