"""The fuzz harness's valid calls of ccmc_lite.lens (the closing chapter)
(one entry or more per public callable).

``tests/fuzzkit.py`` derives the bad, extreme, relation and degenerate cases from each entry
(see its docstring) and gathers this table with the other parts'.
"""

from __future__ import annotations

import torch
from fuzzkit import E, Entry, a


def entries() -> list[Entry]:
    """The valid calls of ccmc_lite.lens (the closing chapter)."""
    from ccmc_lite import ngram

    T: list[Entry] = []
    add = T.append
    task = ngram.NGramTask(S=3, n=2, T=8)
    batch = ngram.sample_batch(task, 4, seed=0)
    tokP = batch.transitions[0]
    joint = torch.full((3, 3), 1 / 9, dtype=torch.float64)
    add(
        E(
            "lens.coarse_gap",
            a(joint, "array", "joint"),
            a([0, 0, 1], "obj", "groups", none_ok=True),
        )
    )
    add(
        E(
            "lens.coarse_predictor",
            a(joint, "array", "joint"),
            a([0, 0, 1], "obj", "groups", none_ok=True),
        )
    )
    add(E("lens.conditional_entropy", a(joint, "array", "joint")))
    add(E("lens.ngram_levels", a(tokP, "stoch", "P"), a(3, "int", min=2), a(2, "int")))
    return T
