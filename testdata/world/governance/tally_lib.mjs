// tally_lib.mjs — the reference implementation of the toy TALLY protocol
// (docs/spec/proof-wire/TOY-TALLY-v1.md). Written for cleanroom's synthetic
// world; it imports only node builtins.
import { createHash } from "node:crypto";

export const LEAF = "TOY-TALLY-LEAF-v1";
export const COMP = "TOY-TALLY-COMPOSITION-v1";
export const CERT = "TOY-VERIFIED-TALLY-v1";
export const POLICY = Object.freeze({ max_depth: 8, max_operands: 4 });

const STRUCT_INTS = [
  "edges", "unique_artifacts", "max_depth_below", "bytes_if_inlined", "unique_bytes",
  "films_below_by_edge_multiplicity", "films_below_distinct",
  "cases_below_by_edge_multiplicity", "cases_below_distinct",
];

// canon: RFC 8785 text (names sorted by UTF-16 code units, numbers as
// ECMAScript Number::toString, strings as JSON.stringify escapes them).
export function canon(v) {
  if (v === null || typeof v === "boolean" || typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number") {
    if (!Number.isFinite(v)) throw new Error("non-finite number");
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return "[" + v.map(canon).join(",") + "]";
  if (typeof v === "object") {
    return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canon(v[k])).join(",") + "}";
  }
  throw new Error("not a JSON value");
}

const tagged = (tag, text) => createHash("sha256").update(tag + "|" + text, "utf8").digest("hex");
export const bytesOf = (a) => Buffer.byteLength(canon(a), "utf8");
export const rootOf = (a) => "root-" + tagged("TOY-ARTIFACT-ROOT-v1", canon(a));
export const nclaimOf = (claim) => "nclaim-" + tagged("TOY-NESTED-CLAIM-v1", canon({ connective: claim.connective, operands: claim.operands }));
export function structSemOf(s) {
  const body = {};
  for (const k of STRUCT_INTS) body[k] = s[k];
  return "nstruct-" + tagged("TOY-STRUCTURE-v1", canon(body));
}
export function vclaimOf(a) {
  if (a.protocol === LEAF) return "vclaim-" + tagged(CERT, canon({ protocol: LEAF, tally: a.tally }));
  return "vclaim-" + tagged(CERT, canon({ protocol: COMP, nested_claim_sem_id: a.claim?.nested_claim_sem_id }));
}

// resolveBytes: the observable resolution outcome of serving `bytes` under
// `root` (TOY-TALLY-v1 §3): invalid-utf8, not-json, non-canonical-wire,
// root-mismatch or ok.
export function resolveBytes(bytes, root) {
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return { outcome: "invalid-utf8" };
  }
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    return { outcome: "not-json" };
  }
  if (canon(value) !== text) return { outcome: "non-canonical-wire" };
  if (rootOf(value) !== root) return { outcome: "root-mismatch" };
  return { outcome: "ok", value };
}

// stats: the structural facts below a composition node, derived from the
// artifacts its references resolve to (never from what it carries).
export function stats(a, store, seen = []) {
  if (a.protocol !== COMP) return null;
  let edges = 0, depth = 0, inlined = 0, filmsMult = 0, casesMult = 0;
  const below = new Map();
  for (const ref of a.references ?? []) {
    const child = store.get(ref.artifact_root);
    if (!child || seen.includes(ref.artifact_root)) return null;
    const cb = bytesOf(child);
    below.set(ref.artifact_root, child);
    edges += 1;
    inlined += cb;
    if (child.protocol === LEAF) {
      filmsMult += child.tally.films;
      casesMult += child.tally.cases;
      depth = Math.max(depth, 1);
      continue;
    }
    const cs = stats(child, store, [...seen, ref.artifact_root]);
    if (!cs) return null;
    edges += cs.edges;
    inlined += cs.bytes_if_inlined;
    filmsMult += cs.films_below_by_edge_multiplicity;
    casesMult += cs.cases_below_by_edge_multiplicity;
    depth = Math.max(depth, 1 + cs.max_depth_below);
    for (const [r, x] of cs.below) below.set(r, x);
  }
  let uniqueBytes = 0, filmsDistinct = 0, casesDistinct = 0;
  for (const x of below.values()) {
    uniqueBytes += bytesOf(x);
    if (x.protocol === LEAF) {
      filmsDistinct += x.tally.films;
      casesDistinct += x.tally.cases;
    }
  }
  return {
    edges, unique_artifacts: below.size, max_depth_below: depth, bytes_if_inlined: inlined,
    unique_bytes: uniqueBytes, films_below_by_edge_multiplicity: filmsMult, films_below_distinct: filmsDistinct,
    cases_below_by_edge_multiplicity: casesMult, cases_below_distinct: casesDistinct, below,
  };
}

