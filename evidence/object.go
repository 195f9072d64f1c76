package evidence

// Object is a JSON object as the strict reader read it: members in document
// order, names unique. Values are nil, bool, float64, string, []any or
// *Object.
//
// Reading an Object (Get, Has, Len, Names) never modifies it, so a value
// [Read] returned may be read from many goroutines at once. Set and Delete
// modify it. Members may be appended to directly; Get then still finds
// them (the lookup index is used only while it covers every member). Rename
// a member with Delete and Set, not by assigning to Members[i].Name.
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
	if i, ok := o.find(name); ok {
		return o.Members[i].Value, true
	}
	return nil, false
}

// find returns the position of the member name. It only reads: the index
// is used while it covers every member, otherwise the members are scanned.
func (o *Object) find(name string) (int, bool) {
	if o == nil {
		return 0, false
	}
	if o.index != nil && len(o.index) == len(o.Members) {
		i, ok := o.index[name]
		return i, ok
	}
	for i := range o.Members {
		if o.Members[i].Name == name {
			return i, true
		}
	}
	return 0, false
}

// Has reports whether the object has a member name.
func (o *Object) Has(name string) bool {
	_, ok := o.Get(name)
	return ok
}

// Set appends the member name, or replaces its value where it exists.
func (o *Object) Set(name string, value any) {
	if len(o.index) != len(o.Members) {
		o.index = nil // stale: members were appended directly
	}
	o.indexIfLarge()
	if i, ok := o.find(name); ok {
		o.Members[i].Value = value
		return
	}
	if o.index != nil {
		o.index[name] = len(o.Members)
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
	if o == nil {
		return nil
	}
	names := make([]string, len(o.Members))
	for i, m := range o.Members {
		names[i] = m.Name
	}
	return names
}

// indexIfLarge builds the name index of an object with more than 8
// members (below that a scan is as fast) when it has none.
func (o *Object) indexIfLarge() {
	if o.index != nil || len(o.Members) <= 8 {
		return
	}
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
