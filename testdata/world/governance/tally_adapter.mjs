// tally_adapter.mjs — the reference holdout adapter of the synthetic world.
//
//   node governance/tally_adapter.mjs CHALLENGES OUT
//
// CHALLENGES is a JSON array of challenges in the recipe grammar
// (docs/spec/proof-wire/experiment/HOLDOUT-RECIPE-v1.md); OUT is where the
// TRVM-HOLDOUT-OBSERVATION-v1 document is written. Run from the world root:
// the public corpus is read from docs/spec/proof-wire/vectors/public/ and the
// release identity from docs/spec/proof-wire/SPEC-RELEASE.json. An unknown
// recipe operator, an unresolvable fixture or a label that names another root
// is a refusal to emit (exit 2), never a skipped step.
import { readFileSync, writeFileSync } from "node:fs";
import { canon, check, compose, reseal, resolveBytes, rootOf, vclaimOf, LEAF } from "./tally_lib.mjs";

const IMPLEMENTATION = "javascript";
const PKG = "docs/spec/proof-wire";

function refuse(msg) {
  process.stderr.write("tally_adapter: refused: " + msg + "\n");
  process.exit(2);
}

function loadCorpus() {
  const manifest = JSON.parse(readFileSync(`${PKG}/vectors/public/manifest.json`, "utf8"));
  const store = new Map();
  const byLabel = {};
  for (const [label, root] of Object.entries(manifest.roots)) {
    const bytes = readFileSync(`${PKG}/vectors/public/cas/${root}.json`);
    const res = resolveBytes(bytes, root);
    if (res.outcome !== "ok") refuse(`corpus artifact ${label} (${root}) does not resolve: ${res.outcome}`);
    store.set(root, res.value);
    byLabel[label] = root;
  }
  return { store, byLabel };
}

function walk(obj, path, create) {
  const segs = path.split(".");
  let cur = obj;
  for (const s of segs.slice(0, -1)) {
    if (cur === null || typeof cur !== "object") refuse(`path ${path} crosses a scalar`);
    if (!(s in cur)) {
      if (!create) refuse(`path ${path} does not exist`);
      cur[s] = {};
    }
    cur = cur[s];
  }
  if (cur === null || typeof cur !== "object") refuse(`path ${path} crosses a scalar`);
  return [cur, segs[segs.length - 1]];
}

function target(path, work) {
  if (path.startsWith("artifact.")) return [work.artifact, path.slice(9)];
  if (path.startsWith("leaf.")) {
    if (!work.leaf) refuse(`${path}: the fixture is not a leaf`);
    return [work.leaf, path.slice(5)];
  }
  refuse(`path ${path} must start with artifact. or leaf.`);
}

function nodeRecord(a, verdict) {
  const rec = { artifact_root: rootOf(a) };
  if (typeof a.claim?.nested_claim_sem_id === "string") rec.nested_claim_sem_id = a.claim.nested_claim_sem_id;
  if (a.protocol === LEAF) rec.verified_claim_sem_id = vclaimOf(a);
  if (a.structure && typeof a.structure === "object") rec.structure = a.structure;
  if (verdict !== undefined) rec.verdict = verdict;
  return rec;
}

