package holdout

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/durable"
)

func pairsWithFindings(t *testing.T) []PairFindings {
	t.Helper()
	_, _, ob := loadFixture(t)
	a, _ := evidence.Read(ob)
	b, _ := evidence.Read(ob)
	mustMutate(b, "observations.S1.resolve.outcome", "other", false)
	mustMutate(b, "observations.S2.refusal_set", []any{}, false)
	r, err := CompareAll([]Document{{"ref", a}, {"cand", b}})
	if err != nil || r.Findings != 2 {
		t.Fatalf("%v %v", r, err)
	}
	return r.Pairs
}

const srel0 = "srel-0000000000000000000000000000000000000000000000000000000000000000"

func TestRegisterOpenClassify(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	reg := OpenRegister(state)
	pairs := pairsWithFindings(t)
	recs, err := reg.Open("brun-x", srel0, pairs)
	if err != nil || len(recs) != 2 {
		t.Fatalf("%v %v", recs, err)
	}
	// Opening the same findings again adds nothing.
	if _, err := reg.Open("brun-y", srel0, pairs); err != nil {
		t.Fatal(err)
	}
	if n, _ := reg.Outstanding(srel0, pairs); n != 2 {
		t.Errorf("outstanding %d, want 2", n)
	}
	// The id depends on the release: the same difference under another
	// release is another finding.
	if pairs[0].Findings[0].ID(srel0, "ref", "cand") == pairs[0].Findings[0].ID("srel-1", "ref", "cand") {
		t.Error("finding id ignores the release")
	}
	cases := []struct {
		id, class, ruling string
		rule              error
	}{
		{recs[0].ID, "PROBABLY_FINE", "r", errClass},
		{recs[0].ID, "SPEC_GAP", " ", errEntry},
		{"find-0000000000000", "SPEC_GAP", "r", errUnknownFinding},
		{"find-", "SPEC_GAP", "r", errUnknownFinding},
	}
	for _, c := range cases {
		if _, err := reg.Classify(c.id, c.class, c.ruling); !errors.Is(err, c.rule) {
			t.Errorf("classify %q %q: %v, want %v", c.id, c.class, err, c.rule)
		}
	}
	if _, err := reg.Classify(recs[0].ID, "JCS_DEPENDENCY_DIVERGENCE", "two encoders disagree"); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Classify(recs[0].ID, "SPEC_GAP", "changed my mind"); !errors.Is(err, errAlreadyClassified) {
		t.Errorf("second classification: %v", err)
	}
	if n, _ := reg.Outstanding(srel0, pairs); n != 1 {
		t.Errorf("outstanding %d, want 1", n)
	}
	fs, err := reg.Findings()
	if err != nil || len(fs) != 2 || fs[0].Class != "JCS_DEPENDENCY_DIVERGENCE" || fs[1].Class != "" {
		t.Fatalf("%+v %v", fs, err)
	}
	ents, _ := os.ReadDir(filepath.Join(state, FindingsDirName))
	if len(ents) != 3 {
		t.Errorf("%d entries, want 3 (two opened, one classified)", len(ents))
	}
}

func TestRegisterTamper(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(t *testing.T, dir string) error
	}{
		{"entry edited", func(t *testing.T, dir string) error {
			editFile(t, filepath.Join(dir, "000001.json"), "S1.resolve.outcome", "S1.resolve.outcomX")
			return nil
		}},
		{"entry removed", func(t *testing.T, dir string) error { return os.Remove(filepath.Join(dir, "000002.json")) }},
		{"entry inserted", func(t *testing.T, dir string) error {
			b, err := os.ReadFile(filepath.Join(dir, "000003.json"))
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "000004.json"), b, 0o644)
		}},
		{"foreign file", func(t *testing.T, dir string) error {
			return os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
		}},
		{"duplicate member", func(t *testing.T, dir string) error {
			editFile(t, filepath.Join(dir, "000003.json"), `"class":`, `"class": "SPEC_GAP", "class":`)
			return nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			reg := OpenRegister(state)
			recs, err := reg.Open("brun-x", srel0, pairsWithFindings(t))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := reg.Classify(recs[0].ID, "SPEC_GAP", "r"); err != nil {
				t.Fatal(err)
			}
			if err := c.edit(t, filepath.Join(state, FindingsDirName)); err != nil {
				t.Fatal(err)
			}
			if _, err := reg.Findings(); !errors.Is(err, errLog) {
				t.Errorf("%v, want errLog", err)
			}
		})
	}
}

func TestQuestions(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	two := 2
	one := 1
	bad := []Question{
		{FrozenSpecRevision: 0, Question: "q", WhyInsufficient: "w", Ruling: "r", Classification: "SPEC_GAP"},
		{FrozenSpecRevision: 1, Question: "", WhyInsufficient: "w", Ruling: "r", Classification: "SPEC_GAP"},
		{FrozenSpecRevision: 1, Question: "q", WhyInsufficient: "w", Ruling: "r", Classification: "SPEC_GAP", SupersedingRevision: &one},
	}
	for _, q := range bad {
		if _, err := AskQuestion(state, q); !errors.Is(err, errEntry) {
			t.Errorf("%+v: %v, want errEntry", q, err)
		}
	}
	if _, err := AskQuestion(state, Question{FrozenSpecRevision: 1, Question: "q", WhyInsufficient: "w", Ruling: "r", Classification: "UNSURE"}); !errors.Is(err, errClass) {
		t.Errorf("class: %v", err)
	}
	q := Question{FrozenSpecRevision: 1, Question: "Is the reference set ordered?", WhyInsufficient: "§4 says SET, §5 iterates it",
		Ruling: "a set", Classification: "SPEC_GAP", SupersedingRevision: &two}
	if _, err := AskQuestion(state, q); err != nil {
		t.Fatal(err)
	}
	q.SupersedingRevision = nil
	if _, err := AskQuestion(state, q); err != nil {
		t.Fatal(err)
	}
	es, err := Questions(state)
	if err != nil || len(es) != 2 {
		t.Fatalf("%v %v", es, err)
	}
	want := "type,seq,previous_sha256,frozen_spec_revision,question,why_insufficient,ruling,classification,superseding_revision"
	if got := strings.Join(es[0].Value.Names(), ","); got != want {
		t.Errorf("members %s", got)
	}
	if sup, _ := es[1].Value.Get("superseding_revision"); sup != nil {
		t.Errorf("superseding_revision %v, want null", sup)
	}
	if prev, _ := es[1].Value.Get("previous_sha256"); prev != es[0].SHA256 {
		t.Errorf("entry 2 links %v, want %s", prev, es[0].SHA256)
	}
}

// An append interrupted before its rename leaves durable's temporary file
// in the log directory; it is not an entry and must not shift the sequence
// of the entries around it.
func TestLogSkipsInterruptedAppend(t *testing.T) {
	t.Parallel()
	l := Log{Dir: filepath.Join(t.TempDir(), "log")}
	if _, err := l.Append(TypeQuestion, nil); err != nil {
		t.Fatal(err)
	}
	// Named as durable names them: it sorts before 000001.json.
	if err := os.WriteFile(filepath.Join(l.Dir, durable.TempPrefix+"000002.json.0123456789abcdef"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(TypeQuestion, nil); err != nil {
		t.Fatal(err)
	}
	es, err := l.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].File != "000001.json" || es[1].File != "000002.json" {
		t.Fatalf("entries %+v, want 000001.json and 000002.json", es)
	}
}
