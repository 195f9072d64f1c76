package holdout

import (
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// IndexType is the type of a holdout directory's INDEX.json.
const IndexType = "TRVM-PROOF-WIRE-HOLDOUT-v2"

// IndexFile is the name of the index inside a holdout directory.
const IndexFile = "INDEX.json"

// Rules a holdout directory can break (errors.Is works on every refusal).
var (
	// errIndex: INDEX.json is unreadable or not the closed index shape.
	errIndex = fault.New(fault.Refused, "holdout index")
	// errIndexMismatch: a challenge file disagrees with its index entry, or
	// the directory holds a file the index does not name.
	errIndexMismatch = fault.New(fault.Refused, "holdout index mismatch")
	// errChallengeRead: a challenge file does not cross the strict reader.
	errChallengeRead = fault.New(fault.Refused, "challenge unreadable")
)

// Challenge is one committed challenge as the strict reader read it.
type Challenge struct {
	// ID is the challenge's id member ("" if it has none; the recipe
	// schema refuses that before scoring).
	ID string
	// File is the file it came from, relative to the holdout directory,
	// or "" for the array form.
	File string
	// Value is the whole challenge document.
	Value *evidence.Object
}

// FixtureRoot returns the challenge's declared fixture.root, if any.
func (c *Challenge) FixtureRoot() (string, bool) {
	s, ok := resolve(c.Value, "fixture.root").(string)
	return s, ok
}

// Predicates returns the predicate objects (non-objects are skipped; the
// schema refuses them before scoring).
func (c *Challenge) Predicates() []*evidence.Object {
	arr, _ := resolve(c.Value, "predicates").([]any)
	out := make([]*evidence.Object, 0, len(arr))
	for _, p := range arr {
		if o, ok := p.(*evidence.Object); ok {
			out = append(out, o)
		}
	}
	return out
}

func newChallenge(v any, file string) (*Challenge, error) {
	o, ok := v.(*evidence.Object)
	if !ok {
		return nil, fmt.Errorf("%s: a challenge is a JSON object, not %s: %w", orArray(file), evidence.TypeName(v), errChallengeRead)
	}
	id, _ := resolve(o, "id").(string)
	return &Challenge{ID: id, File: file, Value: o}, nil
}

func orArray(file string) string {
	if file == "" {
		return "challenge array"
	}
	return file
}

// ParseChallenges reads the array form of a challenge set (the fixture
// form: one JSON array of challenge objects) through the strict reader.
func ParseChallenges(b []byte, name string) ([]*Challenge, error) {
	v, err := evidence.Read(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", name, errChallengeRead, err)
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: a challenge list is a JSON array, not %s: %w", name, evidence.TypeName(v), errChallengeRead)
	}
	out := make([]*Challenge, 0, len(arr))
	for i, e := range arr {
		c, err := newChallenge(e, "")
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", name, i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// IndexEntry is one entry of INDEX.json.
type IndexEntry struct {
	File        string
	ID          string
	Name        string
	Predicates  int
	RecipeSteps int
}

// Holdout is a loaded holdout directory.
type Holdout struct {
	Dir        string
	Entries    []IndexEntry
	Challenges []*Challenge
	// read are the files LoadDir read (INDEX.json and every challenge)
	// with the SHA-256 of the bytes it parsed.
	read []pkgwalk.FileDigest
}

// LoadDir reads a holdout directory: INDEX.json and exactly the files it
// names, each through the strict reader, each checked against its entry
// (id, name, number of predicates and recipe steps). The directory must hold
// nothing else — no extra file, no subdirectory, no symlink — because the
// commitment covers every file in the tree and a file the index does not
// name would be committed yet never scored.
func LoadDir(dir string) (*Holdout, error) { return loadDir(dir, nil) }

// loadDir is LoadDir; verify, when given, is handed what was read (INDEX.json
// and every file it names, the directory holding nothing else) before any
// challenge is parsed, so a commitment decides before a changed file's
// content does. With verify, a file missing, unreadable or not named is the
// committed set changed too: such an error also wraps errCommitment.
func loadDir(dir string, verify func([]pkgwalk.FileDigest) error) (*Holdout, error) {
	changed := func(err error) error {
		if verify != nil {
			return fmt.Errorf("%w: %w", errCommitment, err)
		}
		return err
	}
	// os.Root keeps every open beneath dir: a symlink or ".." in a file
	// name cannot reach a file outside the committed tree.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("holdout directory: %w", err)
	}
	defer root.Close()
	ib, err := readRegular(root, IndexFile)
	if err != nil {
		// An INDEX.json that is not there or cannot be read is unusable
		// input (exit 2), as a holdout directory that is not there is.
		return nil, fault.As(fault.RuleClass(err), fmt.Errorf("%s: %w: %w", dir, errIndex, err))
	}
	entries, err := parseIndex(ib)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", dir, IndexFile, err)
	}
	h := &Holdout{Dir: dir, Entries: entries, read: []pkgwalk.FileDigest{{Path: IndexFile, SHA256: pkgwalk.SHA256Hex(ib)}}}
	named := map[string]bool{IndexFile: true}
	raw := make([][]byte, len(entries))
	for i, e := range entries {
		named[e.File] = true
		b, err := readRegular(root, e.File)
		if err != nil {
			return nil, changed(fmt.Errorf("%s/%s: %w: %w", dir, e.File, errIndexMismatch, err))
		}
		raw[i] = b
		h.read = append(h.read, pkgwalk.FileDigest{Path: e.File, SHA256: pkgwalk.SHA256Hex(b)})
	}
	des, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, de := range des {
		if !named[de.Name()] || !de.Type().IsRegular() {
			return nil, changed(fmt.Errorf("%s/%s: not a challenge named by %s (the tree must hold exactly the indexed files): %w", dir, de.Name(), IndexFile, errIndexMismatch))
		}
	}
	if verify != nil {
		if err := verify(h.read); err != nil {
			return nil, err
		}
	}
	for i, e := range entries {
		v, err := evidence.Read(raw[i])
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w: %w", dir, e.File, errChallengeRead, err)
		}
		c, err := newChallenge(v, e.File)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", dir, e.File, err)
		}
		if p := entryMismatch(e, c); p != "" {
			return nil, fmt.Errorf("%s/%s: %s: %w", dir, e.File, p, errIndexMismatch)
		}
		h.Challenges = append(h.Challenges, c)
	}
	return h, nil
}

