package experiment

import "slices"

// Status is a state of the run state machine (TRVM-FORMATS §5.4).
type Status string

// The five states. A candidate receives challenge bytes only at a witnessed
// REVEALED or COMPLETE.
const (
	StatusPinned          Status = "PINNED"
	StatusCandidateFrozen Status = "CANDIDATE_FROZEN"
	StatusRevealed        Status = "REVEALED"
	StatusComplete        Status = "COMPLETE"
	StatusAborted         Status = "ABORTED"
)

// States lists the states in lifecycle order.
var States = []Status{StatusPinned, StatusCandidateFrozen, StatusRevealed, StatusComplete, StatusAborted}

// next is the transition table NEXT. It is the only place a step is allowed.
var next = map[Status][]Status{
	StatusPinned:          {StatusCandidateFrozen, StatusAborted},
	StatusCandidateFrozen: {StatusRevealed, StatusAborted},
	StatusRevealed:        {StatusComplete, StatusAborted},
	StatusComplete:        nil,
	StatusAborted:         nil,
}

// Valid reports whether s is one of the five states.
func (s Status) Valid() bool { _, ok := next[s]; return ok }

// Terminal reports whether no transition leaves s (COMPLETE, ABORTED).
func (s Status) Terminal() bool { return s == StatusComplete || s == StatusAborted }

// Revealed reports whether a candidate may see the challenges at s, given a
// chain that witnesses s.
func (s Status) Revealed() bool { return s == StatusRevealed || s == StatusComplete }

// CanMoveTo reports whether the state machine permits s → t.
func (s Status) CanMoveTo(t Status) bool { return slices.Contains(next[s], t) }
