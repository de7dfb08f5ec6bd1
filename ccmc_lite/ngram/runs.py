"""The stage-wise experiment as a sweep task, for runs stored at the paper's settings.

Varre, Yüce & Flammarion (2025, Sec. 5) train the simplified two-layer transformer
(Sec. 2.3, eqs. (2)-(3) and (9)) on in-context n-grams: ``S = 5``, ``n = 3``, ``T = 32``,
Dirichlet ``α = 0.5``, ``n - 1 = 2`` first-layer heads, one-hot embeddings (``d = S``), Adam
with constant learning rate 0.01, batch 128, ``2^14`` steps, test loss on ``2^16``
sequences; their Fig. 1 shows the same experiment for a 4-gram.
:func:`~ccmc_lite.ngram.sweep_task` trains a group of seeds of that experiment as one
batched program with the same package functions the chapter uses
(:class:`~ccmc_lite.ngram.SimplifiedTransformer`, :class:`~ccmc_lite.ngram.NGramStream`,
:func:`~ccmc_lite.ngram.make_loss_fn`, :func:`~ccmc_lite.core.train_runs`), so that
:class:`ccmc_lite.core.Sweep` can run and :func:`ccmc_lite.core.save_stored` can store it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from numpy.typing import ArrayLike

from ..core.sweeps import _check_task_args
from ..core.training import TrainConfig, train_runs
from ..core.validation import as_tensor, check_float, check_int, check_seed
from .data import NGramTask
from .models import SimplifiedTransformer, first_layer_attention
from .plateaus import detect_stages, formation_step, label_stages, offset_attention
from .stagewise import NGramStream, kgram_levels, make_eval_fn, make_loss_fn, make_test_set

__all__ = ["PAPER_STAGEWISE", "stage_summary", "sweep_task"]

#: Settings of Varre et al. (2025), Sec. 5 ("Experimental Setup"), for :func:`sweep_task`.
PAPER_STAGEWISE: dict[str, Any] = {
    "S": 5,
    "n": 3,
    "T": 32,
    "alpha": 0.5,
    "heads": 2,
    "steps": 2**14,
    "lr": 0.01,
    "batch": 128,
    "test_sequences": 2**16,
}

_KNOWN = {
    "S",
    "n",
    "T",
    "alpha",
    "heads",
    "steps",
    "lr",
    "batch",
    "test_sequences",
    "test_seed",
    "eval_every",
    "checkpoint_every",
    "eps",
    "head",
    "map_last",
    "stop_after",
}


def sweep_task(
    settings: dict[str, Any],
    runs: list[dict[str, Any]],
    *,
    first_run: int,
    seed: int,
    device: str = "cpu",
) -> dict[str, Any]:
    """Train seeds of the stage-wise experiment (a task for :class:`~ccmc_lite.core.Sweep`).

    ``settings`` (shared by every run): ``S``, ``n``, ``T``, ``alpha``, ``heads``, ``steps``,
    ``lr``, ``batch`` (the paper's values are :data:`PAPER_STAGEWISE`), ``test_sequences``,
    and optionally ``test_seed`` (default 2025, as in the chapter), ``eval_every`` (default
    ``steps // 64``), ``checkpoint_every`` (default ``2 * eval_every``), ``eps`` (the
    authors' ``log(p + eps)``, default ``1e-8``), ``head`` (training losses kept, default
    20), ``map_last`` (positions of the stored final attention maps, default 12) and
    ``stop_after`` (train only a prefix; then only ``train_loss_head`` is returned).
    ``runs``: one record per seed (e.g. ``{"run": r}``); run ``r`` of the sweep is
    initialised from ``derive_seed(seed, r, 0)``. The optimiser is the paper's: Adam
    ``(0.9, 0.999)``, constant learning rate, no weight decay.

    Returns per run: ``train_loss_head`` ``(R, head)``; ``test_loss`` at the evaluation
    steps ``(R, E)`` on ``test_sequences`` sequences; ``train_loss_avg`` and
    ``grad_norm_avg``, the mean training loss and mini-batch gradient norm over each
    evaluation interval ``(R, E - 1)``; ``offset_weight`` ``(R, C, heads, n - 1)``, the
    weight each first-layer head puts on the token ``o = 1, ..., n - 1`` places back at
    each checkpoint (:func:`~ccmc_lite.ngram.offset_attention`); ``final_attention``
    ``(R, heads, map_last, map_last)``, the last positions of σ(A_1) at the end (Fig. 5's
    per-seed maps). ``shared``: ``eval_steps``, ``checkpoint_steps`` and the k-gram
    reference ``levels`` (add-``α``) on the test set.
    """
    first_run = _check_task_args(settings, runs, first_run)
    unknown = sorted(set(settings) - _KNOWN)
    if unknown:
        raise ValueError(f"unknown settings {unknown}; known: {sorted(_KNOWN)}")
    S = check_int("settings['S']", settings["S"], minimum=2)
    n = check_int("settings['n']", settings["n"], minimum=2)
    T = check_int("settings['T']", settings["T"], minimum=n)
    alpha = check_float("settings['alpha']", settings["alpha"], minimum=0.0, open_lower=True)
    heads = check_int("settings['heads']", settings["heads"], minimum=1)
    steps = check_int("settings['steps']", settings["steps"], minimum=1)
    lr = check_float("settings['lr']", settings["lr"], minimum=0.0, open_lower=True)
    batch = check_int("settings['batch']", settings["batch"], minimum=1)
    eval_every = check_int(
        "settings['eval_every']", settings.get("eval_every", max(steps // 64, 1)), minimum=1
    )
    ck_every = check_int(
        "settings['checkpoint_every']", settings.get("checkpoint_every", 2 * eval_every), minimum=1
    )
    eps = check_float("settings['eps']", settings.get("eps", 1e-8), minimum=0.0, open_lower=True)
    head = check_int("settings['head']", settings.get("head", 20), minimum=1)
    map_last = check_int("settings['map_last']", settings.get("map_last", 12), minimum=1)
    stop_after = settings.get("stop_after")

    task = NGramTask(S=S, n=n, T=T, alpha=alpha)
    prefix = stop_after is not None
    eval_fn = levels = None
    if not prefix:
        n_test = check_int("settings['test_sequences']", settings["test_sequences"], minimum=1)
        tx, ty = make_test_set(task, n_test, seed=check_seed(settings.get("test_seed", 2025)))
        eval_fn = make_eval_fn(tx, ty, eps=eps)
        levels = kgram_levels(tx, ty, S, tuple(range(1, n + 1)), smoothing=alpha)
    config = TrainConfig(
        steps=steps,
        lr=lr,
        optimizer="adam",
        betas=(0.9, 0.999),
        eval_every=eval_every,
        checkpoint_steps=() if prefix else tuple(range(0, steps + 1, ck_every)),
    )
    result = train_runs(
        lambda: SimplifiedTransformer(S, T, heads),
        make_loss_fn(eps=eps),
        NGramStream(task, batch),
        n_runs=len(runs),
        config=config,
        seed=seed,
        eval_fn=eval_fn,
        progress=False,
        device=device,
        first_run=first_run,
        stop_after=stop_after,
    )
    loss = result.loss.double()
    out: dict[str, Any] = {"train_loss_head": loss[:, : min(head, loss.shape[1])].numpy()}
    if prefix:
        return out
    R = len(runs)
    E = steps // eval_every  # complete evaluation intervals
    grad = result.grad_norm.double()
    out["train_loss_avg"] = loss[:, : E * eval_every].reshape(R, E, eval_every).mean(-1).numpy()
    out["grad_norm_avg"] = grad[:, : E * eval_every].reshape(R, E, eval_every).mean(-1).numpy()
    out["test_loss"] = result.evals["test_loss"].double().numpy()
    ck_steps = sorted(result.checkpoints)
    A1 = torch.stack([result.checkpoints[s]["A1"] for s in ck_steps], dim=1)  # (R, C, H, T, T)
    out["offset_weight"] = np.stack([offset_attention(A1, o) for o in range(1, n)], axis=-1)
    lo = max(T - map_last, 0)
    att = first_layer_attention(result.checkpoints[ck_steps[-1]]["A1"]).double()
    out["final_attention"] = att[..., lo:, lo:].numpy()
    out["shared"] = {
        "eval_steps": [int(s) for s in result.eval_steps],
        "checkpoint_steps": [int(s) for s in ck_steps],
        "levels": levels,
    }
    return out


def stage_summary(
    test_loss: ArrayLike,
    eval_steps: ArrayLike,
    checkpoint_steps: ArrayLike,
    offset_weight: ArrayLike,
    *,
    threshold: float = 0.3,
    span: int = 5,
    tol: float = 0.008,
    min_separation: float = 0.02,
) -> list[dict[str, Any]]:
    """Stages and head formation of each run, read as the chapter reads them (Sec. 5, Fig. 5).

    ``test_loss``: ``(R, E)`` at ``eval_steps``; ``offset_weight``: ``(R, C, H, n - 1)`` at
    ``checkpoint_steps`` (as returned by :func:`sweep_task`). For each run, returns a dict
    with ``final`` (last test loss), ``formed`` (``offset -> first checkpoint step`` at which
    some head puts more than ``threshold`` on that offset, ``-1`` if never;
    :func:`~ccmc_lite.ngram.formation_step`), ``first`` (the offset that formed first, 0 if
    none) and ``stages`` (:func:`~ccmc_lite.ngram.detect_stages` on the test loss, named by
    :func:`~ccmc_lite.ngram.label_stages` from offsets 1 and 2).
    """
    loss = as_tensor("test_loss", test_loss, ndim=2).numpy()
    w = as_tensor("offset_weight", offset_weight, ndim=4).numpy()
    eval_steps = as_tensor("eval_steps", eval_steps, ndim=1).numpy()
    checkpoint_steps = as_tensor("checkpoint_steps", checkpoint_steps, ndim=1).numpy()
    if w.shape[0] != loss.shape[0]:
        raise ValueError(
            "test_loss must be (R, E) and offset_weight (R, C, H, n - 1) with the same R; "
            f"got {loss.shape} and {w.shape}"
        )
    if w.shape[-1] < 2:
        raise ValueError("offset_weight must cover offsets 1 and 2 (n >= 3)")
    out = []
    for r in range(loss.shape[0]):
        formed = {
            o + 1: formation_step(checkpoint_steps, w[r, :, :, o].max(-1), threshold)
            for o in range(w.shape[-1])
        }
        hits = [(st, o) for o, st in formed.items() if st >= 0]
        stages = detect_stages(
            loss[r], eval_steps, span=span, tol=tol, min_separation=min_separation
        )
        stages = label_stages(stages, checkpoint_steps, w[r, :, :, 0], w[r, :, :, 1])
        out.append(
            {
                "final": float(loss[r, -1]),
                "formed": formed,
                "first": min(hits)[1] if hits else 0,
                "stages": stages,
            }
        )
    return out
