package schema

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled JSON Schema (draft 2020-12 unless the document's
// $schema names another draft), with the x-sorted extension keyword.
// A Schema is safe for concurrent use.
type Schema struct {
	name string
	sch  *jsonschema.Schema
	base string // the root resource's URL without fragment
}

// xSortedVocabURL identifies the x-sorted extension vocabulary. It is never
// fetched: vocabularies are registered in process.
const xSortedVocabURL = "https://cleanroom.invalid/vocab/x-sorted"

// schemaBaseURL is where a schema without $id lives. The .invalid top-level
// domain (RFC 2606) can never resolve, and no loader is installed anyway.
const schemaBaseURL = "https://schema.cleanroom.invalid/"

var (
	// Built on the first Compile, not at start-up.
	xSortedVocab = sync.OnceValues(newXSortedVocab)
	printer      = message.NewPrinter(language.English)
)

func newXSortedVocab() (*jsonschema.Vocabulary, error) {
	meta := map[string]any{
		"properties": map[string]any{
			"x-sorted": map[string]any{"type": "boolean"},
		},
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	if err := c.AddResource(xSortedVocabURL, meta); err != nil {
		return nil, err
	}
	sch, err := c.Compile(xSortedVocabURL)
	if err != nil {
		return nil, err
	}
	return &jsonschema.Vocabulary{URL: xSortedVocabURL, Schema: sch, Compile: compileXSorted}, nil
}

// Compile reads doc with the strict reader (a schema is evidence too:
// a duplicate keyword would make two validators enforce different rules)
// and compiles it. name identifies the schema in errors; a schema without
// $id is placed at a URL derived from name.
//
// No loader is installed: a $ref to anything but the schema itself or the
// built-in draft metaschemas fails to compile, so a schema can never make
// cleanroom read a file or the network.
func Compile(name string, doc []byte) (*Schema, error) {
	v, err := evidence.Read(doc)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	vocab, err := xSortedVocab()
	if err != nil {
		return nil, fmt.Errorf("schema %s: x-sorted vocabulary: %w", name, err)
	}
	loc := schemaBaseURL + url.PathEscape(name)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// Refuses every external $ref: schemas never read files or the network.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	c.AssertVocabs()
	c.RegisterVocabulary(vocab)
	// Numbers stay float64, the value JSON.parse reads; the library compares
	// them through their shortest decimal form, which is exact for a double.
	if err := c.AddResource(loc, evidence.Plain(v)); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	base, _, _ := strings.Cut(sch.Location, "#")
	return &Schema{name: name, sch: sch, base: base}, nil
}

// Name returns the name given to Compile.
func (s *Schema) Name() string { return s.name }

// Validate checks v, a value returned by [evidence.Read] (or the same shape in plain
// Go maps and slices), and returns nil or an *[evidence.SchemaError].
func (s *Schema) Validate(v any) error {
	err := s.sch.Validate(evidence.Plain(v))
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("schema %s: %w", s.name, err)
	}
	se := &evidence.SchemaError{Schema: s.name}
	s.collect(ve, &se.Causes)
	slices.SortFunc(se.Causes, func(a, b evidence.SchemaCause) int {
		return cmp.Or(
			strings.Compare(a.InstancePointer, b.InstancePointer),
			strings.Compare(a.KeywordPointer, b.KeywordPointer),
			strings.Compare(a.Message, b.Message))
	})
	se.Causes = slices.Compact(se.Causes)
	return se
}

// collect appends the leaf causes of e: the keywords that actually failed,
// not the $ref/allOf/schema nodes that merely contain them.
func (s *Schema) collect(e *jsonschema.ValidationError, out *[]evidence.SchemaCause) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			s.collect(c, out)
		}
		return
	}
	*out = append(*out, evidence.SchemaCause{
		InstancePointer: pointerOf(e.InstanceLocation),
		KeywordPointer:  s.keywordPointer(e),
		Message:         e.ErrorKind.LocalizedString(printer),
	})
}

func (s *Schema) keywordPointer(e *jsonschema.ValidationError) string {
	schemaURL := e.SchemaURL
	var kw []string
	if ref, ok := e.ErrorKind.(*kind.Reference); ok {
		schemaURL = ref.URL
	} else {
		kw = e.ErrorKind.KeywordPath()
	}
	base, frag, _ := strings.Cut(schemaURL, "#")
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	ptr := frag + pointerOf(kw)
	if base == s.base {
		return ptr
	}
	return base + "#" + ptr
}

// pointerOf joins tokens into an RFC 6901 JSON Pointer.
func pointerOf(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// xSorted is the compiled x-sorted keyword of the TRVM observation schema:
// each array element's string form must be >= the previous one's, compared
// as JavaScript compares strings (UTF-16 code units).
type xSorted struct{}

func compileXSorted(_ *jsonschema.CompilerContext, obj map[string]any) (jsonschema.SchemaExt, error) {
	v, ok := obj["x-sorted"]
	if !ok {
		return nil, nil
	}
	if b, _ := v.(bool); !b {
		// "x-sorted": false asks for nothing (the metaschema has already
		// refused a non-boolean).
		return nil, nil
	}
	return xSorted{}, nil
}

func (xSorted) Validate(ctx *jsonschema.ValidatorContext, v any) {
	arr, ok := v.([]any)
	if !ok {
		return
	}
	for i := 1; i < len(arr); i++ {
		prev, cur := evidence.JSString(arr[i-1]), evidence.JSString(arr[i])
		if evidence.CompareUTF16(cur, prev) < 0 {
			ctx.AddError(&notSorted{Index: i, Prev: prev, Cur: cur})
			return
		}
	}
}

// notSorted is the error kind of x-sorted.
type notSorted struct {
	Index     int
	Prev, Cur string
}

func (*notSorted) KeywordPath() []string { return []string{"x-sorted"} }

func (k *notSorted) LocalizedString(p *message.Printer) string {
	return p.Sprintf("items are not sorted: item %d %q sorts before item %d %q", k.Index, k.Cur, k.Index-1, k.Prev)
}
