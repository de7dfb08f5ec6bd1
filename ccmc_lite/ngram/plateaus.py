"""Automatic plateau detection in training histories (Varre et al. 2025, Sec. 5, App. I.3).

Varre et al. observe that the loss lingers at the levels of the k-gram estimators while
the gradient norm stays low, and jumps when the gradient spikes (their Fig. 6). Here a
*plateau* is a stretch of at least ``min_length`` steps over which the smoothed gradient
norm stays below a threshold; for each one we report its loss and the nearest reference
level. Histories are per run: ``(steps,)`` or ``(R, steps)``.

That gradient-norm rule (:func:`~ccmc_lite.ngram.detect_plateaus`) uses one global threshold
and can merge stages whose losses nearly coincide. :func:`~ccmc_lite.ngram.detect_stages`
instead reads the stages off the *loss*: a local flatness test over a sliding window (its
tolerance adapted to the loss's noise), then a slope test across each stretch (a slow
descent that passes the local test is not a level), keeping only levels separated by a
minimum gap; and
:func:`~ccmc_lite.ngram.label_stages` names each stage from the first-layer attention
offsets (uniform, previous token, two back). :func:`~ccmc_lite.ngram.absent_mass` and
:func:`~ccmc_lite.ngram.histogram_levels` give the reference levels that the simplified
transformer, whose prediction is an attention-weighted histogram of the sequence's own
tokens, can reach.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..core.validation import (
    DEFAULT_LIMITS,
    as_tensor,
    check_float,
    check_instance,
    check_int,
    check_prob_vector,
    check_size,
    check_tokens,
)

__all__ = [
    "Plateau",
    "Stage",
    "absent_mass",
    "detect_plateaus",
    "detect_stages",
    "first_offsets",
    "formation_step",
    "histogram_levels",
    "label_stages",
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


def _as_1d(name: str, x: Any) -> np.ndarray:
    return as_tensor(name, x, dtype=torch.float64, ndim=1, finite=False).cpu().numpy()


def moving_average(x: Any, window: int) -> np.ndarray:
    """Trailing moving average over ``window`` steps (shorter at the start); same length."""
    return _moving_average("x", x, window)


def _moving_average(name: str, x: Any, window: int) -> np.ndarray:
    v = _as_1d(name, x)
    window = check_size("window", window, minimum=1)
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    if window == 1:
        return v.astype(float)
    mid = float(np.median(v))  # cumulative sums of deviations keep their precision
    c = np.concatenate([[0.0], np.cumsum(v - mid)])
    idx = np.arange(1, v.size + 1)
    lo = np.maximum(idx - window, 0)
    return mid + (c[idx] - c[lo]) / (idx - lo)


def detect_plateaus(
    grad_norm: Any,
    loss: Any,
    *,
    window: int = 200,
    threshold: float | None = None,
    rel_threshold: float = 1.2,
    min_length: int = 500,
) -> list[Plateau]:
    """Plateaus of one run, in order of time, from its per-step gradient norm and loss ``(steps,)``.

    Both are smoothed by a trailing moving average of ``window`` steps. A plateau is a stretch
    of at least ``min_length`` steps whose smoothed gradient norm stays below ``threshold``
    (default: ``rel_threshold`` times the run's smallest smoothed norm after the first
    ``window`` steps — as quiet as the quietest part of training; mini-batch gradient norms
    are dominated by sampling noise, so a relative rule adapts to the batch size).
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
    return [
        Plateau(
            start=s,
            end=t - 1,
            loss=float(np.median(lo[s:t])),
            grad_norm=float(np.median(g[s:t])),
        )
        for s, t in _true_runs(flat, min_length)
    ]


def _noise_level(y: np.ndarray) -> float:
    """Standard deviation of white noise on ``y``, from its successive differences.

    The median absolute deviation of the differences ignores the few large steps between
    stages; for i.i.d. noise of s.d. sigma the differences have s.d. sigma * sqrt(2).
    """
    if y.size < 3:
        return 0.0
    d = np.diff(y)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / np.sqrt(2.0))


def _drop(seg: np.ndarray) -> float:
    """Size of the least-squares linear change across ``seg`` (nats, start to end)."""
    if seg.size < 2:
        return 0.0
    t = np.arange(seg.size, dtype=float)
    t -= t.mean()
    dev = seg - np.median(seg)  # centred, so that large constant losses do not overflow
    slope = float(np.dot(t, dev) / np.dot(t, t))
    return abs(slope) * (seg.size - 1)


