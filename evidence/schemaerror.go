package evidence

import (
	"fmt"
	"strings"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// SchemaError is a refusal by a schema: every leaf cause, sorted by
// instance pointer, then keyword pointer, then message, so the same document
// always yields the same report.
type SchemaError struct {
	Schema string        `json:"schema"`
	Causes []SchemaCause `json:"causes"`
}

// SchemaCause is one violated keyword: where in the instance (RFC 6901
// pointer, "" for the whole document), which keyword (a pointer into the
// schema document, or an absolute URL#pointer when the keyword lives in
// another resource) and a message.
type SchemaCause struct {
	InstancePointer string `json:"instance_pointer"`
	KeywordPointer  string `json:"keyword_pointer"`
	Message         string `json:"message"`
}

func (e *SchemaError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schema %s: %d problem", e.Schema, len(e.Causes))
	if len(e.Causes) != 1 {
		b.WriteByte('s')
	}
	for i, c := range e.Causes {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(c.String())
	}
	return b.String()
}

// String renders one cause as `at "/ptr" [keyword]: message`.
func (c SchemaCause) String() string {
	return fmt.Sprintf("at %q [%s]: %s", c.InstancePointer, c.KeywordPointer, c.Message)
}

// JSString is JavaScript's String(v) for a value [Read] returns (or a plain
// map/slice of them): numbers as Number::toString, arrays joined with ","
// (null elements as ""), objects "[object Object]". It is the sort key of
// x-sorted and of JavaScript's default Array.prototype.sort.
func JSString(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		if x {
			return "true"
		}
		return "false"
	case string:
		return x
	case float64:
		return string(AppendNumber(nil, x))
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			if e != nil {
				parts[i] = JSString(e)
			}
		}
		return strings.Join(parts, ",")
	case map[string]any, *Object:
		return "[object Object]"
	}
	return fmt.Sprint(v)
}

// FaultClass is Refused (internal/fault): a document broke its schema.
func (*SchemaError) FaultClass() fault.Class { return fault.Refused }
