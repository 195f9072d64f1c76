// Package harness owns the clean room: the sealed MCP server that serves a
// verified blind package through exactly three tools — list_files,
// read_file, write_source — its transcript, and the built-in agent loop
// that relays a model's tool calls to it.
//
// Serve starts the binary again in fresh mount and network namespaces (the
// seal stage: tmpfs, emit of the pinned bpkg, read-only at the superblock,
// asserted from the kernel, see package sandbox/seal), which execs the serve
// stage with no privileges; that stage opens the view's mount point once,
// asserts the seal on that descriptor (seal.OpenSealed) and measures the
// view through the same descriptor with pkgwalk.OpenViewAt as its first act
// on the package (every rule of the walk, every byte hashed, refused unless
// it is the pinned bpkg), keeps the
// verified bytes in memory and never reads the package from disk again.
// The seal stage's copy (pkgwalk.Deliver) is not measured before the seal:
// it is measured once, after it can no longer change. The tools'
// names, descriptions and input schemas, the server instructions (SYSTEM)
// and the prompt (USER) are read from the sealed
// experiment/CLEAN-ROOM-PROMPT-v1.md; the harness adds no instruction of its
// own and refuses to start if the file is absent, has two readings of a
// block, or declares tools other than exactly the three it implements.
// The command line's binary routes the stages from package roomstage's init
// function, before its other initialisers. Both stages run with the
// collector's pacing off and their heap budgeted by a soft memory limit:
// before verification, twice the view's size; once the view is verified,
// the verified bytes plus headroom, so that the server's heap stays near
// the package's size instead of growing to twice it.
//
// read_file is an exact dictionary lookup on manifested paths: "..", an
// absolute path, "./", a directory or a case variant are not defended
// against but unrepresentable, and the refusal names the key. write_source
// writes only into a workspace the server created (it must not exist),
// with portable relative paths resolved by openat2 RESOLVE_BENEATH under
// the workspace descriptor, size- and count-capped, replacing by rename so
// a planted link is never written through; nothing written can be read back.
//
// # Security Considerations
//
// The room has no network (an empty network namespace, not even lo up) and
// no capability. The relay (room drive) is a separate process that holds
// the model's API key; the sealed server's environment is empty. The relay
// retries transient failures of the endpoint, answers the model's mistakes
// (a tool that does not exist, arguments that are not JSON) as tool
// errors, stops at named budgets, records the conversation turn by turn,
// and resumes an interrupted session (ReadResumable: the record verified,
// the workspace held to it, the fresh room's opening compared) in a room
// that reopens the workspace (ReopenWorkspace) and appends to the
// transcript (ResumeTranscript). Inbound MCP frames are lines, capped
// (lineTransport), and what reaches
// the SDK is gated so that a hostile client cannot grow the server's
// memory: frames are lines (MCP's stdio framing), a line that is not
// JSON is answered with a parse error (-32700) and the session goes on, a
// JSON-RPC batch is served only under 2025-03-26 (the revision that
// requires it) with its answers held within a budget, and refused with an
// error naming errFrameBatch under any other; only the handshake
// (initialize, or server/discover: the revisions, the capabilities and the
// SYSTEM block), ping, tools/* and prompts/* are served (any other method
// is method-not-found, errMethodNotServed; other notifications are
// dropped), no listChanged is advertised (nothing changes), and one call is
// answered before the next frame is read. What is not
// defended: an operator with write access to the package before it is
// pinned, the host's root, and which weights a model provider runs.
//
// # No API promise
//
// This package is cleanroom's own machinery, not an API: it is exported for
// the cleanroom binaries and their tests, and any identifier in it may
// change in any commit, without notice. docs/design.md lists the packages
// meant to be imported.
package harness