// readRegular reads a regular file beneath root. The name must be a plain
// file name.
func readRegular(root *os.Root, name string) ([]byte, error) {
	// A name with a separator would address another directory of the tree.
	if name == "" || strings.ContainsAny(name, "/\\") || name == "." || name == ".." {
		return nil, fmt.Errorf("file name %q is not a plain file name", name)
	}
	// O_NOFOLLOW: a symlink at the name cannot substitute another file of
	// the tree; O_NONBLOCK: a FIFO is refused by the fstat in
	// evidence.ReadOpenFile instead of blocking this open forever.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, _, err := evidence.ReadOpenFile(f)
	return b, err
}

func parseIndex(b []byte) ([]IndexEntry, error) {
	o, err := evidence.ReadObject(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errIndex, err)
	}
	if t, _ := resolve(o, "type").(string); t != IndexType {
		return nil, fmt.Errorf("type is not %q: %w", IndexType, errIndex)
	}
	for _, n := range o.Names() {
		if !slices.Contains([]string{"type", "entries", "note", "predicate_ops"}, n) {
			return nil, fmt.Errorf("unknown member %q: %w", n, errIndex)
		}
	}
	arr, ok := resolve(o, "entries").([]any)
	if !ok {
		return nil, fmt.Errorf("entries is not an array: %w", errIndex)
	}
	seenFile, seenID := map[string]bool{}, map[string]bool{}
	out := make([]IndexEntry, 0, len(arr))
	for i, e := range arr {
		eo, ok := e.(*evidence.Object)
		if !ok {
			return nil, fmt.Errorf("entries[%d] is not an object: %w", i, errIndex)
		}
		var ie IndexEntry
		var okF, okI, okN, okP, okR bool
		ie.File, okF = resolve(eo, "file").(string)
		ie.ID, okI = resolve(eo, "id").(string)
		ie.Name, okN = resolve(eo, "name").(string)
		ie.Predicates, okP = count(resolve(eo, "predicates"))
		ie.RecipeSteps, okR = count(resolve(eo, "recipe_steps"))
		if !okF || !okI || !okN || !okP || !okR || eo.Len() != 5 {
			return nil, fmt.Errorf("entries[%d] is not exactly {file, id, name, predicates, recipe_steps}: %w", i, errIndex)
		}
		if seenFile[ie.File] || seenID[ie.ID] || ie.File == IndexFile {
			return nil, fmt.Errorf("entries[%d] repeats file %q or id %q: %w", i, ie.File, ie.ID, errIndex)
		}
		seenFile[ie.File], seenID[ie.ID] = true, true
		out = append(out, ie)
	}
	return out, nil
}

func count(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f < 0 || f != float64(int(f)) {
		return 0, false
	}
	return int(f), true
}

func entryMismatch(e IndexEntry, c *Challenge) string {
	name, _ := resolve(c.Value, "name").(string)
	recipe, _ := resolve(c.Value, "recipe").([]any)
	preds, _ := resolve(c.Value, "predicates").([]any)
	switch {
	case c.ID != e.ID:
		return fmt.Sprintf("id %q, index says %q", c.ID, e.ID)
	case name != e.Name:
		return fmt.Sprintf("name %q, index says %q", name, e.Name)
	case len(preds) != e.Predicates:
		return fmt.Sprintf("%d predicates, index says %d", len(preds), e.Predicates)
	case len(recipe) != e.RecipeSteps:
		return fmt.Sprintf("%d recipe steps, index says %d", len(recipe), e.RecipeSteps)
	}
	return ""
}
