"""The Part II experiments as a sweep task: the runs stored at the paper's settings.

Makkuva et al. (2024, Table 2) train for 8000 steps on sequences of ``N = 1024`` tokens,
batch 16, AdamW (0.9, 0.95) with a cosine schedule, five runs per ``(p, q)`` cell of Fig. 4.
:func:`sweep_task` trains a group of such runs as one batched program with
:func:`ccmc_lite.markov.train_markov`, so that a :class:`ccmc_lite.stored.Sweep` names it as its
task (``"tools.markov_tasks:sweep_task"``) and ``python3 dev.py paper-runs`` can train the
stored runs again.
"""

from __future__ import annotations

from typing import Any

import torch

from ccmc_lite.core import entropy_rate, unigram_entropy
from ccmc_lite.core.validation import DEFAULT_LIMITS, check_size
from ccmc_lite.markov import (
    binary_kernel,
    markov_config,
    symmetric_kernel,
    train_markov,
    unigram_gap,
)
from tools.sweeps import check_task_args

__all__ = ["sweep_task"]


def sweep_task(
    settings: dict[str, Any],
    runs: list[dict[str, Any]],
    *,
    first_run: int,
    seed: int,
    device: str = "cpu",
) -> dict[str, Any]:
    """Train a shard of a Markov sweep (a task for :class:`ccmc_lite.stored.Sweep`).

    ``settings`` (shared by the shard): ``K``, ``d``, ``N``, ``batch``, ``steps``, ``lr``,
    ``tied``, and optionally ``depth``, ``layer_norm``, ``activation`` (``"relu"``, or
    ``"gelu"`` for the paper's Table 1 model with ``layer_norm``), ``weight_decay`` (default
    ``1e-3``), ``eval_every`` (default ``steps // 40``), ``n_test`` (default 64),
    ``head`` (training losses kept per run, default 20) and ``stop_after``. ``runs``: one
    dict per run with ``p`` and, for ``K = 2``, ``q`` (kernel :func:`binary_kernel`);
    for ``K > 2``, ``p`` of :func:`symmetric_kernel`. The optimiser is the paper's
    (:func:`~ccmc_lite.markov.markov_config`: AdamW(0.9, 0.95), cosine schedule).

    Returns per run: ``test_loss`` at the checkpoints (``(R, S)``, scored against the true
    kernel on ``n_test`` sequences), ``gap`` (:func:`unigram_gap` of the final test loss;
    0 where ``x_n`` and ``x_{n+1}`` are independent, e.g. ``p + q = 1`` on the Fig. 4
    grid's anti-diagonal, where the unigram is the chain's own law: Part II ch. 5's
    convention), ``entropy_rate`` and ``unigram_entropy`` of the kernel,
    ``train_loss_head`` (the first ``head`` training losses, for reproduction checks);
    ``shared["eval_steps"]``.
    """
    first_run = check_task_args(settings, runs, first_run)
    K = check_size("settings['K']", settings.get("K", 2), minimum=2, limit=DEFAULT_LIMITS["vocab"])
    if K == 2:
        kernels = torch.stack([binary_kernel(r["p"], r["q"]) for r in runs])
    else:
        kernels = torch.stack([symmetric_kernel(K, r["p"]) for r in runs])
    steps = check_size("settings['steps']", settings["steps"], minimum=1)
    eval_every = settings.get("eval_every", max(steps // 40, 1))
    options = {
        "K": K,
        "d": settings["d"],
        "N": settings["N"],
        "tied": settings["tied"],
        "depth": settings.get("depth", 1),
        "layer_norm": settings.get("layer_norm", False),
        "activation": settings.get("activation", "relu"),
    }
    config = markov_config(
        steps,
        lr=settings["lr"],
        eval_every=eval_every,
        weight_decay=settings.get("weight_decay", 1e-3),
        progress=False,
        device=device,
        first_run=first_run,
        stop_after=settings.get("stop_after"),
    )
    result = train_markov(
        kernels, model_options=options, config=config, seed=seed, batch_size=settings["batch"]
    )
    head = min(int(settings.get("head", 20)), result.result.loss.shape[1])
    out: dict[str, Any] = {
        "train_loss_head": result.result.loss[:, :head].double().numpy(),
        "entropy_rate": entropy_rate(kernels).numpy(),
        "unigram_entropy": unigram_entropy(kernels).numpy(),
    }
    if settings.get("stop_after") is None:
        steps_done, losses = result.test_losses(
            n_test=settings.get("n_test", 64), seed=settings.get("test_seed", 7)
        )
        out["test_loss"] = losses.numpy()  # (R, S)
        out["gap"] = unigram_gap(losses[:, -1], kernels, undefined=0.0).numpy()
        out["shared"] = {"eval_steps": steps_done}
    return out
