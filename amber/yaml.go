package amber

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/internal/fault"
	"go.yaml.in/yaml/v3"
)

// MaxYAML caps a manifest or summary. The upstream examples are under 2 KiB;
// the cap keeps a hostile file from costing more than a bounded parse.
const MaxYAML = 256 << 10

// YAMLError names the file, the line and the rule a YAML document broke.
type YAMLError struct {
	File string
	Line int // 0 when the position is unknown
	Err  error
}

func (e *YAMLError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.File, e.Err)
}

func (e *YAMLError) Unwrap() error { return e.Err }

// Rules of the strict YAML reading.
var (
	errYAMLSyntax       = fault.New(fault.Refused, "not YAML")
	errYAMLTooLarge     = fault.New(fault.Refused, "YAML document over the size cap")
	errYAMLMultiDoc     = fault.New(fault.Refused, "more than one YAML document")
	errYAMLDuplicateKey = fault.New(fault.Refused, "duplicate mapping key")
	errYAMLAlias        = fault.New(fault.Refused, "anchors and aliases are refused")
	errYAMLTag          = fault.New(fault.Refused, "tag outside the YAML core schema")
	errYAMLKey          = fault.New(fault.Refused, "mapping key is not a plain string")
	errYAMLNotMapping   = fault.New(fault.Refused, "document is not a mapping")
	errYAMLUnknownField = fault.New(fault.Refused, "field outside the closed field set")
)

// readYAML reads one YAML document strictly and returns it in the evidence
// value model (nil, bool, float64, string, []any, *evidence.Object), which
// is what JSON Schema validation and Canonical take.
//
// Refused, because two YAML readers could disagree about them: a second
// document (most readers silently drop it), duplicate keys, anchors and
// aliases (a reader that expands them and one that refuses them see
// different documents; they also allow exponential expansion), explicit
// tags other than the core ones, and non-string keys. A timestamp-looking
// scalar stays the string it was written as, never a converted time: the
// upstream validator's YAML backends disagree on exactly that.
func readYAML(file string, b []byte) (*evidence.Object, error) {
	if len(b) > MaxYAML {
		return nil, &YAMLError{File: file, Err: fmt.Errorf("%w (%d bytes)", errYAMLTooLarge, MaxYAML)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, &YAMLError{File: file, Err: fmt.Errorf("%w: empty", errYAMLSyntax)}
		}
		return nil, &YAMLError{File: file, Err: yamlErr(err)}
	}
	var second yaml.Node
	if err := dec.Decode(&second); err != io.EOF {
		return nil, &YAMLError{File: file, Line: second.Line, Err: errYAMLMultiDoc}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &YAMLError{File: file, Err: errYAMLNotMapping}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &YAMLError{File: file, Line: root.Line, Err: errYAMLNotMapping}
	}
	v, err := nodeValue(file, root, 0)
	if err != nil {
		return nil, err
	}
	return v.(*evidence.Object), nil
}

func yamlErr(err error) error {
	if strings.Contains(err.Error(), "already defined") {
		return fmt.Errorf("%w: %w", errYAMLDuplicateKey, err)
	}
	return fmt.Errorf("%w: %w", errYAMLSyntax, err)
}

const maxYAMLDepth = 32

func nodeValue(file string, n *yaml.Node, depth int) (any, error) {
	fail := func(err error) error { return &YAMLError{File: file, Line: n.Line, Err: err} }
	if depth > maxYAMLDepth {
		return nil, fail(fmt.Errorf("%w: nested deeper than %d", errYAMLSyntax, maxYAMLDepth))
	}
	if n.Anchor != "" || n.Kind == yaml.AliasNode {
		return nil, fail(errYAMLAlias)
	}
	switch n.Kind {
	case yaml.MappingNode:
		if n.Tag != "!!map" {
			return nil, fail(fmt.Errorf("%w: %s", errYAMLTag, n.Tag))
		}
		obj := evidence.NewObject()
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			// "<<" merge keys and non-string keys have no JSON image.
			if k.Kind != yaml.ScalarNode || k.Tag != "!!str" || k.Anchor != "" {
				return nil, &YAMLError{File: file, Line: k.Line, Err: errYAMLKey}
			}
			if obj.Has(k.Value) {
				return nil, &YAMLError{File: file, Line: k.Line, Err: fmt.Errorf("%w %q", errYAMLDuplicateKey, k.Value)}
			}
			v, err := nodeValue(file, val, depth+1)
			if err != nil {
				return nil, err
			}
			obj.Set(k.Value, v)
		}
		return obj, nil
	case yaml.SequenceNode:
		if n.Tag != "!!seq" {
			return nil, fail(fmt.Errorf("%w: %s", errYAMLTag, n.Tag))
		}
		out := []any{}
		for _, c := range n.Content {
			v, err := nodeValue(file, c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str", "!!timestamp":
			return n.Value, nil
		case "!!null":
			return nil, nil
		case "!!bool":
			// Only the YAML 1.2 core spellings; yes/no/on/off are strings in
			// YAML 1.2 and booleans in 1.1, so they are refused here.
			switch n.Value {
			case "true":
				return true, nil
			case "false":
				return false, nil
			}
			return nil, fail(fmt.Errorf("%w: ambiguous boolean %q", errYAMLTag, n.Value))
		case "!!int":
			i, err := strconv.ParseInt(n.Value, 10, 64)
			// Only plain decimal integers that a double holds exactly:
			// 0x, 0o, underscores and |i| > 2^53 read differently elsewhere.
			if err != nil || strconv.FormatInt(i, 10) != strings.TrimPrefix(n.Value, "+") || i > 1<<53 || i < -(1<<53) {
				return nil, fail(fmt.Errorf("%w: integer %q is not plain decimal", errYAMLTag, n.Value))
			}
			return float64(i), nil
		case "!!float":
			f, err := strconv.ParseFloat(n.Value, 64)
			if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
				return nil, fail(fmt.Errorf("%w: number %q", errYAMLTag, n.Value))
			}
			return f, nil
		}
		return nil, fail(fmt.Errorf("%w: %s", errYAMLTag, n.Tag))
	}
	return nil, fail(fmt.Errorf("%w: node kind %d", errYAMLSyntax, n.Kind))
}