// compose: a sealed composition node over children (artifacts), in operand
// order; references list the same children.
export function compose(children, store) {
  const operands = children.map(vclaimOf);
  const node = {
    protocol: COMP,
    claim: { connective: "AND", operands, nested_claim_sem_id: "" },
    references: children.map((c) => ({ artifact_root: rootOf(c), verified_claim_sem_id: vclaimOf(c) })),
    structure: {},
  };
  node.claim.nested_claim_sem_id = nclaimOf(node.claim);
  const st = stats(node, store);
  for (const k of STRUCT_INTS) node.structure[k] = st[k];
  node.structure.structure_sem_id = structSemOf(node.structure);
  return node;
}

const isObj = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const onlyKeys = (o, allowed) => Object.keys(o).every((k) => allowed.includes(k));
const isCount = (v) => Number.isInteger(v) && v >= 0;

// check: the refusal set of verifying artifact `a` against `store` with the
// caller's options (TOY-TALLY-v1 §5). An empty set means VERIFIED.
export function check(a, store, options = {}, depth = 0) {
  const r = new Set();
  for (const [k, v] of Object.entries(options)) {
    if (!(k in POLICY)) r.add("tally-policy-unknown");
    else if (typeof v !== "number" || v > POLICY[k]) r.add("tally-policy-weakened");
  }
  if (depth > POLICY.max_depth) return new Set([...r, "tally-too-deep"]);
  if (!isObj(a)) return new Set([...r, "tally-malformed"]);
  if (a.protocol === LEAF) {
    if (!onlyKeys(a, ["protocol", "tally", "annotations"])) r.add("tally-vocabulary-unknown");
    if (!isObj(a.tally) || !onlyKeys(a.tally, ["films", "cases"]) || !isCount(a.tally.films) || !isCount(a.tally.cases)) r.add("tally-malformed");
    return r;
  }
  if (a.protocol !== COMP) return new Set([...r, "tally-protocol-unknown"]);
  if (!onlyKeys(a, ["protocol", "claim", "references", "structure", "annotations"])) r.add("tally-vocabulary-unknown");
  const { claim, references, structure } = a;
  if (!isObj(claim) || !Array.isArray(claim.operands) || !Array.isArray(references) || !isObj(structure)) return new Set([...r, "tally-malformed"]);
  if (!onlyKeys(claim, ["connective", "operands", "nested_claim_sem_id"])) r.add("tally-vocabulary-unknown");
  if (!onlyKeys(structure, [...STRUCT_INTS, "structure_sem_id"])) r.add("tally-vocabulary-unknown");
  if (claim.connective !== "AND") r.add("tally-connective-unknown");
  if (claim.operands.length > POLICY.max_operands || references.length !== claim.operands.length) r.add("tally-count-inconsistent");
  if (claim.nested_claim_sem_id !== nclaimOf(claim)) r.add("tally-claim-stale");
  const cited = [];
  for (const ref of references) {
    if (!isObj(ref) || !onlyKeys(ref, ["artifact_root", "verified_claim_sem_id"])) r.add("tally-vocabulary-unknown");
    const child = store.get(ref?.artifact_root);
    if (!child) { r.add("tally-reference-unresolved"); continue; }
    if (vclaimOf(child) !== ref.verified_claim_sem_id) r.add("tally-citation-cross-wired");
    cited.push(ref.verified_claim_sem_id);
    if (check(child, store, {}, depth + 1).size > 0) r.add("tally-child-refused");
  }
  // References are a SET: compared sorted against the operands.
  if (canon([...cited].sort()) !== canon([...claim.operands].sort())) r.add("tally-citation-cross-wired");
  const st = stats(a, store);
  if (!st) r.add("tally-reference-unresolved");
  else if (STRUCT_INTS.some((k) => structure[k] !== st[k])) r.add("tally-structure-mismatch");
  if (structure.structure_sem_id !== structSemOf(structure)) r.add("tally-structure-stale");
  return r;
}

// reseal: recompute nested_claim_sem_id and structure_sem_id where they can
// be computed; never artifact_root.
export function reseal(a) {
  if (isObj(a?.claim) && "connective" in a.claim && Array.isArray(a.claim.operands)) a.claim.nested_claim_sem_id = nclaimOf(a.claim);
  if (isObj(a?.structure) && STRUCT_INTS.every((k) => k in a.structure)) a.structure.structure_sem_id = structSemOf(a.structure);
}
