package harness

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cleanroom-dev/cleanroom/evidence"
	"github.com/cleanroom-dev/cleanroom/pkgwalk"
)

// PromptPath is where the clean-room prompt sits inside the package. Every
// byte of natural language the implementer receives comes from this file.
const PromptPath = "experiment/CLEAN-ROOM-PROMPT-v1.md"

// The tools the harness implements, in the order it serves them.
var implementedTools = []string{"list_files", "read_file", "write_source"}

// The rules a prompt file can break, as pkgwalk Rules: each refusal is a
// *pkgwalk.RefusalError naming the prompt's path, like any other refusal of
// a package file.
const (
	// errPromptAbsent: without the sealed prompt the harness would have to
	// supply words of its own, which nothing authenticates.
	errPromptAbsent pkgwalk.Rule = "prompt file absent from the package"
	// errPromptBlock: a block marker missing, or present twice — two
	// readings of the instruction.
	errPromptBlock pkgwalk.Rule = "block markers not exactly one ## NAME and one ## END NAME line"
	// errPromptToolsFence: the TOOLS block is not exactly one ```json fence.
	errPromptToolsFence pkgwalk.Rule = "TOOLS block is not exactly one ```json fence"
	// errPromptToolsJSON: the fence does not cross the strict reader.
	errPromptToolsJSON pkgwalk.Rule = "TOOLS fence is not strict JSON"
	// errPromptTools: the declared tools are not exactly the ones the harness
	// implements, or declare parameters it does not take.
	errPromptTools pkgwalk.Rule = "declared tools differ from the implemented list_files, read_file, write_source"
)

// ToolSpec is one declared tool: its name, description and input schema,
// served to the client exactly as declared.
type ToolSpec struct {
	Name        string
	Description string
	// Schema is the declared parameters object as read.
	Schema *evidence.Object
	// SchemaJSON is Schema's RFC 8785 bytes (what goes on the wire).
	SchemaJSON []byte
}

// Prompt is the parsed clean-room prompt.
type Prompt struct {
	System string
	User   string
	Tools  []ToolSpec // in implementedTools order
}

// Tool returns the declared tool called name.
func (p *Prompt) Tool(name string) *ToolSpec {
	for i := range p.Tools {
		if p.Tools[i].Name == name {
			return &p.Tools[i]
		}
	}
	return nil
}

// ParsePrompt reads the SYSTEM, USER and TOOLS blocks of a prompt file. The
// text of a block is what lies strictly between a line that is exactly
// "## NAME" and a line that is exactly "## END NAME", each present exactly
// once, trimmed. TOOLS must be one ```json fence holding an array of
// {"type":"function","function":{name,description,parameters}} declaring
// exactly list_files, read_file and write_source with the parameters the
// harness takes.
func ParsePrompt(b []byte) (*Prompt, error) {
	perr := func(rule pkgwalk.Rule, format string, a ...any) error {
		return &pkgwalk.RefusalError{Path: PromptPath, Rule: rule, Detail: fmt.Sprintf(format, a...)}
	}
	lines := strings.Split(string(b), "\n")
	block := func(name string) (string, error) {
		open, end := -1, -1
		for i, l := range lines {
			switch l {
			case "## " + name:
				// A second marker is a second reading of the instruction.
				if open >= 0 {
					return "", perr(errPromptBlock, "two %q lines (lines %d and %d)", "## "+name, open+1, i+1)
				}
				open = i
			case "## END " + name:
				if end >= 0 {
					return "", perr(errPromptBlock, "two %q lines (lines %d and %d)", "## END "+name, end+1, i+1)
				}
				end = i
			}
		}
		if open < 0 || end < 0 || end < open {
			return "", perr(errPromptBlock, "block %s: start line %d, end line %d", name, open+1, end+1)
		}
		return strings.TrimSpace(strings.Join(lines[open+1:end], "\n")), nil
	}
	p := &Prompt{}
	var err error
	if p.System, err = block("SYSTEM"); err != nil {
		return nil, err
	}
	if p.User, err = block("USER"); err != nil {
		return nil, err
	}
	tools, err := block("TOOLS")
	if err != nil {
		return nil, err
	}
	const open, close = "```json\n", "\n```"
	if !strings.HasPrefix(tools, open) || !strings.HasSuffix(tools, close) || len(tools) < len(open)+len(close) {
		return nil, perr(errPromptToolsFence, "the block does not start with ```json and end with ```")
	}
	body := tools[len(open) : len(tools)-len(close)]
	// A second fence inside would be a second declaration.
	if strings.Contains(body, "```") {
		return nil, perr(errPromptToolsFence, "more than one fence")
	}
	v, err := evidence.Read([]byte(body))
	if err != nil {
		return nil, &pkgwalk.RefusalError{Path: PromptPath, Rule: errPromptToolsJSON, Detail: err.Error()}
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, perr(errPromptTools, "the fence holds %s, not an array", evidence.TypeName(v))
	}
	byName := map[string]ToolSpec{}
	var names []string
	for i, item := range arr {
		t, err := parseToolDecl(item)
		if err != nil {
			return nil, perr(errPromptTools, "tool %d: %v", i, err)
		}
		if _, dup := byName[t.Name]; dup {
			return nil, perr(errPromptTools, "tool %q declared twice", t.Name)
		}
		byName[t.Name] = t
		names = append(names, t.Name)
	}
	sorted := slices.Sorted(slices.Values(names))
	want := slices.Sorted(slices.Values(implementedTools))
	if !slices.Equal(sorted, want) {
		return nil, perr(errPromptTools, "declared %q, implemented %q", names, implementedTools)
	}
	// The handlers read these parameters; a declaration that names others
	// would describe a tool the harness does not implement.
	wantParams := map[string][]string{"list_files": {}, "read_file": {"path"}, "write_source": {"path", "content"}}
	for _, n := range implementedTools {
		t := byName[n]
		if err := checkParams(t.Schema, wantParams[n]); err != nil {
			return nil, perr(errPromptTools, "tool %q: %v", n, err)
		}
		p.Tools = append(p.Tools, t)
	}
	return p, nil
}

