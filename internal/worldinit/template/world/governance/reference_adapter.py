# The reference adapter of this world, in Python.
#
#   python3 governance/reference_adapter.py CHALLENGES OUT
#
# OPERATOR: the protocol itself is in reference_protocol.py beside this file
# (measure() and apply()): replace that. Change this file only when your
# challenges or observation documents have another shape.
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

sys.dont_write_bytecode = True  # no __pycache__ left in the world
import reference_protocol  # noqa: E402 (beside this file: sys.path[0])

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
            try:
                after = reference_protocol.apply(after, step)
            except ValueError as e:
                refuse("challenge %s: %s" % (c["id"], e))
        observations[c["id"]] = {
            "fixture_root": root,
            "baseline": {"message": reference_protocol.measure(before)},
            "candidate": {"message": reference_protocol.measure(after)},
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
