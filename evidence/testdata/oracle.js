// oracle.js — JavaScript's reading of JSON documents, for the evidence
// package's differential test (differential_test.go).
//
// Input: one document per line on stdin, base64-encoded. Output: one line
// per input, in order:
//   A <dump>              JSON.parse accepted it and no ambiguity was found;
//   R <class> <offset>    refused; offset is a byte offset into the input,
//                         or -1 when JSON.parse's message gives none that
//                         means the same thing as the Go reader's offset.
//
// The decision follows the strict reader's rules in JavaScript terms:
// decode with a fatal UTF-8 TextDecoder that keeps a BOM (ignoreBOM: true),
// parse with JSON.parse, then look for the ambiguities JSON.parse reads
// silently — a lone surrogate, a non-finite number, a repeated member name,
// nesting deeper than 64 — in one scan of the text, reporting the first by
// position. The dump keeps what JSON.stringify loses (-0).
'use strict';

const readline = require('node:readline');

const MAX_SIZE = 8 * 1024 * 1024;
const MAX_DEPTH = 64;
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function byteOffset(text, index) {
  return Buffer.byteLength(text.slice(0, index), 'utf8');
}

// dump renders a JSON.parse result: numbers as Number::toString with -0 as
// "-0", strings as JSON.stringify writes them, object members sorted by
// UTF-16 code units (the default sort).
function dump(v) {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'boolean': return String(v);
    case 'number': return Object.is(v, -0) ? '-0' : String(v);
    case 'string': return JSON.stringify(v);
  }
  if (Array.isArray(v)) return '[' + v.map(dump).join(',') + ']';
  const keys = Object.keys(v).sort();
  return '{' + keys.map((k) => JSON.stringify(k) + ':' + dump(v[k])).join(',') + '}';
}

const scalar = /-?[0-9.eE+-]+|true|false|null/y;

function grammarClass(message) {
  if (/after JSON/.test(message)) return 'trailing-data';
  if (/Bad control character/.test(message)) return 'control-character';
  if (/Bad (escaped character|Unicode escape)/.test(message)) return 'bad-escape';
  return 'syntax';
}

// firstLoneEscape returns the index in literal (a JSON string literal,
// quotes included) of the first \u escape naming half a surrogate pair, or -1.
function firstLoneEscape(literal) {
  for (let i = 1; i < literal.length - 1; i++) {
    if (literal[i] !== '\\') continue;
    if (literal[i + 1] !== 'u') { i++; continue; }
    const u = parseInt(literal.slice(i + 2, i + 6), 16);
    if (u >= 0xdc00 && u <= 0xdfff) return i;
    if (u >= 0xd800 && u <= 0xdbff) {
      const next = literal.slice(i + 6, i + 8) === '\\u' ? parseInt(literal.slice(i + 8, i + 12), 16) : -1;
      if (next >= 0xdc00 && next <= 0xdfff) { i += 11; continue; }
      return i;
    }
    i += 5;
  }
  return -1;
}

// ambiguity scans a text JSON.parse accepted, token by token, and returns
// [class, index] of the first ambiguity, or null.
function ambiguity(text) {
  const stack = []; // {names: Set|null, expectName: bool}
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i];
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === ',' || c === ':') {
      if (c === ',' && stack.length && stack[stack.length - 1].names) stack[stack.length - 1].expectName = true;
      i++;
      continue;
    }
    const top = stack.length ? stack[stack.length - 1] : null;
    const isName = top !== null && top.names !== null && top.expectName && c === '"';
    if (!isName && c !== '}' && c !== ']' && stack.length > MAX_DEPTH) return ['too-deep', i];
    if (c === '{' || c === '[') {
      stack.push({ names: c === '{' ? new Set() : null, expectName: c === '{' });
      i++;
      continue;
    }
    if (c === '}' || c === ']') { stack.pop(); i++; continue; }
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      const literal = text.slice(i, j + 1);
      const lone = firstLoneEscape(literal);
      if (lone >= 0) return ['lone-surrogate', i + lone];
      if (isName) {
        const name = JSON.parse(literal);
        if (top.names.has(name)) return ['duplicate-name', i];
        top.names.add(name);
        top.expectName = false;
      }
      i = j + 1;
      continue;
    }
    // Sticky, not a slice of the text: a number literal may be longer than
    // any slice (thousands of digits).
    scalar.lastIndex = i;
    const m = scalar.exec(text);
    const tok = m[0];
    if (tok !== 'true' && tok !== 'false' && tok !== 'null' && !Number.isFinite(Number(tok))) {
      return ['non-finite-number', i];
    }
    i += tok.length;
  }
  return null;
}

function answer(buf) {
  if (buf.length === 0) return 'R empty 0';
  if (buf.length > MAX_SIZE) return 'R too-large ' + MAX_SIZE;
  if (buf.length >= 3 && buf[0] === 0xef && buf[1] === 0xbb && buf[2] === 0xbf) return 'R bom 0';
  let text;
  try {
    text = decoder.decode(buf);
  } catch (e) {
    return 'R invalid-utf8 -1';
  }
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return 'R ' + grammarClass(e.message) + ' -1';
  }
  const amb = ambiguity(text);
  if (amb !== null) return 'R ' + amb[0] + ' ' + byteOffset(text, amb[1]);
  return 'A ' + dump(v);
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
rl.on('line', (line) => { out.push(answer(Buffer.from(line, 'base64'))); });
rl.on('close', () => { process.stdout.write(out.join('\n') + (out.length ? '\n' : '')); });
