package evidence

// Object is a JSON object as the strict reader read it: members in document
// order, names unique. Values are nil, bool, float64, string, []any or
// *Object.
//
// JavaScript orders the array-index names of an object ("0", "1", …) before
// the others; Object keeps the document order, which is what canonical bytes
// and the reference's records depend on (neither uses such names).
type Object struct {
	Members []Member
	index   map[string]int
}

// Member is one name/value pair of an [Object].
type Member struct {
	Name  string
	Value any
}

// NewObject returns an object with the given members, in order. A later
// member with the same name replaces the earlier one's value in place.
func NewObject(members ...Member) *Object {
	o := &Object{}
	for _, m := range members {
		o.Set(m.Name, m.Value)
	}
	return o
}

// Len returns the number of members.
func (o *Object) Len() int {
	if o == nil {
		return 0
	}
	return len(o.Members)
}

// Get returns the value of the member name and whether it exists.
func (o *Object) Get(name string) (any, bool) {
	if o == nil {
		return nil, false
	}
	if o.index == nil && len(o.Members) > 8 {
		o.reindex()
	}
	if o.index != nil {
		i, ok := o.index[name]
		if !ok {
			return nil, false
		}
		return o.Members[i].Value, true
	}
	for _, m := range o.Members {
		if m.Name == name {
			return m.Value, true
		}
	}
	return nil, false
}

// Has reports whether the object has a member name.
func (o *Object) Has(name string) bool {
	_, ok := o.Get(name)
	return ok
}

// Set appends the member name, or replaces its value where it exists.
func (o *Object) Set(name string, value any) {
	if o.index == nil && len(o.Members) > 8 {
		o.reindex()
	}
	if o.index != nil {
		if i, ok := o.index[name]; ok {
			o.Members[i].Value = value
			return
		}
		o.index[name] = len(o.Members)
	} else {
		for i := range o.Members {
			if o.Members[i].Name == name {
				o.Members[i].Value = value
				return
			}
		}
	}
	o.Members = append(o.Members, Member{Name: name, Value: value})
}

// Delete removes the member name, keeping the order of the rest.
func (o *Object) Delete(name string) {
	for i := range o.Members {
		if o.Members[i].Name == name {
			o.Members = append(o.Members[:i], o.Members[i+1:]...)
			o.index = nil
			return
		}
	}
}

// Names returns the member names in order.
func (o *Object) Names() []string {
	names := make([]string, len(o.Members))
	for i, m := range o.Members {
		names[i] = m.Name
	}
	return names
}

func (o *Object) reindex() {
	o.index = make(map[string]int, len(o.Members))
	for i, m := range o.Members {
		o.index[m.Name] = i
	}
}

// Plain converts a value read by [Read] into the plain Go form other
// libraries take: *Object becomes map[string]any, recursively through
// arrays and maps (the result shares nothing with v); everything else is
// returned as is. Member order is lost, so Plain is for validation,
// never for bytes that are hashed.
func Plain(v any) any {
	switch x := v.(type) {
	case *Object:
		m := make(map[string]any, len(x.Members))
		for _, mem := range x.Members {
			m[mem.Name] = Plain(mem.Value)
		}
		return m
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = Plain(e)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Plain(e)
		}
		return out
	default:
		return v
	}
}
