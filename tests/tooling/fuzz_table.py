"""The fuzz harness's valid calls of the repository's tools/
(one entry or more per public callable).

``tests/fuzzkit.py`` derives the bad, extreme, relation and degenerate cases from each entry
(see its docstring) and gathers this table with the other parts'.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from fuzzkit import E, Entry, a


def entries() -> list[Entry]:
    """The valid calls of the repository's tools/."""
    from ccmc_lite import stored
    from tools import costs, snapshots, sweeps

    T: list[Entry] = []
    add = T.append
    add(E("tools.allocator.tune_allocator"))
    add(E("tools.gluing.glue", a("fuzz_key"), a(1.0), display=a(False, "bool")))
    add(E("tools.gluing.glued_values"))
    sweep = stored.Sweep(
        name="f", task="tools.markov_tasks:sweep_task", settings={}, runs=[{}], seed=0
    )
    add(
        E(
            "tools.sweeps.Shard",
            task=a("tools.markov_tasks:sweep_task"),
            settings=a({}),
            runs=a(({},)),
            first_run=a(0, "count", huge=False),
            seed=a(0, "seed"),
        )
    )
    add(E("tools.sweeps.SweepResult", a(sweep), a({}), a({}), a(0.0)))
    add(E("tools.sweeps.run_shard", a("skip", "obj", "shard"), label="bad only"))
    add(E("tools.sweeps.run_sweep", a("skip", "obj", "sweep"), label="bad only"))
    add(
        E(
            "tools.stored.save_stored",
            a("skip", "obj", "result"),
            a("/nonexistent"),
            command=a("c"),
            label="bad only",
        )
    )
    add(E("tools.sweeps.shards", a(sweep), a(1, "int", "shard_size", huge=False, none_ok=True)))
    add(E("tools.snapshots.ChapterSnapshot", a("part9/01_x"), a({"a": 1.0}, "obj"), a("0" * 64),
          a({})))  # fmt: skip
    add(E("tools.snapshots.load_snapshot", a("part9/01_no-such-chapter", "obj", "chapter"),
          label="bad only"))  # fmt: skip
    add(E("tools.snapshots.Claims", a({"claim": (True, False)}, "obj")))
    # the public methods, the instance first
    run = {"profile": "paper", "package_version": "0", "torch_version": "0", "python_version": "3",
           "created": "2026", "machine": "m", "wall_seconds": 60.0, "command": "c"}  # fmt: skip
    snap = snapshots.ChapterSnapshot("part9/01_x", {"p9c1_a": 1.0}, "0" * 64, run)
    here = a({"p9c1_a": 1.5}, "obj", "values")
    checks = a({"a is positive": lambda v: v["p9c1_a"] > 0}, "obj", "checks")
    add(E("tools.snapshots.ChapterSnapshot.rows", a(snap, "fixed"), here))
    add(E("tools.snapshots.ChapterSnapshot.changed", a(snap, "fixed"), here, rtol=a(0.1, "nonneg")))
    add(E("tools.snapshots.ChapterSnapshot.claims", a(snap, "fixed"), here, checks))
    add(E("tools.snapshots.ChapterSnapshot.glue_for_reproduction", a(snap, "fixed"), here, checks,
          a(["a"], "obj", "quoted"),
          cases=[("relation", "a name the snapshot lacks", {3: ["b"]}, "raise")]))  # fmt: skip
    add(E("tools.snapshots.Claims.says", a(snapshots.Claims({"c": (True, True)}), "fixed"),
          a("c", "obj", "name")))  # fmt: skip
    add(E("tools.sweeps.SweepResult.select", a(sweeps.SweepResult(sweep, {}, {}, 0.0), "fixed")))
    add(E("tools.snapshots.snapshot_names"))
    add(E("tools.gpu_results.gpu_run_names"))
    add(E("tools.ngram_tasks.checkpoint_gradient_norms", a("skip", "obj", "result"),
          a(torch.zeros(2, 4, dtype=torch.long)), a(torch.full((2, 3), 1 / 3)),
          label="bad only"))  # fmt: skip
    add(E("tools.gpu_results.gpu_timings"))
    add(E("tools.gpu_results.load_gpu_run", a("p2_fig4_paper", "obj", "name")))
    add(E("tools.stored.machine_description"))
    add(E("tools.stored.package_version"))
    add(E("tools.stored.provenance"))
    add(E("tools.stored.cpu_field", a("model name", "fixed")))  # absent fields: None
    add(E("tools.allocator.shell_exports"))
    # installing the replay cache and undoing it (the pair leaves the package as it ships)
    add(E("tools.replay.uninstall"))
    add(E("tools.replay.install"))
    add(E("tools.replay.load_ipython_extension", a(None, "fixed")))  # the shell: unused
    add(E("tools.replay.uninstall"))
    add(
        E(
            "tools.snapshots.save_snapshot",
            a("part9/01_x"),
            a({"a": 1.0}, "obj", "values"),
            code_sha256=a("0" * 64),
            wall_seconds=a(1.0, "pos"),
            command=a("c"),
            path=a(str(Path(tempfile.mkdtemp()) / "s.json")),
        )
    )
    add(
        E(
            "tools.sweeps.makespan",
            a([3.0, 2.0, 1.0], "obj", "shard_seconds"),
            a(2, "int", "workers"),
        )
    )
    work = costs.Work(matmul_flops=2e3, elementwise_flops=1e3, bytes=8e3, ops=12)
    add(E("tools.costs.count_work", a(lambda: torch.ones(3).exp(), "callable", "fn")))
    # every object has an answer (a digest, or None when it cannot be identified by value)
    add(E("tools.replay.fingerprint", a((1, torch.ones(2), "x"), "fixed")))
    add(E("tools.replay.replayable", a(lambda x: x, "callable", "fn")))
    hardware = a(costs.H100_SXM, "obj", "hardware")
    add(E("tools.costs.roofline_seconds", a(work, "obj", "work"), hardware, runs=a(4, "int")))
    hardware = a(costs.H100_SXM, "obj", "hardware")
    add(E("tools.costs.roofline_terms", a(work, "obj", "work"), hardware, runs=a(4, "int")))
    add(
        E(
            "tools.costs.Work",
            a(2e3, "nonneg", "matmul_flops"),
            a(1e3, "nonneg", "elementwise_flops"),
            a(8e3, "nonneg", "bytes"),
            a(12, "count", "ops", huge=False),
        )
    )
    add(
        E(
            "tools.costs.Hardware",
            a("a machine", "fixed"),
            a(1e12, "pos", "flops_per_s"),
            a(1e11, "pos", "bytes_per_s"),
            a(1e-6, "nonneg", "seconds_per_op"),
            a("", "fixed"),
        )
    )
    p3_settings = {
        "S": 3, "n": 3, "T": 8, "alpha": 0.5, "heads": 2, "steps": 4, "lr": 0.01,
        "batch": 4, "test_sequences": 8, "eval_every": 2,
    }  # fmt: skip
    pl_settings = {"S": 3, "n": 3, "T": 6, "heads": 1, "steps": 4, "lr": 0.01, "batch": 2}
    ao_settings = {
        "S": 3, "n": 3, "T": 6, "alpha": 1.0, "heads": [1, 1], "embedding": "onehot",
        "steps": 16, "lr": 0.005, "weight_decay": 0.0, "batch": 2, "test_sequences": 4,
        "eval_every": 8, "checkpoint_every": 8, "map_sequences": 2,
    }  # fmt: skip
    settings = {
        "K": 2,
        "d": 4,
        "N": 8,
        "batch": 2,
        "steps": 2,
        "lr": 1e-3,
        "tied": True,
        "n_test": 2,
    }
    add(
        E(
            "tools.markov_tasks.sweep_task",
            a(settings, "obj", "settings"),
            a([{"p": 0.3, "q": 0.4}], "obj", "runs"),
            first_run=a(0, "count", huge=False),
            seed=a(0, "seed"),
        )
    )
    add(
        E(
            "tools.ngram_tasks.sweep_task",
            a(p3_settings, "obj", "settings"),
            a([{"run": 0}], "obj", "runs"),
            first_run=a(0, "count", huge=False),
            seed=a(0, "seed"),
        )
    )
    add(
        E(
            "tools.ngram_tasks.attention_only_task",
            a(ao_settings, "obj", "settings"),
            a([{"run": 0}], "obj", "runs"),
            first_run=a(0, "count", huge=False),
            seed=a(0, "seed"),
        )
    )
    add(
        E(
            "tools.ngram_tasks.plateau_task",
            a(pl_settings, "obj", "settings"),
            a([{"T": 5, "alpha": 0.5}], "obj", "runs"),
            first_run=a(0, "count", huge=False),
            seed=a(0, "seed"),
        )
    )
    add(
        E(
            "tools.sweeps.check_task_args",
            a({}, "obj", "settings"),
            a([{}], "obj", "runs"),
            a(0, "count", "first_run", huge=False),
        )
    )
    add(E("tools.sweeps.resolve_task", a("tools.markov_tasks:sweep_task", "obj", "task")))
    return T