function observe(ch, corpus) {
  const root = ch.fixture?.root;
  const base = corpus.store.get(root);
  if (!base) refuse(`${ch.id}: fixture root ${root} is not in the public corpus`);
  const label = ch.fixture.artifact ?? (ch.fixture.leaf !== undefined ? "leaf" : undefined);
  if (ch.fixture.artifact !== undefined && corpus.byLabel[ch.fixture.artifact] !== root) refuse(`${ch.id}: ${ch.fixture.artifact} is not ${root}`);
  const fixture = JSON.parse(canon(base));
  const work = { artifact: fixture, leaf: fixture.protocol === LEAF ? fixture : null };
  let options = {}, wire = null, recompose = false;
  for (const step of ch.recipe) {
    switch (step.op) {
      case "IDENTITY": break;
      case "SET": { const [o, p] = target(step.path, work); const [obj, k] = walk(o, p, true); obj[Array.isArray(obj) ? Number(k) : k] = step.value; break; }
      case "REVERSE": { const [o, p] = target(step.path, work); const [obj, k] = walk(o, p, false); if (!Array.isArray(obj[k])) refuse(`${step.path} is not an array`); obj[k].reverse(); break; }
      case "RESEAL": reseal(work.artifact); break;
      case "CHECK_WITH_OPTIONS": options = { ...options, ...step.options }; break;
      case "WIRE_PREPEND_DUPLICATE_MEMBER": wire = { name: step.name, value: step.value }; break;
      case "RECOMPOSE_DAG": recompose = true; break;
      default: refuse(`${ch.id}: unknown recipe operator ${JSON.stringify(step.op)}`);
    }
  }
  const s = corpus.byLabel, st = corpus.store;
  const obs = {
    baseline: {
      C1: nodeRecord(st.get(s.C1)), C2: nodeRecord(st.get(s.C2)), D: nodeRecord(st.get(s.D)),
      leaf: { artifact_root: s.A, verified_claim_sem_id: st.get(s.C1).references[0].verified_claim_sem_id },
    },
  };
  for (const n of ["C1", "C2", "D"]) delete obs.baseline[n].verdict;
  const name = label === "leaf" ? "leaf" : ch.fixture.artifact;
  if (wire) {
    const text = canon(fixture);
    const served = Buffer.from(`{${JSON.stringify(wire.name)}:${JSON.stringify(wire.value)},` + text.slice(1), "utf8");
    obs.resolve = { outcome: resolveBytes(served, root).outcome };
    // The fixture is an artifact, so the unmodified fixture is verified too.
    const r = check(fixture, st, options);
    obs.candidate = { [name]: nodeRecord(fixture, r.size ? "REFUSED" : "VERIFIED") };
    obs.refusal_set = [...r].sort();
  } else if (recompose) {
    if (!work.leaf) refuse(`${ch.id}: RECOMPOSE_DAG needs a leaf fixture`);
    const store = new Map(st);
    const leaf = work.leaf;
    store.set(rootOf(leaf), leaf);
    const C1 = compose([leaf, st.get(s.B)], store); store.set(rootOf(C1), C1);
    const C2 = compose([C1, leaf], store); store.set(rootOf(C2), C2);
    const D = compose([C2, C1], store); store.set(rootOf(D), D);
    const r = check(D, store, options);
    obs.candidate = { C1: nodeRecord(C1), C2: nodeRecord(C2), D: nodeRecord(D, r.size ? "REFUSED" : "VERIFIED"), leaf: { artifact_root: rootOf(leaf), verified_claim_sem_id: vclaimOf(leaf) } };
    obs.refusal_set = [...r].sort();
  } else {
    const edited = work.artifact;
    const store = new Map(st);
    store.set(rootOf(edited), edited);
    const r = check(edited, store, options);
    obs.candidate = { [name]: nodeRecord(edited, r.size ? "REFUSED" : "VERIFIED") };
    obs.refusal_set = [...r].sort();
  }
  obs.fixture_root = root;
  return obs;
}

const [challengesPath, outPath] = process.argv.slice(2);
if (!challengesPath || !outPath) refuse("usage: tally_adapter.mjs CHALLENGES OUT");
const challenges = JSON.parse(readFileSync(challengesPath, "utf8"));
if (!Array.isArray(challenges)) refuse("CHALLENGES is not a JSON array");
const release = JSON.parse(readFileSync(`${PKG}/SPEC-RELEASE.json`, "utf8"));
const corpus = loadCorpus();
const observations = {};
for (const ch of challenges) observations[ch.id] = observe(ch, corpus);
const doc = { type: "TRVM-HOLDOUT-OBSERVATION-v1", implementation: IMPLEMENTATION, spec_release_id: release.spec_release_id, observations };
writeFileSync(outPath, JSON.stringify(doc, null, 1) + "\n");
