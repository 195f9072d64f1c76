// Package fault is cleanroom's one refusal contract: the class of an error
// a command ends with, decided where the error is made, and the one mapping
// from that class to the process's exit code (docs/exit-codes.md).
//
// Three classes:
//
//   - [Refused] (exit 1): the input was read and a rule says no. The error
//     names the rule (a sentinel made by [New], or a typed error whose
//     FaultClass method says Refused).
//   - [Unusable] (exit 2): the work cannot be done with what was given — an
//     input that cannot be read (missing, a dangling link, a FIFO, a device
//     or a directory given as a file, a file given as a directory, not
//     permitted), a usage error, an output that already exists.
//   - [NoIsolation] (exit 3): this machine cannot establish the isolation
//     the command needs; the same arguments work where the kernel allows.
//
// An error is classed by wrapping it ([AsRefused], [AsUnusable], [AsNoIsolation]),
// by making it a classed sentinel ([New]), or by giving its type a
// FaultClass() Class method; [ClassOf] sees all three through %w wrapping,
// and the outermost class wins, so a caller that knows better may re-class.
// An error nobody classed is [Unusable] when the kernel's answer says the
// input could not be read or the output exists (fs.ErrNotExist, fs.ErrPermission, fs.ErrExist, ENOTDIR,
// EISDIR, ELOOP), and otherwise Unusable as well: a refusal is a verdict on
// the input, so it must be claimed by the code that applies the rule, never
// inferred from an error no rule made (a disk that fails mid-write must not
// read as "your record is invalid").
//
// This package is not an API outside cleanroom (it is internal/).
package fault
