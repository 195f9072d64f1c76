// generate.mjs — regenerates the synthetic world's public corpus
// (docs/spec/proof-wire/vectors/public/) and JCS vectors
// (docs/spec/proof-wire/vectors/jcs-upstream/) from the reference
// implementation in governance/tally_lib.mjs. Run from testdata/world:
//   node tools/generate.mjs
// The corpus is the oracle of the world: regenerate it only deliberately, and
// issue a new release afterwards (its digests move).
import { mkdirSync, writeFileSync, rmSync } from "node:fs";
import { createHash } from "node:crypto";
import { canon, compose, rootOf, vclaimOf, bytesOf, check, LEAF, POLICY } from "../governance/tally_lib.mjs";

const PUB = "docs/spec/proof-wire/vectors/public";
const JCS = "docs/spec/proof-wire/vectors/jcs-upstream";
rmSync(PUB, { recursive: true, force: true });
rmSync(JCS, { recursive: true, force: true });
mkdirSync(`${PUB}/cas`, { recursive: true });
for (const d of ["input", "outhex"]) mkdirSync(`${JCS}/${d}`, { recursive: true });

const sha = (s) => createHash("sha256").update(s).digest("hex");
const pretty = (v) => JSON.stringify(v, null, 1) + "\n";

const A = { protocol: LEAF, tally: { films: 7, cases: 3 }, annotations: { label: "north orchard" } };
const B = { protocol: LEAF, tally: { films: 5, cases: 2 } };
const store = new Map([[rootOf(A), A], [rootOf(B), B]]);
const C1 = compose([A, B], store); store.set(rootOf(C1), C1);
const C2 = compose([C1, A], store); store.set(rootOf(C2), C2);
const D = compose([C2, C1], store); store.set(rootOf(D), D);
const nodes = { A, B, C1, C2, D };

const cas = {};
const roots = {};
for (const [label, a] of Object.entries(nodes)) {
  const root = rootOf(a);
  const text = canon(a);
  writeFileSync(`${PUB}/cas/${root}.json`, text);
  roots[label] = root;
  cas[root] = { canonical_utf8_bytes: bytesOf(a), file: `cas/${root}.json`, sha256: sha(text) };
}
if (check(D, store).size !== 0) throw new Error("D does not verify");

// Negative vectors: D with one change each, and the refusal SET expected.
function negative(name, mutate, why) {
  const x = JSON.parse(canon(D));
  mutate(x);
  const s = new Map(store);
  s.set(rootOf(x), x);
  const refusal = [...check(x, s)].sort();
  const file = `negative-${name}.json`;
  writeFileSync(`${PUB}/${file}`, pretty({ name, why, artifact: x, expect_verdict: "REFUSED", expect_refusal_set: refusal }));
  return { name, file, expect_refusal_set: refusal, expect_verdict: "REFUSED" };
}
const negatives = [
  negative("operand-order-changed-without-reseal", (x) => x.claim.operands.reverse(), "operands are ORDERED (section 4.1); the claim identity is stale"),
  negative("structure-edges-inflated", (x) => { x.structure.edges += 1; }, "structure is derived from the children, never trusted"),
  negative("reference-cites-the-wrong-child", (x) => { x.references[0].artifact_root = roots.A; }, "a reference resolves to valid bytes of another claim"),
];

writeFileSync(`${PUB}/manifest.json`, pretty({
  type: "TOY-TALLY-CONFORMANCE-VECTORS-v1",
  note: "FROZEN oracle of the synthetic world. Roots are content addresses of the canonical bytes in cas/. Refusal expectations are SETS, sorted.",
  protocol: "TOY-TALLY-COMPOSITION-v1",
  verifier_policy: POLICY,
  roots,
  nested_positive: {
    cas,
    expect: {
      artifact_root: roots.D, verdict: "VERIFIED", nested_claim_sem_id: D.claim.nested_claim_sem_id,
      verified_claim_sem_id: vclaimOf(D), structure: D.structure,
    },
  },
  nested_negative: negatives,
}));

// JCS vectors of our own: an input file and the hex of its canonical bytes.
const jcs = {
  "numbers.json": '{"z":[1e21,1e-7,0.5,-0,100,3.0],"a":1E2}',
  "names.json": '{"\\u00e9":1,"e":2,"\\ud83d\\ude00":3,"\\ufb33":4,"10":5,"9":6}',
  "escapes.json": '["\\u0007","\\/","\\u2028","tab\\there","quote\\"","\\u007f"]',
};
for (const [file, text] of Object.entries(jcs)) {
  writeFileSync(`${JCS}/input/${file}`, text + "\n");
  const bytes = Buffer.from(canon(JSON.parse(text)), "utf8");
  writeFileSync(`${JCS}/outhex/${file.replace(/\.json$/, ".txt")}`, [...bytes].map((b) => b.toString(16).padStart(2, "0")).join(" ") + "\n");
}
writeFileSync(`${JCS}/PROVENANCE.md`, `# JCS vectors of the synthetic world

Written for cleanroom's synthetic world by tools/generate.mjs: each
\`input/X.json\` is a JSON text, and \`outhex/X.txt\` the RFC 8785 canonical
bytes of the value it reads as, in hexadecimal. They exercise number
formatting, UTF-16 name ordering and string escaping. They are not the
upstream json-canonicalization suite; the release still records that
suite's repository and commit as constants of the format.
`);
console.log(JSON.stringify(roots, null, 1));