def _split_levels(y: np.ndarray, s: int, e: int, min_drop: float) -> list[tuple[int, int]]:
    """Split ``y[s:e]`` into pieces whose linear drop is below ``min_drop`` (recursively, at
    the point where two constant levels fit best)."""
    if e - s < 4 or _drop(y[s:e]) < min_drop:
        return [(s, e)]
    seg = y[s:e] - np.median(y[s:e])  # centred: the squares below stay finite
    c1 = np.cumsum(seg)
    c2 = np.cumsum(seg**2)
    k = np.arange(1, seg.size)  # left piece seg[:k], right piece seg[k:]
    left = c2[k - 1] - c1[k - 1] ** 2 / k
    right = (c2[-1] - c2[k - 1]) - (c1[-1] - c1[k - 1]) ** 2 / (seg.size - k)
    cut = s + int(k[np.argmin(left + right)])
    return _split_levels(y, s, cut, min_drop) + _split_levels(y, cut, e, min_drop)


def _trim(y: np.ndarray, s: int, e: int, tol: float, min_points: int) -> tuple[int, int]:
    """Drop end points of ``y[s:e]`` farther than ``tol`` from its median (the start of the
    drop that a flat window reached into), keeping at least ``min_points``."""
    level = np.median(y[s:e])
    while e - s > min_points and abs(y[e - 1] - level) > tol:
        e -= 1
    while e - s > min_points and abs(y[s] - level) > tol:
        s += 1
    return s, e


def _true_runs(mask: np.ndarray, min_length: int) -> list[tuple[int, int]]:
    """Maximal stretches ``[s, t)`` of ``True`` in ``mask`` at least ``min_length`` long."""
    runs: list[tuple[int, int]] = []
    t, n = 0, mask.size
    while t < n:
        if not mask[t]:
            t += 1
            continue
        s = t
        while t < n and mask[t]:
            t += 1
        if t - s >= min_length:
            runs.append((s, t))
    return runs


def nearest_level(value: float, levels: Mapping[str, float]) -> tuple[str, float]:
    """The reference level closest to ``value``: ``(name, level)``."""
    value = check_float("value", value)
    check_instance("levels", levels, Mapping)
    if not levels:
        raise ValueError("levels must not be empty")
    name = min(levels, key=lambda k: abs(float(levels[k]) - value))
    return name, float(levels[name])


def offset_attention(A1: Any, offset: int, *, length: int | None = None) -> np.ndarray:
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


def formation_step(steps: Any, weights: Any, threshold: float = 0.3) -> int:
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
    steps: Any,
    A1_by_step: Any,
    *,
    offsets: Sequence[int] = (1, 2),
    threshold: float = 0.3,
    length: int | None = None,
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


# --------------------------------------------------------------------- stages from the loss


@dataclass(frozen=True)
class Stage:
    """One stage of training read from a loss history (see :func:`detect_stages`).

    Attributes
    ----------
    start, end : int
        First and last step (inclusive; in the units of ``steps``) of the flat stretch.
    loss : float
        Median of the smoothed loss over the stretch.
    label : str
        ``""`` until :func:`label_stages` names it from the attention offsets.
    """

    start: int
    end: int
    loss: float
    label: str = ""


