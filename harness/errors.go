package harness

import "fmt"

// RefusalError is a refused input of the room — the prompt file, the
// workspace, a write_source call — naming the path (quoted: a hostile name
// must not write control characters to a terminal) and the rule, one of the
// exported sentinels, matched with errors.Is.
type RefusalError struct {
	Path   string
	Rule   error
	Detail string
}

func (e *RefusalError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("%q: %v", e.Path, e.Rule)
	}
	return fmt.Sprintf("%q: %v (%s)", e.Path, e.Rule, e.Detail)
}

// Unwrap lets errors.Is match the Rule.
func (e *RefusalError) Unwrap() error { return e.Rule }
