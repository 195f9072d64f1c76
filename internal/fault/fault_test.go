package fault_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"

	"github.com/cleanroom-dev/cleanroom/internal/fault"
)

// errRule is a rule's sentinel, as a package declares one.
var errRule = fault.New(fault.Refused, "a rule")

// typed is an error type that classes itself.
type typed struct{}

func (typed) Error() string           { return "typed" }
func (typed) FaultClass() fault.Class { return fault.NoIsolation }

func TestExitCode(t *testing.T) {
	_, statErr := os.Stat("/nonexistent/fault-test")
	for _, tc := range []struct {
		name  string
		err   error
		class fault.Class
		code  int
	}{
		{"nil", nil, fault.Unclassified, 0},
		{"unclassified", errors.New("disk on fire"), fault.Unclassified, 2},
		{"classed sentinel, wrapped", fmt.Errorf("file x: %w", errRule), fault.Refused, 1},
		{"typed, wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", typed{})), fault.NoIsolation, 3},
		{"AsRefused", fault.AsRefused(errors.New("no")), fault.Refused, 1},
		{"AsUnusable", fault.AsUnusable(errRule), fault.Unusable, 2},
		{"outermost wins", fault.AsRefused(fmt.Errorf("x: %w", fault.AsUnusable(errors.New("y")))), fault.Refused, 1},
		{"AsNoIsolation", fault.AsNoIsolation(errors.New("no userns")), fault.NoIsolation, 3},
		{"missing file", statErr, fault.Unusable, 2},
		{"permission", fmt.Errorf("x: %w", fs.ErrPermission), fault.Unusable, 2},
		{"output exists", fmt.Errorf("x: %w", fs.ErrExist), fault.Unusable, 2},
		{"not a directory", &fs.PathError{Op: "open", Path: "f/x", Err: syscall.ENOTDIR}, fault.Unusable, 2},
		{"a link where none is followed", &fs.PathError{Op: "open", Path: "l", Err: syscall.ELOOP}, fault.Unusable, 2},
		{"a rule over a missing file", fault.AsRefused(statErr), fault.Refused, 1},
		{"status", fmt.Errorf("x: %w", fault.Status(124)), fault.Unclassified, 124},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fault.ClassOf(tc.err); got != tc.class {
				t.Errorf("ClassOf = %v, want %v", got, tc.class)
			}
			if got := fault.ExitCode(tc.err); got != tc.code {
				t.Errorf("ExitCode = %d, want %d", got, tc.code)
			}
		})
	}
	if !errors.Is(fmt.Errorf("x: %w", errRule), errRule) {
		t.Error("a classed sentinel is not found by errors.Is")
	}
}

func TestShown(t *testing.T) {
	for _, tc := range []struct {
		err   error
		shown bool
	}{
		{fault.AsRefused(nil), true},
		{fault.Status(3), true},
		{fault.AsRefused(errors.New("x")), false},
		{errors.New("x"), false},
	} {
		if got := fault.Shown(tc.err); got != tc.shown {
			t.Errorf("Shown(%#v) = %v, want %v", tc.err, got, tc.shown)
		}
	}
}

func TestRuleClass(t *testing.T) {
	_, statErr := os.Stat("/nonexistent/fault-test")
	for _, tc := range []struct {
		cause error
		want  fault.Class
	}{
		{nil, fault.Refused},
		{errors.New("x"), fault.Refused},
		{errRule, fault.Refused},
		{statErr, fault.Unusable},
		{fault.AsUnusable(errors.New("fifo")), fault.Unusable},
	} {
		if got := fault.RuleClass(tc.cause); got != tc.want {
			t.Errorf("RuleClass(%v) = %v, want %v", tc.cause, got, tc.want)
		}
	}
}
