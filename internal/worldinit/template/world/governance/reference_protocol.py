# The reference implementation of this world's protocol: EXAMPLE-LENGTH-v1,
# the example `cleanroom world init` writes.
#
# OPERATOR: replace this file with your protocol's reference implementation,
# or make it call yours. The adapter beside it (reference_adapter.py) calls
# exactly these two functions; a file your implementation needs besides this
# one must be listed in reference-adapter.json's package_files, or it is not
# there when the adapter runs.


def measure(message):
    """The measure of a message (SPEC.md section 2): a dict of members."""
    return {"length": len(message)}


def apply(message, step):
    """One step of a recipe (SPEC.md section 3). An unknown step raises
    ValueError: the adapter then refuses the whole challenge set."""
    op = step.get("op")
    if op == "IDENTITY":
        return message
    if op == "APPEND":
        return message + step["value"].encode("utf-8")
    raise ValueError("unknown step %r" % op)
