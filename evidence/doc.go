// Package evidence is cleanroom's trust boundary for JSON.
//
// Every document cleanroom reads as evidence — release records, run records,
// receipts, RESULT files, challenges, observation documents, summaries —
// crosses [Read] first, and every identity cleanroom computes (srel, bpkg,
// run_id) hashes the bytes of [Canonical]. One reader and one encoder: if two
// readers could disagree about the same bytes, one measurement could be
// attributed two ways.
//
// # What Read accepts
//
// Read accepts exactly the RFC 8259 JSON texts that JavaScript's JSON.parse
// reads unambiguously, and reads them as JSON.parse does: numbers are IEEE 754
// doubles (so 9007199254740993 reads as 9007199254740992, 1e-400 as 0, and -0
// keeps its sign), "__proto__" is an ordinary member name, and members keep
// their document order (see [Object]).
//
// # What Read refuses, and why
//
// Each refusal is an [*Error] whose Class names the rule (see the Class
// constants), with the byte offset and, inside a document, the JSON Pointer.
// Beyond the RFC 8259 grammar (class "syntax", including whitespace other
// than SP, TAB, LF and CR, raw control characters and unknown escapes) it
// refuses only inputs that have no single agreed reading:
//
//   - "empty" and "too-large" (more than [MaxSize] bytes): bounded work;
//   - "bom": a leading UTF-8 byte order mark, which some readers strip and
//     others reject;
//   - "invalid-utf8": bytes that are not UTF-8 decode differently in every
//     lenient decoder;
//   - "lone-surrogate": a \u escape naming half a surrogate pair has no
//     Unicode scalar value; JSON.parse keeps the code unit, Go cannot;
//   - "non-finite-number": a number such as 1e400 that a double cannot hold
//     (JSON.parse reads Infinity, which no JSON text can write back);
//   - "duplicate-name": two members of one object with the same name after
//     unescaping (JSON.parse keeps the last, other readers the first);
//   - "too-deep": a value nested deeper than [MaxDepth] (top level is depth 0);
//   - "trailing-data": anything but whitespace after the document.
//
// Precedence: size, then the BOM, then UTF-8 (the bytes are decoded before
// they are parsed), then the first fault in document order — except that an
// ambiguous class (lone-surrogate, non-finite-number, duplicate-name,
// too-deep) is reported only for a text that is otherwise RFC 8259 grammar.
// If the text also breaks the grammar further on, that fault is reported
// instead, as JSON.parse reports it; so an ambiguous refusal always names a
// text JSON.parse reads. (Nesting beyond 9000 levels is not re-checked.)
//
// # Canonical bytes
//
// [Canonical] writes RFC 8785 (JCS): members sorted by UTF-16 code units,
// numbers as ECMAScript Number::toString, strings escaped as JSON.stringify
// escapes them, no whitespace. Non-finite numbers and strings that are not
// valid UTF-8 (the Go image of a lone surrogate) are errors, never clamped or
// replaced. [Stringify] writes JSON.stringify(v, null, indent) bytes, the
// form of the reference's records and receipts.
//
// # Security considerations
//
// The reader is built on go-json-experiment/json's jsontext tokenizer, whose
// defaults already refuse duplicate names, invalid UTF-8 and lone surrogates.
// Size, depth, non-finite numbers, the BOM and trailing data are checked here.
// Nothing in this package offers a lenient mode: a caller that needs one is
// reading something that is not evidence.
package evidence
