"""Automatic plateau detection in training histories (Varre et al. 2025, Sec. 5, App. I.3).

Varre et al. observe that the loss lingers at the levels of the k-gram estimators while
the gradient norm stays low, and jumps when the gradient spikes (their Fig. 6). Here a
*plateau* is a stretch of at least ``min_length`` steps over which the smoothed gradient
norm stays below a threshold; for each one we report its loss and the nearest reference
level. Histories are per run: ``(steps,)`` or ``(R, steps)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

from ..core.validation import as_tensor, check_float, check_instance, check_int, check_size

__all__ = [
    "Plateau",
    "detect_plateaus",
    "escape_step",
    "first_offsets",
    "formation_step",
    "moving_average",
    "nearest_level",
    "offset_attention",
]


@dataclass(frozen=True)
class Plateau:
    """One detected plateau.

    Attributes
    ----------
    start, end : int
        First and last step (inclusive) of the plateau.
    loss : float
        Median of the (smoothed) loss over the plateau.
    grad_norm : float
        Median of the smoothed gradient norm over the plateau.
    """

    start: int
    end: int
    loss: float
    grad_norm: float

    @property
    def length(self) -> int:
        """Number of steps."""
        return self.end - self.start + 1


def _as_1d(name: str, x) -> np.ndarray:
    return as_tensor(name, x, dtype=torch.float64, ndim=1, finite=False).cpu().numpy()


def moving_average(x, window: int) -> np.ndarray:
    """Trailing moving average over ``window`` steps (shorter at the start); same length."""
    return _moving_average("x", x, window)


def _moving_average(name: str, x, window: int) -> np.ndarray:
    v = _as_1d(name, x)
    window = check_size("window", window, minimum=1)
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    c = np.concatenate([[0.0], np.cumsum(v)])
    idx = np.arange(1, v.size + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def detect_plateaus(
    grad_norm,
    loss,
    *,
    window: int = 200,
    threshold: float | None = None,
    rel_threshold: float = 1.2,
    min_length: int = 500,
) -> list[Plateau]:
    """Find the plateaus of one run from its per-step gradient norm and loss.

    Parameters
    ----------
    grad_norm, loss : array-like
        Per-step histories of one run, shape ``(steps,)``.
    window : int
        Length of the trailing moving average applied to both histories.
    threshold : float, optional
        Absolute threshold on the smoothed gradient norm. Default: ``rel_threshold``
        times the *smallest* smoothed gradient norm of the run (ignoring the first
        ``window`` steps): a plateau is a stretch as quiet as the quietest part of training.
        Mini-batch gradient norms are dominated by sampling noise, so a relative rule adapts
        to the batch size.
    rel_threshold : float
        See ``threshold``.
    min_length : int
        Shortest stretch (in steps) that counts as a plateau.

    Returns
    -------
    list of Plateau
        In order of time.
    """
    g = _moving_average("grad_norm", grad_norm, window)
    lo = _moving_average("loss", loss, window)
    if g.shape != lo.shape:
        raise ValueError(f"grad_norm and loss must have the same length; got {g.size}, {lo.size}")
    min_length = check_size("min_length", min_length, minimum=1)
    if threshold is None:
        rel = check_float("rel_threshold", rel_threshold, minimum=0.0, open_lower=True)
        quiet = g[window:] if g.size > window else g
        thr = rel * float(np.min(quiet))
    else:
        thr = check_float("threshold", threshold, minimum=0.0, open_lower=True)
    flat = g < thr
    out: list[Plateau] = []
    t, n = 0, flat.size
    while t < n:
        if not flat[t]:
            t += 1
            continue
        s = t
        while t < n and flat[t]:
            t += 1
        if t - s >= min_length:
            out.append(
                Plateau(
                    start=s,
                    end=t - 1,
                    loss=float(np.median(lo[s:t])),
                    grad_norm=float(np.median(g[s:t])),
                )
            )
    return out


def nearest_level(value: float, levels: Mapping[str, float]) -> tuple[str, float]:
    """The reference level closest to ``value``: ``(name, level)``."""
    value = check_float("value", value)
    check_instance("levels", levels, Mapping)
    if not levels:
        raise ValueError("levels must not be empty")
    name = min(levels, key=lambda k: abs(float(levels[k]) - value))
    return name, float(levels[name])


def escape_step(loss, level: float, *, window: int = 1) -> int:
    """First step at which the (smoothed) loss drops below ``level``; ``-1`` if never.

    Used to time the stages: e.g. the step at which a run leaves the bigram plateau is the
    first step below the midpoint between the bigram and trigram levels.
    """
    lo = _moving_average("loss", loss, window)
    level = check_float("level", level)
    below = np.nonzero(lo < level)[0]
    return int(below[0]) if below.size else -1


def offset_attention(A1, offset: int, *, length: int | None = None) -> np.ndarray:
    """How much each first-layer head attends to the ``(-offset)``-token.

    ``A1``: the simplified model's parameter, ``(..., H, T, T)`` (e.g. stacked checkpoints
    ``(R, H, T, T)``). Returns ``(..., H)``: the attention weight on position ``t - offset``
    averaged over query rows ``t = offset, ..., L-2`` with ``L = length or T`` (the last
    row, the query of the second layer, is excluded: it can learn a different pattern).
    """
    from .models import first_layer_attention

    att = first_layer_attention(A1).detach().to(torch.float64)  # (..., H, T, T)
    T = att.shape[-1]
    L = T if length is None else check_int("length", length, minimum=2, maximum=T)
    offset = check_int("offset", offset, minimum=0, maximum=L - 2)
    rows = torch.arange(offset, L - 1)
    if rows.numel() == 0:
        raise ValueError(f"no query rows for offset {offset} and length {L}")
    w = att[..., rows, rows - offset]  # (..., H, n_rows)
    return w.mean(-1).cpu().numpy()


def formation_step(steps, weights, threshold: float = 0.3) -> int:
    """First checkpoint step at which ``weights`` (one value per step) exceed ``threshold``.

    Returns ``-1`` if it never does (the run is *censored* at the last step).
    """
    s = _as_1d("steps", steps)
    w = as_tensor("weights", weights, ndim=1).numpy()
    if s.shape != w.shape:
        raise ValueError(f"steps and weights must have the same length; got {s.size}, {w.size}")
    threshold = check_float("threshold", threshold, minimum=0.0, maximum=1.0)
    above = np.nonzero(w > threshold)[0]
    return int(s[above[0]]) if above.size else -1


def first_offsets(
    steps, A1_by_step, *, offsets=(1, 2), threshold: float = 0.3, length: int | None = None
) -> list[list[tuple[int, int]]]:
    """Which token each head attends to first, and when (Varre et al. 2025, Fig. 5).

    ``A1_by_step``: a sequence (one entry per checkpoint step) of ``(R, H, T, T)`` tensors.
    For each run and head, returns ``(offset, step)`` of the first checkpoint at which its
    weight on some offset in ``offsets`` exceeds ``threshold`` (ties: the larger weight),
    or ``(0, -1)`` if none does.
    """
    s = [int(v) for v in _as_1d("steps", steps)]
    if not isinstance(A1_by_step, (list, tuple, torch.Tensor, np.ndarray)):
        raise TypeError(
            f"A1_by_step must be a sequence of tensors; got {type(A1_by_step).__name__}"
        )
    if len(s) != len(A1_by_step):
        raise ValueError("steps and A1_by_step must have the same length")
    threshold = check_float("threshold", threshold, minimum=0.0, maximum=1.0)
    w = np.stack(
        [np.stack([offset_attention(A, o, length=length) for o in offsets], -1) for A in A1_by_step]
    )  # (n_steps, R, H, n_offsets)
    out: list[list[tuple[int, int]]] = []
    for r in range(w.shape[1]):
        row = []
        for h in range(w.shape[2]):
            hit = (offsets[0] * 0, -1)
            for j, step in enumerate(s):
                if w[j, r, h].max() > threshold:
                    hit = (int(offsets[int(np.argmax(w[j, r, h]))]), step)
                    break
            row.append(hit)
        out.append(row)
    return out