def detect_stages(
    loss: Any,
    steps: Any = None,
    *,
    window: int = 1,
    span: int = 5,
    tol: float = 0.005,
    min_points: int = 3,
    min_separation: float = 0.02,
) -> list[Stage]:
    """Flat stretches of one loss history, one per stage (Varre et al. 2025, Sec. 5, Fig. 1).

    1. **Local flatness.** A point is flat when the smoothed loss (trailing average of
       ``window`` points) varies by less than the tolerance over the centred window of
       ``span`` points around it; the window's points then belong to the stretch too. The
       tolerance is ``tol``, raised to three times the loss's noise level when the loss is
       noisier (estimated from the median absolute deviation of successive differences), so
       that evaluation noise alone does not break a plateau.
    2. **Levels, not slow descents.** A local window cannot see a slow descent (0.07 nats over
       64 points is 0.004 per window of five). So each flat stretch whose least-squares drop
       reaches ``min_separation`` is split where two constant levels fit it best,
       recursively; pieces shorter than ``min_points`` are dropped; consecutive pieces whose
       levels differ by less than ``min_separation`` are merged (one stage interrupted by
       noise); a merged stage whose own drop still reaches ``min_separation`` is a descent and
       is dropped; and end points farther than half the tolerance from a stage's median are
       trimmed (where a window reached into a drop).

    Limits: inside the record a level must last at least ``span`` points to be seen (pass a
    smaller ``span`` for short stages; at the ends of the record the window is clipped);
    levels closer than ``min_separation`` are one stage; a level that runs straight into a
    slow descent may be absorbed by it; stage boundaries are known to about half a window.
    ``loss``: ``(n,)`` (e.g. the test loss at the evaluation steps), at the increasing
    ``steps`` (default ``0..n-1``). Returns unlabelled :class:`Stage` records in order of time.
    """
    y = _moving_average("loss", loss, window)
    n = y.size
    x = np.arange(n) if steps is None else as_tensor("steps", steps, ndim=1).numpy()
    if x.shape != y.shape:
        raise ValueError(f"steps and loss must have the same length; got {x.size}, {n}")
    if n > 1 and not np.all(np.diff(x) > 0):
        raise ValueError("steps must be strictly increasing")
    span = check_size("span", span, minimum=2)
    if span > max(n, 2):
        raise ValueError(
            f"loss has {n} point(s) (after the moving average), fewer than span={span}: "
            "a flat stretch is judged over span consecutive points"
        )
    tol = check_float("tol", tol, minimum=0.0, open_lower=True)
    min_points = check_size("min_points", min_points, limit=max(n, 1))
    min_separation = check_float("min_separation", min_separation, minimum=0.0)
    tol = max(tol, 3.0 * _noise_level(y))
    half_lo, half_hi = (span - 1) // 2, span // 2
    covered = np.zeros(n, dtype=bool)  # in the window of some flat point
    for i in range(n):  # windows are clipped at the ends: a stage may outlast the record
        lo, hi = max(0, i - half_lo), min(n, i + half_hi + 1)
        if y[lo:hi].max() - y[lo:hi].min() < tol:
            full = hi - lo == span
            covered[lo:hi] |= full  # a full flat window is flat throughout
            covered[i] = True
    pieces = [
        piece
        for s, e in _true_runs(covered, 1)
        for piece in _split_levels(y, s, e, min_separation)
        if piece[1] - piece[0] >= min_points
    ]
    merged: list[tuple[int, int]] = []
    for s, e in pieces:
        if merged and abs(np.median(y[s:e]) - np.median(y[merged[-1][0] : merged[-1][1]])) < (
            min_separation
        ):
            merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    merged = [(s, e) for s, e in merged if _drop(y[s:e]) < min_separation]
    merged = [_trim(y, s, e, tol / 2, min_points) for s, e in merged]
    return [
        Stage(start=int(x[s]), end=int(x[e - 1]), loss=float(np.median(y[s:e]))) for s, e in merged
    ]


def label_stages(
    stages: list[Stage], steps: Any, w1: Any, w2: Any, *, threshold: float = 0.3
) -> list[Stage]:
    """Name each stage from the first-layer attention offsets (Varre et al. 2025, Fig. 3b).

    ``steps``: ``(n_ckpt,)`` checkpoint steps; ``w1``, ``w2``: ``(n_ckpt, H)`` weight of
    each head on the previous token and on the token two back for one run (from
    :func:`offset_attention`). At the checkpoint nearest the middle of the stage, the stage
    is ``"trigram"`` if some head puts more than ``threshold`` on offset 2, else
    ``"bigram"`` if some head does on offset 1, else ``"uniform"``.
    """
    if not isinstance(stages, (list, tuple)):
        raise TypeError(f"stages must be a list of Stage; got {type(stages).__name__}")
    for i, st in enumerate(stages):
        check_instance(f"stages[{i}]", st, Stage)
    s = as_tensor("steps", steps, ndim=1).numpy()
    a1 = as_tensor("w1", w1, ndim=2).numpy()
    a2 = as_tensor("w2", w2, ndim=2).numpy()
    if a1.ndim != 2 or a1.shape != a2.shape or a1.shape[0] != s.size:
        raise ValueError(
            f"w1 and w2 must both have shape (n_ckpt, H) with n_ckpt = {s.size}; "
            f"got {a1.shape}, {a2.shape}"
        )
    threshold = check_float("threshold", threshold, minimum=0.0, maximum=1.0)
    out = []
    for st in stages:
        j = int(np.argmin(np.abs(s - 0.5 * (st.start + st.end))))
        if a2[j].max() > threshold:
            label = "trigram"
        elif a1[j].max() > threshold:
            label = "bigram"
        else:
            label = "uniform"
        out.append(Stage(st.start, st.end, st.loss, label))
    return out


