// Package schema compiles and applies JSON Schemas to evidence documents
// (values read by evidence.Read): draft 2020-12 unless a document's
// $schema names another draft, with the x-sorted extension keyword of the
// TRVM observation schema, no loader (a schema never reads a file or the
// network), and refusals as *evidence.SchemaError with every leaf cause in
// a stable order.
//
// It is its own package so that the binaries that never validate a schema
// do not link github.com/santhosh-tekuri/jsonschema/v6, whose package
// initialisation (upstream's) compiles every draft's metaschema: about 3 ms
// and 1.7 MB of allocations at every start of a binary that links it. The
// room binary (cmd/cleanroom-room), the room stages and the sandbox's init
// routing link evidence but not this package; TestNotLinkedByTheRoom pins
// that.
package schema
