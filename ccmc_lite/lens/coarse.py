"""One lens on the three papers: next-token prediction through a coarse statistic.

All three parts of the book study a cross-entropy next-token loss
``L(θ) = E[-log p_θ(y | c)]`` over contexts ``c`` and next tokens ``y``. Its gradient is
``E⟨p_θ(c) - q(·|c), ∂_θ log p_θ(c)⟩`` (Varre et al. 2025, Lemma 3.1; Makkuva et al.
2024, Lemma 2). If, at some θ*, both the prediction and the score depend on ``c`` only
through a statistic ``s(c)`` — nothing at all for the unigram point of Makkuva et al.,
the last ``k - 1`` tokens for Varre et al.'s ``k``-gram constructions, the token counts
and last token for Ildiz et al.'s CCMC (Lemma 2.2) — then the gradient only sees
``p_θ*(s) - q(·|s)`` (Varre et al. 2025, Prop. 3.2 and App. C.2). It vanishes when the
model predicts the conditional law given the statistic, and the loss then exceeds the
best achievable one by the conditional mutual information ``I(y; c | s)``.

This module computes those quantities for any finite joint law of ``(c, y)``:

* :func:`~ccmc_lite.lens.coarse_predictor` — ``q(y | s(c))``, the stationary prediction;
* :func:`~ccmc_lite.lens.conditional_entropy` — ``H(y | s)``, the loss of that prediction;
* :func:`~ccmc_lite.lens.coarse_gap` — ``I(y; c | s) = H(y | s) - H(y | c)``, its excess loss;
* :func:`~ccmc_lite.lens.ngram_levels` — for an ``n``-gram chain in its stationary regime, the
  levels ``H(x_{t+1} | last k-1 tokens)``, ``k = 1..n``: the large-``T`` limits of the ``k``-gram
  plateaus of Part III.
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.validation import DEFAULT_LIMITS, as_tensor, check_size

__all__ = ["coarse_gap", "coarse_predictor", "conditional_entropy", "ngram_levels"]


def _check_joint(joint: Any) -> torch.Tensor:
    J = as_tensor("joint", joint, ndim=2)  # (N contexts, S next tokens)
    if J.shape[0] == 0 or J.shape[1] == 0:
        raise ValueError(f"joint must be non-empty; got shape {tuple(J.shape)}")
    if bool((J < 0).any()):
        worst = int(J.argmin())
        raise ValueError(
            "joint must have non-negative entries (probabilities); got "
            f"{float(J.flatten()[worst]):.6g} at {divmod(worst, J.shape[1])}"
        )
    total = float(J.sum())
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"joint must sum to 1 over contexts and next tokens; sums to {total:.6g}")
    return J


def _check_groups(groups: Any, n_contexts: int) -> torch.Tensor:
    if groups is None:
        return torch.arange(n_contexts)
    g = as_tensor("groups", groups, dtype=torch.long, ndim=1)
    if g.shape[0] != n_contexts:
        raise ValueError(
            f"groups must give one statistic value per context ({n_contexts}); got {g.shape[0]}"
        )
    if bool((g < 0).any()):
        raise ValueError(f"groups must hold non-negative statistic ids; got {int(g.min())}")
    return torch.unique(g, return_inverse=True)[1]  # ids 0..G-1: tables sized by G, not max id


def _group_joint(J: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Joint law of (statistic, next token): (G, S)."""
    G = int(g.max()) + 1
    return torch.zeros(G, J.shape[1], dtype=J.dtype).index_add_(0, g, J)


def _entropy_rows(J: torch.Tensor) -> torch.Tensor:
    """Σ_rows p(row) H(y | row) for a joint (rows, S), with 0 log 0 = 0."""
    mass = J.sum(1, keepdim=True)
    cond = torch.where(mass > 0, J / mass.clamp_min(1e-300), torch.zeros_like(J))
    logs = torch.where(cond > 0, cond.log(), torch.zeros_like(cond))
    return -(J * logs).sum()


def conditional_entropy(joint: Any, groups: Any = None) -> torch.Tensor:
    """``H(y | s(c))`` in nats of a joint law ``joint[c, y]`` ``(N, S)`` (summing to one).

    ``groups``: ``(N,)`` non-negative statistic ids ``s(c)``; ``None`` means the full context.
    """
    J = _check_joint(joint)
    return _entropy_rows(_group_joint(J, _check_groups(groups, J.shape[0])))


def coarse_gap(joint: Any, groups: Any) -> torch.Tensor:
    """``I(y; c | s(c)) = H(y | s) - H(y | c) >= 0``: the excess loss of the best coarse model."""
    J = _check_joint(joint)
    g = _check_groups(groups, J.shape[0])
    return _entropy_rows(_group_joint(J, g)) - _entropy_rows(J)


def coarse_predictor(joint: Any, groups: Any) -> torch.Tensor:
    """``q(y | s(c))`` for every context: shape (N, S), rows sum to one.

    A context whose statistic has zero probability gets the uniform law (any prediction is
    stationary there).
    """
    J = _check_joint(joint)
    g = _check_groups(groups, J.shape[0])
    Gj = _group_joint(J, g)
    mass = Gj.sum(1, keepdim=True)
    cond = torch.where(mass > 0, Gj / mass.clamp_min(1e-300), torch.full_like(Gj, 1 / J.shape[1]))
    return cond[g]


def ngram_levels(P: Any, S: int, n: int) -> torch.Tensor:
    """``H(x_{t+1} | x_{t-k+2..t})`` for ``k = 1..n`` under the stationary law, in nats.

    ``P`` has shape ``(*batch, S, ..., S)`` with ``n`` axes (Varre et al. 2025, Sec. 2.1;
    the last axis is the next token). Level ``k`` is the large-``T`` loss of the ``k``-gram
    estimator (App. H, Lemma H.6); level ``n`` is the entropy rate. Returns
    ``(*batch, n)``, non-increasing in ``k``.
    """
    from ..ngram.data import flatten_transitions, lifted_stationary

    S = check_size("S", S, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    n = check_size("n", n, minimum=1)
    Pt = as_tensor("P", P, dtype=torch.float64)
    flat = flatten_transitions(Pt, S, n)  # (*b, H, S): next-token law per history
    pi = lifted_stationary(Pt, S, n)  # (*b, H)
    joint = pi.unsqueeze(-1) * flat  # (*b, H, S): law of (history, next)
    H = flat.shape[-2]
    codes = torch.arange(H)
    levels = []
    for k in range(1, n + 1):
        groups = codes % S ** (k - 1)  # the last k-1 tokens of the history
        G = S ** (k - 1)
        grouped = torch.zeros(*joint.shape[:-2], G, S, dtype=joint.dtype)
        grouped.index_add_(-2, groups, joint)
        mass = grouped.sum(-1, keepdim=True)
        cond = grouped / mass.clamp_min(1e-300)
        logs = torch.where(cond > 0, cond.log(), torch.zeros_like(cond))
        levels.append(-(grouped * logs).sum((-1, -2)))
    return torch.stack(levels, dim=-1)
