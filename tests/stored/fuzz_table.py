"""The fuzz harness's valid calls of ccmc_lite.stored
(one entry or more per public callable).

``tests/fuzzkit.py`` derives the bad, extreme, relation and degenerate cases from each entry
(see its docstring) and gathers this table with the other parts'.
"""

from __future__ import annotations

from fuzzkit import E, Entry, a


def entries() -> list[Entry]:
    """The valid calls of ccmc_lite.stored."""
    from ccmc_lite import stored

    T: list[Entry] = []
    add = T.append
    sweep = stored.Sweep(
        name="f", task="tools.markov_tasks:sweep_task", settings={}, runs=[{}], seed=0
    )
    add(
        E(
            "stored.Sweep",
            name=a("f"),
            task=a("tools.markov_tasks:sweep_task"),
            settings=a({}),
            runs=a([{}]),
            seed=a(0, "seed"),
        )
    )
    add(E("stored.StoredRun", a("n"), a(sweep), a({}), a({}), a({})))
    add(E("stored.load_stored", a("no-such-run-name", "obj", "name"), label="bad only"))
    add(E("stored.load_stored", a("p2_fig4_paper", "obj", "name")))
    add(E("stored.stored_names"))
    # the public methods, the instance first
    add(E("stored.Sweep.select", a(sweep, "fixed")))
    add(E("stored.StoredRun.select", a(stored.StoredRun("n", sweep, {}, {}, {}), "fixed")))
    return T
