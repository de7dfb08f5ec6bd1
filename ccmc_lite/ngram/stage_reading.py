"""Stages and head formation of stored Part III runs, read as the chapters read them.

Varre et al. (2025, Sec. 5, Fig. 5) read a run's test loss as a staircase (unigram, bigram,
trigram stages) and watch the first-layer heads form; :func:`~ccmc_lite.ngram.stage_summary`
does both for each run of a sweep (the stored paper-setting runs,
:func:`ccmc_lite.stored.load_stored`), and :func:`~ccmc_lite.ngram.stage_counts` counts,
over seeds, what the stage-wise reading predicts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..core.validation import as_tensor, check_float
from .plateaus import detect_stages, formation_step, label_stages

__all__ = ["stage_counts", "stage_summary"]


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
    ``checkpoint_steps`` (as a stored Part III run holds them). For each run, returns a dict
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
    for name, steps in (("eval_steps", eval_steps), ("checkpoint_steps", checkpoint_steps)):
        if steps.size > 1 and not np.all(np.diff(steps) > 0):
            raise ValueError(f"{name} must be strictly increasing; got {steps.tolist()[:8]}")
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


def stage_counts(rows: list[dict[str, Any]], lr: float) -> dict[str, Any]:
    """What Sec. 5's stage-wise reading predicts, counted over the rows of
    :func:`stage_summary` (one per seed).

    ``prev``: seeds whose previous-token head forms first; ``escaped``: seeds where a
    head on offset 2 forms; ``ordered``: seeds whose test loss shows a bigram then a
    trigram stage with that head forming between them; ``esc_first``/``esc_last``: the
    first and last such formation step (``-1`` if none), ``tau_*`` the same in time
    ``step * lr``; ``trigram``: the mean loss of the trigram stages (``None`` if no seed
    has one);
    ``final_min``/``final_max``: the range of the last test losses.
    """
    lr = check_float("lr", lr, minimum=0, open_lower=True)
    keys = {"final", "formed", "first", "stages"}
    if not isinstance(rows, list | tuple) or not rows:
        raise ValueError(f"rows must be a non-empty list from stage_summary; got {rows!r:.60}")
    if not all(isinstance(r, dict) and keys <= set(r) and 2 in r["formed"] for r in rows):
        raise ValueError("rows must be the dicts stage_summary returns (offsets 1 and 2)")
    escapes = [r["formed"][2] for r in rows if r["formed"][2] >= 0]
    trigram = [s.loss for r in rows for s in r["stages"] if s.label == "trigram"]
    return {
        "seeds": len(rows),
        "prev": sum(r["first"] == 1 for r in rows),
        "escaped": len(escapes),
        "ordered": sum(
            [s.label for s in r["stages"]] == ["bigram", "trigram"]
            and r["stages"][0].end <= r["formed"][2] <= r["stages"][1].start
            for r in rows
        ),
        "esc_first": min(escapes, default=-1),
        "esc_last": max(escapes, default=-1),
        "tau_first": min(escapes, default=-1) * lr,
        "tau_last": max(escapes, default=-1) * lr,
        "trigram": float(np.mean(trigram)) if trigram else None,
        "final_min": min(r["final"] for r in rows),
        "final_max": max(r["final"] for r in rows),
    }
