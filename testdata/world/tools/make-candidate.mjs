// make-candidate.mjs — writes implementer/tally-candidate, the demo's
// candidate implementation: one self-contained executable node script that
// the demo's scripted implementer hands to write_source. It is the reference
// (governance/tally_lib.mjs + governance/tally_adapter.mjs) with ONE
// deliberate difference, so that interop has something real to catch:
//
//   For WIRE_PREPEND_DUPLICATE_MEMBER the candidate reports only the
//   resolution outcome (HOLDOUT-RECIPE-v1.md: "the observation is the
//   resolution outcome"), while the reference also verifies the unmodified
//   fixture and reports candidate.<node> and refusal_set. No predicate reads
//   those members, so both implementations score 20/20 and interop reports
//   two UNCLASSIFIED_FINDINGs (H4.candidate, H4.refusal_set) — a SPEC_GAP:
//   the recipe grammar does not say whether a wire challenge also verifies.
//
// Run from testdata/world: node tools/make-candidate.mjs
import { readFileSync, writeFileSync, chmodSync } from "node:fs";

let lib = readFileSync("governance/tally_lib.mjs", "utf8")
  .replace('import { createHash } from "node:crypto";', 'const { createHash } = require("node:crypto");')
  .replace(/^export /gm, "");
let adapter = readFileSync("governance/tally_adapter.mjs", "utf8")
  .replace(/^import \{ readFileSync, writeFileSync \} from "node:fs";\n/m, 'const { readFileSync, writeFileSync } = require("node:fs");\n')
  .replace(/^import .* from "\.\/tally_lib\.mjs";\n/m, "")
  .replace('const IMPLEMENTATION = "javascript";', 'const IMPLEMENTATION = "candidate";')
  .replace(/^\/\/ tally_adapter\.mjs[\s\S]*?\n(?=import|const)/m, "");
const before = adapter;
adapter = adapter.replace(
  /    \/\/ The fixture is an artifact, so the unmodified fixture is verified too\.\n.*\n.*\n.*\n/,
  "    // The observation of a wire challenge is the resolution outcome only.\n");
if (adapter === before) throw new Error("the deliberate difference was not applied");
const head = `#!/usr/bin/env node
// tally-candidate — holdout adapter for TOY-TALLY-v1, written from the frozen
// package only. Usage: tally-candidate CHALLENGES OUT (run from the world root).
"use strict";
`;
writeFileSync("implementer/tally-candidate", head + lib.replace(/^\/\/ tally_lib\.mjs[\s\S]*?\n(?=const|import)/m, "") + "\n" + adapter);
chmodSync("implementer/tally-candidate", 0o755);