def _tokens_present(tokens: torch.Tensor, S: int) -> torch.Tensor:
    present = torch.zeros(*tokens.shape[:-1], S, dtype=torch.bool, device=tokens.device)
    return present.scatter_(-1, tokens, True)


def _check_sequences_and_targets(
    tokens: Any, target: Any, S: Any
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """``(B, T)`` tokens in ``[0, S)`` and ``(B, S)`` next-token laws, checked together."""
    S = check_size("S", S, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    tok = check_tokens("tokens", tokens, S, ndim=2)
    tgt = check_prob_vector("target", target)
    if tgt.shape != (tok.shape[0], S):
        raise ValueError(
            f"target must have shape (B, S) = ({tok.shape[0]}, {S}), one row per sequence of "
            f"tokens and one column per token (S={S}); got {tuple(tgt.shape)}"
        )
    return tok, tgt, S


def absent_mass(tokens: torch.Tensor, target: torch.Tensor, S: int) -> torch.Tensor:
    """Per sequence, the true next-token mass on tokens absent from the sequence.

    The simplified transformer (Varre et al. 2025, Sec. 2.3) predicts an attention-weighted
    histogram of the sequence's tokens, so it gives these tokens probability zero; under the
    loss ``-log(p + eps)`` of the authors' code each unit of this mass costs ``-log eps`` nats.
    ``tokens``: ``(B, T)`` in ``[0, S)``; ``target``: ``(B, S)`` true next-token laws.
    Returns ``(B,)`` (float64).
    """
    tok, tgt, S = _check_sequences_and_targets(tokens, target, S)
    return (tgt * (~_tokens_present(tok, S)).double()).sum(-1)


def histogram_levels(
    tokens: torch.Tensor,
    target: torch.Tensor,
    S: int,
    ks: Sequence[int] = (1, 2, 3),
    *,
    betas: Any = None,
    eps: float = 1e-8,
) -> dict[int, tuple[float, float]]:
    """Best loss of an attention-weighted histogram that sees the ``(k-1)``-history.

    With scale ``c`` the second layer of θ*^k (Varre et al. 2025, eqs. (8a)-(8c)) gives each
    earlier position whose history matches weight ``e^c`` and every other position weight
    ``1``, so it predicts ``p(s) ∝ N_k(s) + β N_1(s)`` with ``β = e^{-c}``: the k-gram counts
    smoothed towards the sequence's own token counts, never onto absent tokens. For each
    ``k`` returns ``(loss, β)``: the smallest mean loss ``-Σ target log(p + eps)`` (eq. (1)
    with the ``eps`` of the authors' code) over the grid ``betas`` (default
    ``10^-4 .. 10^2``), and the ``β`` reaching it. For
    ``k = 1`` the prediction is the in-context unigram histogram whatever ``β``.
    """
    from .estimators import kgram_counts

    tok, tgt, S = _check_sequences_and_targets(tokens, target, S)
    eps = check_float("eps", eps, minimum=0.0, open_lower=True)
    grid = np.geomspace(1e-4, 1e2, 25) if betas is None else _as_1d("betas", betas)
    if grid.size == 0 or bool((grid < 0).any()):
        raise ValueError("betas must be a non-empty array of non-negative numbers")
    if isinstance(ks, (str, bytes)) or not isinstance(ks, (list, tuple, range, np.ndarray)):
        raise TypeError(f"ks must be a sequence of integers >= 1; got {ks!r}")
    ks = [check_size(f"ks[{i}]", k, limit=tok.shape[-1]) for i, k in enumerate(ks)]
    unigram = kgram_counts(tok, S, 1).double()
    out: dict[int, tuple[float, float]] = {}
    for k in ks:
        counts = kgram_counts(tok, S, k).double()
        best = (float("inf"), float("nan"))
        for b in grid:
            w = counts + float(b) * unigram
            tot = w.sum(-1, keepdim=True)
            p = torch.where(tot > 0, w / tot.clamp_min(1e-300), unigram / unigram.sum(-1, True))
            value = float(-(tgt * torch.log(p + eps)).sum(-1).mean())
            if value < best[0]:
                best = (value, float(b))
        out[k] = best
    return out
