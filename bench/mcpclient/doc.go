// Package mcpclient is the one MCP client of the side-by-side benchmarks: a
// small JSON-RPC 2.0 client over a child process's stdin/stdout
// (newline-delimited messages, the MCP stdio transport), written without any
// MCP SDK so that the clean room and its peer are driven by exactly the same
// bytes and the same code path. It is a measuring instrument, not a general
// client: one request at a time, no server-initiated requests, and every call
// has a deadline.
//
// # Security considerations
//
// It starts the server it is given and trusts nothing it says: responses
// are matched to the request id, every call is bounded by its context, and
// a server that stops writing cannot hang the caller. It is meant for
// benchmarks and tests only.
//
// # No API promise
//
// This package is cleanroom's own machinery, not an API: it is exported for
// the cleanroom binaries and their tests, and any identifier in it may
// change in any commit, without notice. docs/design.md lists the packages
// meant to be imported.
package mcpclient
