package fault

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// Class is what kind of failure an error is, and so which exit code a
// command that ends with it returns.
type Class uint8

const (
	// Unclassified is the class of nil and of an error nobody classed.
	Unclassified Class = iota
	// Refused: the input was read and a rule says no (exit 1).
	Refused
	// Unusable: an input that cannot be read, a usage error, an output
	// that exists (exit 2). The default for unclassified errors.
	Unusable
	// NoIsolation: this machine cannot isolate as the command needs (exit 3).
	NoIsolation
)

func (c Class) String() string {
	switch c {
	case Refused:
		return "refused"
	case Unusable:
		return "unusable"
	case NoIsolation:
		return "no isolation"
	}
	return "unclassified"
}

// Classed is implemented by an error type that knows its class.
type Classed interface {
	error
	FaultClass() Class
}

// sentinel is an errors.New with a class.
type sentinel struct {
	msg   string
	class Class
}

func (s *sentinel) Error() string     { return s.msg }
func (s *sentinel) FaultClass() Class { return s.class }

// New returns a sentinel error of class c: compared with errors.Is as an
// errors.New value is, and classed wherever it is wrapped.
func New(c Class, msg string) error { return &sentinel{msg: msg, class: c} }

// classed wraps an error with a class.
type classed struct {
	class Class
	err   error
}

func (e *classed) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *classed) Unwrap() error     { return e.err }
func (e *classed) FaultClass() Class { return e.class }

// As classes err as c (AsRefused, AsUnusable and AsNoIsolation name the
// three; As serves a class computed from a cause, as RuleClass gives).
func As(c Class, err error) error { return &classed{c, err} }

// AsRefused classes err as Refused. A nil err means the problems were already
// shown: the command ends with exit 1 and prints no message of its own.
func AsRefused(err error) error { return &classed{Refused, err} }

// AsUnusable classes err as Unusable (nil: already shown, as for AsRefused).
func AsUnusable(err error) error { return &classed{Unusable, err} }

// AsNoIsolation classes err as NoIsolation (nil: already shown, as for AsRefused).
func AsNoIsolation(err error) error { return &classed{NoIsolation, err} }

// status is another process's exit status, passed through.
type status struct{ code int }

func (s *status) Error() string { return fmt.Sprintf("exit status %d", s.code) }

// Status ends a command with code as its exit status: the status of the
// process it ran on the caller's behalf (sandbox exec's CMD, the room), not
// a class of its own. Its message is never shown.
func Status(code int) error { return &status{code} }

// ClassOf returns err's class: the outermost class found through %w
// wrapping, else Unusable when the kernel said the input cannot be read,
// else Unclassified (nil included).
func ClassOf(err error) Class {
	if err == nil {
		return Unclassified
	}
	var c Classed
	if errors.As(err, &c) {
		return c.FaultClass()
	}
	if unreadable(err) {
		return Unusable
	}
	return Unclassified
}

// unreadable reports whether err is the kernel saying an input cannot be
// read at all: missing (a dangling link included), not permitted, a file
// where a directory was needed or the reverse, a symbolic link where a
// reader that follows none opened it.
func unreadable(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrExist) ||
		errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ELOOP)
}

// ExitCode is the one mapping from the error a command ended with to its
// exit status: 0 for nil, a passed-through Status as is, 1 Refused,
// 3 NoIsolation, and 2 for Unusable and for everything unclassified.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var s *status
	if errors.As(err, &s) {
		return s.code
	}
	switch ClassOf(err) {
	case Refused:
		return 1
	case NoIsolation:
		return 3
	}
	return 2
}

// Shown reports whether err's message was already shown by the command
// (it was classed from nil, or it is a passed-through Status): the caller
// prints nothing more.
func Shown(err error) bool {
	var s *status
	if errors.As(err, &s) {
		return true
	}
	var c *classed
	return errors.As(err, &c) && c.err == nil
}

// RuleClass is the class of a rule's error type that keeps its cause: an
// input that could not be read at all (the cause is Unusable, or the
// kernel's "missing", "not permitted", "not a directory") stays Unusable —
// the rule never saw it — and anything else, no cause included, is Refused.
func RuleClass(cause error) Class {
	if cause != nil && ClassOf(cause) == Unusable {
		return Unusable
	}
	return Refused
}
