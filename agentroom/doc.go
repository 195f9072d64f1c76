// Package agentroom runs any agent command agent-blind against the clean
// room (`cleanroom room agent`): the agent runs in the candidate sandbox
// (package sandbox: fresh mount, pid, ipc, uts and network namespaces, a
// read-only root of the host's toolchain, no capabilities) with a fresh,
// empty tmpfs as its HOME and working directory, the environment
// variables the operator named and nothing else of the host, and reaches
// two things only, both through listeners room agent opens inside the
// sandbox's network namespace before the agent starts:
//
//   - the clean room, as its only MCP server: the agent's MCP
//     configuration runs the relay (this program, bound read-only at
//     RelayPath, with RelayArgs), which connects to the abstract unix
//     socket RelaySocket and hands room agent its own stdin and stdout
//     (pipes or unix socket pairs, checked on both sides) or else
//     copies its stdio to the connection; room agent starts a room sealed
//     outside the sandbox exactly as `room serve` seals it (harness.Serve)
//     with those descriptors (or the connection) as its stdin and stdout,
//     so that the agent's client and the room exchange bytes directly,
//     and closes any later connection
//     (the same room is first run on an empty session in a scratch
//     directory, before the agent starts, so that a package it refuses
//     costs no agent run);
//   - an HTTP CONNECT proxy on the namespace's loopback (ProxyAddress,
//     named in HTTPS_PROXY and its spellings), whose listener lives in the
//     sandbox's namespace and whose dials leave from the host's: it
//     connects only to allowlisted host names and ports, resolved on the
//     host, and records every connection (host, port, address, bytes each
//     way, time).
//
// The transcript is the room's (start, one line per MCP call, end) with an
// "agent" line appended: the command, its --version answer, the
// environment variable names, the allowlist, the binds, every proxied or
// refused connection, the relay connections and the sandbox's outcome and
// isolation record. What the agent writes through write_source is the
// room's workspace; nothing else of the sandbox survives it.
//
// # Security Considerations
//
// The sandbox's network namespace is the one the sandbox checks (only lo,
// no route: sandbox.CheckIsolation, full isolation) — the proxy adds no
// link and no route, only a listening socket, so the check still proves
// there is no path out but the proxy's application-level policy. The
// allowlist is decided on the host name as the agent wrote it, before any
// lookup (a name off the list is never resolved: no DNS channel); a
// looked-up name that resolves to loopback, link-local, multicast or the
// unspecified address is not dialled (no rebinding onto the host's own
// services or the sealed store); only Resolve, the operator's explicit
// mapping, can point a name at such an address. The abstract socket is
// reachable from the sandbox's namespace only; a connection whose first
// message is not a relay's is closed, descriptors handed over are taken
// only if they are pipes or anonymous unix socket pairs (a plain byte
// stream: never a file, device or other socket the agent opened), and
// what they carry is read by the room's own MCP gate, which refuses
// anything but MCP. A room the agent's descriptors keep alive past the
// sandbox (its stdin's other end held by the room itself) is ended by
// room agent (roomStopGrace). What is not defended: what an allowlisted
// host does with what the agent sends it (the model provider sees the
// package, by design), covert timing, and the other end of a socket pair
// handed on by the agent (SCM_RIGHTS) to a service outside that trusts
// its senders' SCM_CREDENTIALS (reachable only through a socket the
// operator binds into the sandbox).
//
// # No API promise
//
// This package is cleanroom's own machinery, not an API: it is exported for
// the cleanroom binaries and their tests, and any identifier in it may
// change in any commit, without notice. docs/design.md lists the packages
// meant to be imported.
package agentroom
