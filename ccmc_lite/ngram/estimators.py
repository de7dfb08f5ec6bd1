"""In-context k-gram estimators and their cross-entropy (Varre, Yüce & Flammarion 2025).

* :func:`~ccmc_lite.ngram.kgram_counts` / :func:`~ccmc_lite.ngram.kgram_estimator` — Def. 2.1: look
  up every earlier occurrence of the last ``k-1`` tokens and count what followed, vectorised over
  batches and (optionally) over every position of the sequence.
* :func:`~ccmc_lite.ngram.subset_estimator` — the
  non-contiguous histories of App. F.2: match the tokens at a set ``N`` of offsets (``N = {1, ...,
  k-1}`` is the k-gram).
* :func:`~ccmc_lite.ngram.bayes_predictor` — the posterior mean of the next-token law under the
  Dirichlet(α) prior, i.e. the ``n``-gram counts smoothed by adding ``α`` (exact for the
  ``"uniform"`` start of :mod:`ccmc_lite.ngram`).
* :func:`~ccmc_lite.ngram.cross_entropy` — against the true next-token law or against sampled
  tokens.

Smoothing. The unsmoothed estimator (``smoothing=0``, the paper's Def. 2.1) gives probability 0 to
every token it has not seen after the history, so its cross-entropy is infinite with positive
probability. ``smoothing=β`` adds ``β`` to every count (``(count + β) / (total + Sβ)``); the book's
plateau lines use ``β = α``, the prior's concentration, which is the Bayes choice for the full
``n``-gram. Where an unsmoothed estimator has no match at all (``0/0``) it returns the uniform law;
:func:`~ccmc_lite.ngram.kgram_counts` exposes the counts so callers can see where that happened.

Positions. ``positions="last"`` predicts ``x_{T+1}`` from ``x_1..x_T`` (shape ``(*batch, S)``);
``positions="all"`` predicts the token after every position ``t`` from ``x_1..x_t``
(shape ``(*batch, T, S)``), in ``O(T^2)`` memory per sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..core.validation import (
    DEFAULT_LIMITS,
    as_tensor,
    check_choice,
    check_elements,
    check_float,
    check_int,
    check_numbers,
    check_power,
    check_prob_vector,
    check_size,
    check_tokens,
)

__all__ = [
    "bayes_predictor",
    "contiguous_offsets",
    "cross_entropy",
    "estimator_losses",
    "kgram_counts",
    "kgram_estimator",
    "smoothing_losses",
    "subset_estimator",
]


def contiguous_offsets(k: int) -> tuple[int, ...]:
    """The offsets ``(1, ..., k-1)`` of the contiguous ``(k-1)``-history (Def. 2.1)."""
    k = check_size("k", k, minimum=1)
    return tuple(range(1, k))


def _check_offsets(offsets: Sequence[int]) -> tuple[int, ...]:
    if isinstance(offsets, (str, bytes)) or not isinstance(offsets, Sequence):
        raise TypeError(f"offsets must be a sequence of positive integers; got {offsets!r}")
    out = tuple(check_size("offsets entry", o, minimum=1) for o in offsets)
    if len(set(out)) != len(out):
        raise ValueError(f"offsets must be distinct; got {offsets!r}")
    return tuple(sorted(out))


def _codes_with_virtual_end(x: torch.Tensor, S: int, offsets: tuple[int, ...]) -> torch.Tensor:
    """``code[..., l]`` encodes ``(x_{l-h})_{h in offsets}`` for ``l = 0..T`` (``T`` is virtual).

    Entries whose history leaves the sequence (``l < max(offsets)``) are ``-1``.
    """
    T = x.shape[-1]
    code = torch.zeros(*x.shape[:-1], T + 1, dtype=torch.long)
    for h in offsets:
        shifted = torch.zeros_like(code)
        if h <= T:  # a longer lag leaves the sequence everywhere (code -1 below)
            shifted[..., h:] = x[..., : T + 1 - h]
        code = code * S + shifted
    if offsets:
        code[..., : max(offsets)] = -1
    return code


def _subset_counts(
    tokens: torch.Tensor,
    S: int,
    offsets: Sequence[int],
    *,
    positions: str = "last",
    chunk: int = 4096,
) -> torch.Tensor:
    """Counts of the tokens that followed earlier matches of an ``N``-history (App. F.2).

    For the prediction of ``x_{t+1}``, a key position ``l <= t`` matches when ``x_{l-h} =
    x_{t+1-h}`` for every ``h`` in ``offsets`` (``N``; ``()`` gives unigram counts); keys whose
    history leaves the sequence are skipped, as in the sum ``l = k..T`` of Def. 2.1. Returns
    ``counts[..., s] = #{matching l : x_l = s}`` for ``tokens`` ``(*batch, T)``: ``(*batch,
    S)`` for ``positions="last"``, ``(*batch, T, S)`` for ``"all"`` (``chunk`` sequences at
    a time bound the ``(chunk, T, T)`` buffer).
    """
    S = check_size("S", S, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    offs = _check_offsets(offsets)
    # histories are coded as integers in base S: S^|offsets| must fit in int64
    n_hist = len(offs)
    check_power(f"k / offsets: {n_hist} history tokens, S^{n_hist} codes", S, n_hist, limit=2**62)
    positions = check_choice("positions", positions, ("last", "all"))
    x = check_tokens("tokens", tokens, S)
    if x.ndim < 1:
        raise ValueError(f"tokens must have a time axis; got shape {tuple(x.shape)}")
    chunk = check_int("chunk", chunk, minimum=1)
    batch, T = x.shape[:-1], x.shape[-1]
    flat = x.reshape(-1, T)
    check_elements("sequences * T * S (one-hot tokens)", flat.shape[0] * T * S)
    if positions == "all":
        check_elements("min(chunk, sequences) * T * T (matches)", min(chunk, flat.shape[0]) * T * T)
    onehot = torch.nn.functional.one_hot(flat, S).to(torch.float64)  # (N, T, S)
    code = _codes_with_virtual_end(flat, S, offs)  # (N, T+1)
    first = max(offs) if offs else 0
    if positions == "last":
        match = (code[:, :T] == code[:, T:]) & (code[:, T:] >= 0)  # (N, T)
        match[:, :first] = False
        counts = torch.einsum("nl,nls->ns", match.to(torch.float64), onehot)
        return counts.reshape(*batch, S)
    out = []
    keys_ok = torch.arange(T) >= first  # (T,)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))  # [t, l]: l <= t
    for start in range(0, flat.shape[0], chunk):
        c = code[start : start + chunk]
        q = c[:, 1:]  # (n, T): history of x_{t+1}
        match = (c[:, None, :T] == q[:, :, None]) & (q[:, :, None] >= 0)
        match = match & causal & keys_ok  # (n, T, T)
        out.append(
            torch.einsum("ntl,nls->nts", match.to(torch.float64), onehot[start : start + chunk])
        )
    return torch.cat(out).reshape(*batch, T, S)


def kgram_counts(
    tokens: torch.Tensor, S: int, k: int, *, positions: str = "last", chunk: int = 4096
) -> torch.Tensor:
    """Counts of Def. 2.1 (Varre et al. 2025): tokens following the current ``(k-1)``-history."""
    return _subset_counts(tokens, S, contiguous_offsets(k), positions=positions, chunk=chunk)


def _normalise(counts: torch.Tensor, S: int, smoothing: float) -> torch.Tensor:
    smoothed = counts + smoothing
    total = smoothed.sum(-1, keepdim=True)
    uniform = torch.full_like(smoothed, 1.0 / S)
    return torch.where(total > 0, smoothed / total.clamp_min(1e-300), uniform)


def subset_estimator(
    tokens: torch.Tensor,
    S: int,
    offsets: Sequence[int],
    *,
    smoothing: float = 0.0,
    positions: str = "last",
) -> torch.Tensor:
    """The ``N``-MLE estimator of App. F.2 (Varre et al. 2025), with add-``β`` smoothing.

    ``(count + β) / (total + Sβ)``; with ``β = 0`` and no match the uniform law is returned.
    """
    S = check_size("S", S, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    beta = check_float("smoothing", smoothing, minimum=0.0)
    counts = _subset_counts(tokens, S, offsets, positions=positions)
    return _normalise(counts, S, beta)


def kgram_estimator(
    tokens: torch.Tensor,
    S: int,
    k: int,
    *,
    smoothing: float = 0.0,
    positions: str = "last",
) -> torch.Tensor:
    """The k-gram estimator of Def. 2.1 (Varre et al. 2025), optionally add-``β`` smoothed.

    ``tokens``: ``(*batch, T)``; ``k >= 1`` (1: the in-context unigram, 2: the bigram);
    ``smoothing``: ``β >= 0`` added to every count (0: the MLE of Def. 2.1). Returns float64
    probabilities ``(*batch, S)`` for ``positions="last"`` (predicting ``x_{T+1}``) or
    ``(*batch, T, S)`` for ``"all"``.
    """
    k = check_size("k", k, minimum=1)
    return subset_estimator(
        tokens, S, contiguous_offsets(k), smoothing=smoothing, positions=positions
    )


def bayes_predictor(
    tokens: torch.Tensor, S: int, n: int, alpha: float, *, positions: str = "last"
) -> torch.Tensor:
    """Posterior-mean next-token law for an in-context ``n``-gram with a Dirichlet(α) prior.

    Each row of the transition tensor has an independent Dirichlet(α) prior and, given the
    sequence, an independent Dirichlet(α + counts) posterior (conjugacy), so the posterior
    mean of the row of the current history is ``(count + α) / (total + Sα)``: the
    ``n``-gram estimator smoothed with ``β = α``. This is exact when the first ``n-1``
    tokens do not depend on the transition tensor (the ``"uniform"`` start of
    :mod:`ccmc_lite.ngram`, also used by the authors' code); with the ``"stationary"``
    start the start's likelihood adds a factor π(x_1..x_{n-1}) that this ignores.
    """
    n = check_size("n", n, minimum=1)
    alpha = check_float("alpha", alpha, minimum=0.0, open_lower=True)
    return kgram_estimator(tokens, S, n, smoothing=alpha, positions=positions)


def cross_entropy(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-example cross-entropy ``-Σ_s target[s] log pred[s]`` in nats (Varre et al. eq. (1)).

    ``target`` is either a probability tensor of the same shape as ``pred`` (the true
    next-token law: lower variance) or an integer tensor of sampled tokens with one axis
    fewer. Terms with ``target[s] = 0`` contribute 0; a positive target on ``pred[s] = 0``
    gives ``+inf`` (an unsmoothed estimator that missed a token).
    """
    p = check_prob_vector("pred", pred, atol=1e-4)
    target = as_tensor("target", target, dtype=None)
    if target.is_floating_point():
        y = check_prob_vector("target", target, atol=1e-4)
        if y.shape != p.shape:
            raise ValueError(
                f"target must have the shape of pred {tuple(p.shape)} (one column per "
                f"token, S={p.shape[-1]}); got {tuple(y.shape)}"
            )
        safe = torch.where(y > 0, p, torch.ones_like(p))
        return -(y * torch.log(safe)).sum(-1)
    tok = check_tokens("target", target, p.shape[-1])
    if tuple(tok.shape) != tuple(p.shape[:-1]):
        raise ValueError(
            f"target tokens must have shape {tuple(p.shape[:-1])}; got {tuple(tok.shape)}"
        )
    picked = torch.gather(p, -1, tok.unsqueeze(-1)).squeeze(-1)
    return -torch.log(picked)


def _check_target_columns(target: Any, S: Any) -> None:
    """A probability ``target`` needs one column per token: ``S`` of them."""
    if isinstance(target, torch.Tensor) and target.is_floating_point() and target.ndim:
        if isinstance(S, int) and not isinstance(S, bool) and target.shape[-1] != S:
            raise ValueError(
                f"target has {target.shape[-1]} columns (tokens) but S={S}: pass the "
                "vocabulary size of the data"
            )


def smoothing_losses(
    tokens: torch.Tensor,
    target: torch.Tensor,
    S: int,
    offsets: Sequence[int],
    smoothings: Sequence[float] | np.ndarray | torch.Tensor,
) -> torch.Tensor:
    """Mean cross-entropy of the add-``β`` ``N``-estimator (App. F.2) for each ``β``.

    The counts do not depend on ``β``, so they are computed once: a sweep over ``β`` costs
    one count and one normalisation per value (``offsets = contiguous_offsets(k)`` gives
    the k-gram of Def. 2.1). ``tokens``, ``target`` and ``S`` are as in
    :func:`estimator_losses`; ``smoothings`` holds the ``β >= 0``.

    Returns
    -------
    Tensor
        ``(len(smoothings),)`` float64: the mean loss in nats for each ``β``.
    """
    S = check_size("S", S, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    _check_target_columns(target, S)
    betas = check_numbers("smoothings", smoothings, minimum=0.0, open_lower=False)
    counts = _subset_counts(tokens, S, offsets)  # (*batch, S)
    losses = [cross_entropy(_normalise(counts, S, b), target).mean() for b in betas]
    return torch.stack(losses).to(torch.float64)


def estimator_losses(
    tokens: torch.Tensor,
    target: torch.Tensor,
    S: int,
    ks: Sequence[int],
    *,
    smoothing: float,
) -> dict[int, float]:
    """Mean cross-entropy of the smoothed k-gram estimators for each ``k`` in ``ks``.

    ``target`` is the true law of ``x_{T+1}`` (``(B, S)``) or the sampled tokens (``(B,)``).
    Returns ``{k: mean loss in nats}``; the value is ``inf`` if ``smoothing = 0`` and an
    estimator missed a token somewhere.
    """
    _check_target_columns(target, S)
    out = {}
    for k in ks:
        pred = kgram_estimator(tokens, S, k, smoothing=smoothing)
        out[int(k)] = float(cross_entropy(pred, target).mean())
    return out
