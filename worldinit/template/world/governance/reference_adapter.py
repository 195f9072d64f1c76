# The reference adapter of this world (EXAMPLE-LENGTH-v1, in Python).
#
#   python3 governance/reference_adapter.py CHALLENGES OUT
#
# OPERATOR: replace the protocol part (measure() and apply()) with your
# reference implementation, or make this adapter call it; keep the rest.
# CHALLENGES is a JSON array of challenges in the grammar of
# {{PACKAGE}}/experiment/holdout-recipe-v1.schema.json, OUT is where the
# observation document is written (holdout-observation-v1.schema.json).
# It runs from the world root, in the sandbox, with no network: the corpus
# is read from {{PACKAGE}}/vectors/public/ and the release identity from
# {{PACKAGE}}/SPEC-RELEASE.json. A challenge it cannot answer is a refusal
# (exit 2, nothing written), never a partial answer.
import hashlib
import json
import os
import sys

IMPLEMENTATION = "reference"  # the label in governance/reference-adapter.json
PACKAGE = "{{PACKAGE}}"
MESSAGES = os.path.join(PACKAGE, "vectors", "public", "messages")


def refuse(why):
    sys.stderr.write("reference adapter: refused: " + why + "\n")
    sys.exit(2)


def corpus():
    """Every message of the public corpus, by its root."""
    out = {}
    for name in sorted(os.listdir(MESSAGES)):
        with open(os.path.join(MESSAGES, name), "rb") as f:
            data = f.read()
        out["sha256-" + hashlib.sha256(data).hexdigest()] = data
    return out


def measure(message):
    """The measure of a message (SPEC.md section 2)."""
    return {"length": len(message)}


def apply(message, step):
    """One step of a recipe (SPEC.md section 3)."""
    op = step.get("op")
    if op == "IDENTITY":
        return message
    if op == "APPEND":
        return message + step["value"].encode("utf-8")
    refuse("unknown step %r" % op)


def main():
    if len(sys.argv) != 3:
        refuse("usage: reference_adapter.py CHALLENGES OUT")
    with open(sys.argv[1], encoding="utf-8") as f:
        challenges = json.load(f)
    with open(os.path.join(PACKAGE, "SPEC-RELEASE.json"), encoding="utf-8") as f:
        release = json.load(f)["spec_release_id"]
    messages = corpus()
    observations = {}
    for c in challenges:
        root = c["fixture"]["root"]
        if root not in messages:
            refuse("challenge %s: no message of the corpus has root %s" % (c["id"], root))
        before = messages[root]
        after = before
        for step in c["recipe"]:
            after = apply(after, step)
        observations[c["id"]] = {
            "fixture_root": root,
            "baseline": {"message": measure(before)},
            "candidate": {"message": measure(after)},
        }
    doc = {
        "type": "CLEANROOM-HOLDOUT-OBSERVATION-v1",
        "implementation": IMPLEMENTATION,
        "spec_release_id": release,
        "observations": observations,
    }
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


main()