func parseToolDecl(item any) (ToolSpec, error) {
	o, ok := item.(*evidence.Object)
	if !ok {
		return ToolSpec{}, fmt.Errorf("is %s, not an object", evidence.TypeName(item))
	}
	if typ, _ := o.Get("type"); typ != "function" {
		return ToolSpec{}, fmt.Errorf(`"type" is not "function"`)
	}
	fv, _ := o.Get("function")
	f, ok := fv.(*evidence.Object)
	if !ok || o.Len() != 2 {
		return ToolSpec{}, fmt.Errorf(`must have exactly "type" and "function" (an object)`)
	}
	name, ok1 := mustString(f, "name")
	desc, ok2 := mustString(f, "description")
	pv, _ := f.Get("parameters")
	params, ok3 := pv.(*evidence.Object)
	if !ok1 || !ok2 || !ok3 || f.Len() != 3 {
		return ToolSpec{}, fmt.Errorf(`function must have exactly string "name", string "description" and object "parameters"`)
	}
	js, err := evidence.Canonical(params)
	if err != nil {
		return ToolSpec{}, fmt.Errorf("parameters: %w", err)
	}
	return ToolSpec{Name: name, Description: desc, Schema: params, SchemaJSON: js}, nil
}

func mustString(o *evidence.Object, name string) (string, bool) {
	v, ok := o.Get(name)
	s, isStr := v.(string)
	return s, ok && isStr
}

// checkParams accepts exactly the schema vocabulary the harness enforces
// itself (type object, properties of type string, required,
// additionalProperties false or absent), declaring exactly want as required
// string properties. A keyword the harness does not enforce would be a
// promise to the model that nothing keeps.
func checkParams(s *evidence.Object, want []string) error {
	for _, k := range s.Names() {
		switch k {
		case "type", "properties", "required", "additionalProperties":
		default:
			return fmt.Errorf("parameters use keyword %q, which the harness does not enforce", k)
		}
	}
	if t, _ := s.Get("type"); t != "object" {
		return fmt.Errorf(`parameters "type" is not "object"`)
	}
	if ap, ok := s.Get("additionalProperties"); ok && ap != false {
		return fmt.Errorf(`"additionalProperties" must be false when present`)
	}
	pv, _ := s.Get("properties")
	props, ok := pv.(*evidence.Object)
	if !ok {
		return fmt.Errorf(`"properties" is not an object`)
	}
	if !slices.Equal(slices.Sorted(slices.Values(props.Names())), slices.Sorted(slices.Values(want))) {
		return fmt.Errorf("properties %q, the harness takes %q", props.Names(), want)
	}
	for _, n := range props.Names() {
		pv, _ := props.Get(n)
		po, ok := pv.(*evidence.Object)
		if !ok || po.Len() != 1 {
			return fmt.Errorf(`property %q must be exactly {"type":"string"}`, n)
		}
		if t, _ := po.Get("type"); t != "string" {
			return fmt.Errorf(`property %q must be exactly {"type":"string"}`, n)
		}
	}
	rv, has := s.Get("required")
	if !has && len(want) == 0 {
		return nil // no required property, none taken
	}
	req, ok := rv.([]any)
	if !ok {
		return fmt.Errorf(`"required" is not an array`)
	}
	var reqs []string
	for _, r := range req {
		rs, ok := r.(string)
		if !ok {
			return fmt.Errorf(`"required" holds a non-string`)
		}
		reqs = append(reqs, rs)
	}
	if !slices.Equal(slices.Sorted(slices.Values(reqs)), slices.Sorted(slices.Values(want))) {
		return fmt.Errorf("required %q, the harness takes %q", reqs, want)
	}
	return nil
}

// strictArgs returns the tool call's arguments as strings, enforcing the
// declared schema (checked by checkParams to be within what this enforces).
func strictArgs(t *ToolSpec, raw []byte) (map[string]string, error) {
	out := map[string]string{}
	if len(strings.TrimSpace(string(raw))) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	v, err := evidence.Read(raw)
	if err != nil {
		return nil, fmt.Errorf("arguments are not strict JSON: %w", err)
	}
	o, ok := v.(*evidence.Object)
	if !ok {
		return nil, fmt.Errorf("arguments are %s, not an object", evidence.TypeName(v))
	}
	pv, _ := t.Schema.Get("properties")
	props := pv.(*evidence.Object)
	_, closed := t.Schema.Get("additionalProperties")
	for _, m := range o.Members {
		if !props.Has(m.Name) {
			if closed {
				return nil, fmt.Errorf("argument %q is not a parameter of %s", m.Name, t.Name)
			}
			continue
		}
		s, ok := m.Value.(string)
		if !ok {
			return nil, fmt.Errorf("argument %q is %s, not a string", m.Name, evidence.TypeName(m.Value))
		}
		out[m.Name] = s
	}
	for _, n := range props.Names() {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("argument %q is missing", n)
		}
	}
	return out, nil
}
