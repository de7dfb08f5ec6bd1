"""The fuzz harness's valid calls of ccmc_lite.teaching
(one entry or more per public callable).

``tests/fuzzkit.py`` derives the bad, extreme, relation and degenerate cases from each entry
(see its docstring) and gathers this table with the other parts'.
"""

from __future__ import annotations

import numpy as np
from fuzzkit import E, Entry, a


def entries() -> list[Entry]:
    """The valid calls of ccmc_lite.teaching."""
    from ccmc_lite import markov
    from tools import ngram_tasks

    T: list[Entry] = []
    add = T.append
    P3 = markov.random_kernel(3, 0)
    add(E("teaching.LoglogFit", a(1.0), a(0.0), a(1.0)))
    add(E("teaching.fig_axes", a(1, "int"), a(1, "int"), width=a(2.0, "pos"), height=a(2.0, "pos")))
    add(E("teaching.heatmap", a("skip", "obj", "ax"), a(P3), label="bad only"))
    xs = np.array([1.0, 2.0, 4.0, 8.0])
    add(E("teaching.loglog_fit", a(xs, "array"), a(xs**-0.5, "array")))
    add(E("teaching.plot_loglog_fit", a("skip", "obj", "ax"), a(xs), a(xs), label="bad only"))
    add(E("teaching.plot_reference_levels", a("skip", "obj", "ax"), a({}), label="bad only"))
    add(E("teaching.plot_runs", a("skip", "obj", "ax"), a(xs), a(xs), label="bad only"))
    add(E("teaching.use_book_style"))
    p3_settings = {
        "S": 3, "n": 3, "T": 8, "alpha": 0.5, "heads": 2, "steps": 4, "lr": 0.01,
        "batch": 4, "test_sequences": 8, "eval_every": 2,
    }  # fmt: skip
    p3 = ngram_tasks.sweep_task(p3_settings, [{"run": 0}], first_run=0, seed=0)
    p3_eval = np.asarray(p3["shared"]["eval_steps"])
    add(
        E(
            "teaching.plot_seed_losses",
            a("skip", "obj", "ax"),
            a(p3_eval),
            a(np.asarray(p3["test_loss"])),
            label="bad only",
        )
    )
    return T
