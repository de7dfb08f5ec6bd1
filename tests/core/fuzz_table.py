"""The fuzz harness's valid calls of ccmc_lite.core (and the top level)
(one entry or more per public callable).

``tests/fuzzkit.py`` derives the bad, extreme, relation and degenerate cases from each entry
(see its docstring) and gathers this table with the other parts'.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from fuzzkit import E, Entry, Vocab3, a


def entries() -> list[Entry]:
    """The valid calls of ccmc_lite.core (and the top level)."""
    from ccmc_lite import core, markov

    T: list[Entry] = []
    add = T.append
    P3 = markov.random_kernel(3, 0)
    p3 = core.stationary_distribution(P3)
    X = [0, 1, 2, 1, 0]
    cfg = core.TrainConfig(steps=2, lr=1e-2, progress=False)

    def mk() -> torch.nn.Module:
        return torch.nn.Linear(2, 1)

    def lossf(m: Any, b: torch.Tensor) -> torch.Tensor:
        return m(b).pow(2).mean()

    def batchf(step: int, runs: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        return torch.randn(len(runs), 4, 2, generator=g)

    add(
        E(
            "core.as_tensor",
            a("v"),
            a([1.0, 2.0], "array", shape=False),
            dtype=a(torch.float64, "dtype"),
        )
    )
    add(
        E(
            "core.check_finite_result",
            a(torch.ones(2), "array", "overflowed", shape=False),
            a("the scores"),
            a("W and E"),
        )
    )
    add(E("core.check_choice", a("v"), a("a"), a(("a", "b"))))
    add(E("core.check_float", a("v"), a(0.5, "real")))
    add(
        E(
            "core.check_numbers",
            a("v"),
            a([0.5, 2.0], "factors"),
            a(2, "count", huge=False, none_ok=True),
        )
    )
    add(E("core.check_int", a("v"), a(3, "count", huge=False), minimum=a(0)))
    add(
        E(
            "core.check_prob_vector",
            a("v"),
            a(p3, "probvec"),
            atol=a(1e-6, "pos"),
            dtype=a(torch.float64, "dtype"),
        )
    )
    add(E("core.check_probability", a("v"), a(0.5, "prob")))
    add(E("core.check_seed", a(3, "seed")))
    add(
        E(
            "core.check_stochastic_matrix",
            a("v"),
            a(P3, "stoch", batched_ok=True),
            atol=a(1e-6, "pos"),
            dtype=a(torch.float64, "dtype"),
        )
    )
    add(E("core.check_tokens", a("v"), a(X, "tokens", K=3), a(3, "int", huge=False)))
    add(E("core.check_bool", a("v"), a(True, "bool")))
    add(E("core.check_size", a("v"), a(3, "int"), limit=a(10, "int", huge=False, none_ok=True)))
    add(E("core.check_elements", a("v"), a(10**12, "fixed"), label="bad only"))
    add(E("core.check_power", a("v"), a(3), a(40), label="bad only"))
    add(E("core.check_instance", a("v"), a(3), a(int)))
    add(E("core.check_callable", a("v"), a(len)))
    add(E("core.DivergenceError", a("message")))
    add(
        E(
            "core.check_model_tokens",
            a("v"),
            a(X, "tokens", K=3),
            a(Vocab3(), "obj", "model"),
            ndim=a(1),
        )
    )
    add(E("core.is_traced", a(torch.zeros(2))))
    add(E("core.derive_seed", a(1, "seed"), a(2, "seed", "keys")))
    add(E("core.numpy_rng", a(1, "seed")))
    add(E("core.seed_everything", a(1, "seed")))
    add(E("core.torch_generator", a(1, "seed"), device=a("cpu", "choice", none_ok=True)))
    add(E("core.default_device"))
    add(E("core.resolve_device", a("cpu", "choice", none_ok=True)))
    add(E("core.by_profile", a(1), a(2), profile=a("book", "choice", none_ok=True)))
    add(E("core.current_profile"))
    for f in ("entropy_rate", "mutual_information", "stationary_distribution", "unigram_entropy"):
        add(E(f"core.{f}", a(P3, "stoch")))
    add(E("core.entropy", a(p3, "probvec")))
    add(
        E(
            "core.TrainConfig",
            steps=a(3, "int"),
            lr=a(1e-3, "pos"),
            optimizer=a("adam", "choice"),
            weight_decay=a(0.0, "nonneg"),
            schedule=a("cosine", "choice"),
            warmup_steps=a(1, "count"),
            min_lr_ratio=a(0.1, "prob"),
            grad_clip=a(1.0, "pos", none_ok=True),
            eval_every=a(1, "count"),
            progress_updates=a(2, "int"),
            checkpoint_steps=a((1,), "obj"),
            lr_scale=a([1.0, 2.0], "obj", none_ok=True),  # its length: checked by train_runs
            runs_per_pass=a(1, "int", none_ok=True),
            stop_after=a(2, "int", none_ok=True),
            first_run=a(0, "count", huge=False),
            device=a("cpu", "choice", none_ok=True),
            progress=a(False, "bool"),
            cases=[
                ("relation", "checkpoint_steps=5, an int", {"checkpoint_steps": 5}, "raise"),
                ("relation", "stop_after beyond steps", {"stop_after": 4}, "raise"),
            ],
        )
    )
    add(E("core.lr_schedule", a(cfg, "obj", "config")))
    add(E("core.over_runs", a(mk(), "obj", "template"), a(lossf, "callable")))
    add(
        E(
            "core.train_runs",
            a(mk, "callable"),
            a(lossf, "callable"),
            a(batchf, "callable"),
            n_runs=a(2, "int"),
            config=a(cfg, "obj"),
            seed=a(0, "seed"),
            cases=[
                (
                    "relation",
                    "lr_scale of 3 runs for 2",
                    {"config": dataclasses.replace(cfg, lr_scale=(1.0, 1.0, 1.0))},
                    "raise",
                ),
            ],
        )
    )
    res = core.train_runs(mk, lossf, batchf, n_runs=2, config=cfg, seed=0)
    add(
        E(
            "core.TrainResult",
            params=a(res.params),
            buffers=a(res.buffers),
            loss=a(res.loss),
            grad_norm=a(res.grad_norm),
            eval_steps=a(res.eval_steps),
            evals=a(res.evals),
            checkpoints=a(res.checkpoints),
            seconds=a(res.seconds),
            config=a(cfg),
            template=a(res.template),
        )
    )
    add(
        E(
            "core.TextProgress",
            a(10, "int", huge=False),
            updates=a(2, "int", huge=False),
            enabled=a(False, "bool"),
            width=a(10, "int"),
        )
    )
    # the public methods, the instance first
    res = core.train_runs(
        mk, lossf, batchf, n_runs=2, config=dataclasses.replace(cfg, checkpoint_steps=(1,)), seed=0
    )
    last = max(res.checkpoints)
    add(E("core.TrainConfig.eval_steps", a(cfg, "fixed")))
    add(
        E(
            "core.TrainConfig.make_optimizer",
            a(cfg, "fixed"),
            a(list(mk().parameters()), "obj", "params"),
        )
    )
    add(
        E("core.TrainResult.params_at", a(res, "fixed"), a(last, "count", huge=False, none_ok=True))
    )
    add(
        E(
            "core.TrainResult.module",
            a(res, "fixed"),
            a(0, "count", huge=False),
            a(last, "count", huge=False, none_ok=True),
        )
    )
    xs = torch.randn(2, 4, 2)  # (R, B, 2): one batch per run
    add(
        E(
            "core.TrainResult.map_runs",
            a(res, "fixed"),
            a(lossf, "callable", "fn"),
            a(xs, "fixed"),
            cases=[("relation", "args of 3 runs for 2", {2: torch.randn(3, 4, 2)}, "raise")],
        )
    )
    add(
        E(
            "core.TextProgress.update",
            a(core.TextProgress(10, enabled=False), "fixed"),
            a(3, "count"),
        )
    )
    return T
