package evidence

import "sync/atomic"

// Object is a JSON object as the strict reader read it: members in document
// order, names unique. Values are nil, bool, float64, string, []any or
// *Object.
//
// Reading an Object (Get, Has, Len, Names) may be done from many goroutines
// at once; Set and Delete modify it. Members may be appended to directly:
// the name index of a large object is rebuilt on the next lookup once it no
// longer covers every member (published atomically, so concurrent readers
// may each build one and none sees a half-built map). Rename a member with
// Delete and Set, not by assigning to Members[i].Name.
//
// JavaScript orders the array-index names of an object ("0", "1", …) before
// the others; Object keeps the document order, which is what canonical bytes
// and the reference's records depend on (neither uses such names).
type Object struct {
	Members []Member
	index   atomic.Pointer[map[string]int]
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

// find returns the position of the member name: by the index of a large
// object (built here when missing or stale), by a scan of a small one.
func (o *Object) find(name string) (int, bool) {
	if o == nil {
		return 0, false
	}
	if idx := o.indexOf(); idx != nil {
		i, ok := idx[name]
		return i, ok
	}
	for i := range o.Members {
		if o.Members[i].Name == name {
			return i, true
		}
	}
	return 0, false
}

// indexOf returns a name index covering every member of an object with
// more than 8 members (below that a scan is as fast), building and
// publishing a new one when the current one is missing or stale (members
// appended directly). Building never modifies a map another reader holds.
func (o *Object) indexOf() map[string]int {
	if len(o.Members) <= 8 {
		return nil
	}
	if p := o.index.Load(); p != nil && len(*p) == len(o.Members) {
		return *p
	}
	idx := make(map[string]int, len(o.Members))
	for i, m := range o.Members {
		idx[m.Name] = i
	}
	o.index.Store(&idx)
	return idx
}

// Has reports whether the object has a member name.
func (o *Object) Has(name string) bool {
	_, ok := o.Get(name)
	return ok
}

// Set appends the member name, or replaces its value where it exists.
func (o *Object) Set(name string, value any) {
	if i, ok := o.find(name); ok {
		o.Members[i].Value = value
		return
	}
	// Set is a writer (no concurrent readers), so it may extend the index
	// it just validated in place instead of rebuilding it.
	if p := o.index.Load(); p != nil && len(*p) == len(o.Members) {
		(*p)[name] = len(o.Members)
	}
	o.Members = append(o.Members, Member{Name: name, Value: value})
}

// Delete removes the member name, keeping the order of the rest.
func (o *Object) Delete(name string) {
	for i := range o.Members {
		if o.Members[i].Name == name {
			o.Members = append(o.Members[:i], o.Members[i+1:]...)
			o.index.Store(nil)
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
