"""The loss landscape at k-gram points (Varre, Yüce & Flammarion 2025, Secs. 3–4).

* :func:`~ccmc_lite.ngram.next_token_loss` — the in-context cross-entropy of eq. (1) against the
  true next-token law, differentiable, as used for training.
* :func:`~ccmc_lite.ngram.flat_gradient`, :func:`~ccmc_lite.ngram.lemma31_gradient` — the gradient
  by autograd and in the form of Lemma 3.1, ``E <p_θ - p_τ(·|x^T), ∂ log p_θ>`` (residual times
  score).
* :func:`~ccmc_lite.ngram.gradient_norm` — the norm of the *population* gradient from a Monte-Carlo
  batch, with an unbiased estimate of ``||∇L||²`` from two independent halves (the plain norm of a
  sample mean is inflated by sampling noise, which would hide the decay Thm. 4.2 predicts).
* :func:`~ccmc_lite.ngram.sequence_law`, :class:`~ccmc_lite.ngram.SuffixModel` — exact enumeration
  of all sequences of a fixed chain and a toy model whose score depends only on a suffix (Prop.
  3.2).
* :func:`~ccmc_lite.ngram.statistical_term` — the first of the two terms of Thm. 4.2,
  ``√c E||p_τ(·|x_{T-k+2}^T) - p̂_k||² + T √c e^{-c}``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from ..core.validation import (
    as_tensor,
    check_choice,
    check_float,
    check_instance,
    check_int,
    check_model_tokens,
    check_power,
    check_prob_vector,
    check_size,
    check_tokens,
)
from .data import NGramBatch, flatten_transitions, history_codes, suffix_conditional
from .models import construction_limit, offsets_for_k

__all__ = [
    "GradientNorm",
    "SuffixModel",
    "decay_fits",
    "exact_population_gradient",
    "flat_gradient",
    "gradient_blocks",
    "gradient_norm",
    "lemma31_gradient",
    "next_token_loss",
    "sequence_law",
    "statistical_term",
    "suffix_law",
    "unmatched_mass",
]


def _check_batch(
    model: Any, tokens: Any, target: Any, name: str = "target"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Entry checks shared by the gradient functions: a module, its tokens, a target law."""
    check_instance("model", model, nn.Module)
    tokens = check_model_tokens("tokens", tokens, model)
    _check_law(name, target, rows=tokens.shape[0])
    return tokens, target


def _check_law(name: str, value: Any, *, rows: int | None = None) -> torch.Tensor:
    """A tensor of next-token laws ``(..., S)`` (``rows`` leading entries if given)."""
    check_instance(name, value, torch.Tensor)
    law = check_prob_vector(name, value, atol=1e-4)
    if rows is not None and (law.ndim < 2 or law.shape[0] != rows):
        raise ValueError(f"{name} must have shape ({rows}, S); got {tuple(law.shape)}")
    return law


def next_token_loss(
    probs: torch.Tensor, target: torch.Tensor, *, eps: float = 1e-8, reduction: str = "mean"
) -> torch.Tensor:
    """Cross-entropy ``-Σ_s p_τ(s|x^T) log(p_θ(x^T)[s] + eps)`` (Varre et al. 2025, eq. (1)).

    ``probs`` and ``target`` are ``(..., S)``. Eq. (1) is the plain cross-entropy; the
    simplified transformer puts exactly zero mass on tokens absent from the sequence, where
    the plain logarithm is ``-inf``. ``eps = 1e-8``, the value of the authors' code, keeps
    the loss finite for training; it also saturates every token with ``p_θ[s] << eps``,
    whose gradient then vanishes (at θ*^k with ``e^{-c} << eps`` this removes the terms
    that grow like ``c``). ``eps = 0`` *drops* the zero-probability terms instead: they are
    an infinite constant that carries no gradient (``p_θ[s] ≡ 0`` in a neighbourhood), so
    the gradient is the exact gradient of eq. (1).
    """
    eps = check_float("eps", eps, minimum=0.0)
    reduction = check_choice("reduction", reduction, ("mean", "none"))
    check_instance("probs", probs, torch.Tensor)
    check_instance("target", target, torch.Tensor)
    if probs.shape != target.shape:
        raise ValueError(
            f"probs and target must have the same shape; got {tuple(probs.shape)} "
            f"and {tuple(target.shape)}"
        )
    _check_law("probs", probs)
    _check_law("target", target)
    if eps > 0:
        logp = torch.log(probs + eps)
    else:
        logp = torch.log(torch.where(probs > 0, probs, torch.ones_like(probs)))
    loss = -(target * logp).sum(-1)
    return loss.mean() if reduction == "mean" else loss


def _flatten(grads: Sequence[torch.Tensor | None], params: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat(
        [
            (g if g is not None else torch.zeros_like(p)).reshape(-1)
            for g, p in zip(grads, params, strict=True)
        ]
    )


def _params(model: nn.Module) -> list[torch.Tensor]:
    params: list[torch.Tensor] = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("model has no trainable parameters")
    return params


def flat_gradient(
    model: nn.Module,
    tokens: torch.Tensor,
    target: torch.Tensor,
    *,
    eps: float = 0.0,
) -> torch.Tensor:
    """Gradient of the mean :func:`next_token_loss` over the batch, flattened; ``(P,)``."""
    tokens, target = _check_batch(model, tokens, target)
    params = _params(model)
    loss = next_token_loss(model(tokens), target, eps=eps)
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return _flatten(grads, params)


def gradient_blocks(
    model: nn.Module, tokens: torch.Tensor, target: torch.Tensor, *, eps: float = 0.0
) -> dict[str, float]:
    """Norm of the mean-loss gradient for each named parameter (e.g. ``A1, V1, Q2, K2``)."""
    tokens, target = _check_batch(model, tokens, target)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise ValueError("model has no trainable parameters")
    loss = next_token_loss(model(tokens), target, eps=eps)
    grads = torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)
    return {
        n: (0.0 if g is None else float(g.norm())) for (n, _), g in zip(named, grads, strict=True)
    }


def lemma31_gradient(model: nn.Module, tokens: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The gradient in the form of Lemma 3.1: ``mean_b Σ_s (p_θ - p_τ)[b, s] ∂ log p_θ[b, s]``.

    The score ``∂ log p_θ[s]`` is formed explicitly (one backward pass per token ``s``);
    tokens with ``p_θ[s] = 0`` (absent from the sequence) have zero score. Agrees with
    :func:`flat_gradient` (``eps = 0``) because ``Σ_s ∂ p_θ[s] = 0`` on the simplex.
    """
    tokens, target = _check_batch(model, tokens, target)
    params = _params(model)
    probs = model(tokens)  # (B, S)
    safe = torch.where(probs > 0, probs, torch.ones_like(probs))
    logp = torch.log(safe)
    resid = (probs - target).detach()  # (B, S)
    total = None
    for s in range(probs.shape[-1]):
        # Σ_b resid[b, s] ∂ log p[b, s] = ∂ (Σ_b resid[b, s] log p[b, s]) with resid held fixed
        obj = (resid[:, s] * logp[:, s]).sum() / probs.shape[0]
        g = torch.autograd.grad(obj, params, retain_graph=True, allow_unused=True)
        flat = _flatten(g, params)
        total = flat if total is None else total + flat
    if total is None:
        raise ValueError("model returned probabilities over no symbols (shape (B, 0))")
    return total


@dataclass(frozen=True)
class GradientNorm:
    """Monte-Carlo estimates of the population gradient norm ``||∇L(θ)||``.

    Attributes
    ----------
    naive : float
        ``||ĝ||`` of the full-batch mean gradient (biased upwards by sampling noise).
    unbiased_sq : float
        ``<ĝ_A, ĝ_B>`` for two independent halves: an unbiased estimate of ``||∇L||²``
        (it can be negative when the true norm is below the noise).
    noise : float
        Estimated standard deviation of ``||ĝ||`` due to sampling: ``||ĝ_A - ĝ_B|| / 2``.
    """

    naive: float
    unbiased_sq: float
    noise: float

    @property
    def estimate(self) -> float:
        """``sqrt(max(unbiased_sq, 0))``: the debiased norm (0 when below the noise)."""
        return math.sqrt(max(self.unbiased_sq, 0.0))


def gradient_norm(
    model: nn.Module,
    tokens: torch.Tensor,
    target: torch.Tensor,
    *,
    eps: float = 0.0,
    chunk: int = 8192,
) -> GradientNorm:
    """Estimate the population gradient norm at the model's current parameters.

    The batch is split into two halves ``A`` and ``B`` (each processed in chunks); returns
    :class:`GradientNorm`. ``eps = 0`` gives the exact gradient of the population loss
    (see :func:`next_token_loss`).
    """
    tokens, target = _check_batch(model, tokens, target)
    B = tokens.shape[0]
    if B < 2:
        raise ValueError(f"need at least 2 sequences to split into halves; got {B}")
    chunk = check_int("chunk", chunk, minimum=1)
    half = B // 2

    def mean_grad(lo: int, hi: int) -> torch.Tensor:
        acc = None
        for s in range(lo, hi, chunk):
            e = min(s + chunk, hi)
            g = flat_gradient(model, tokens[s:e], target[s:e], eps=eps) * (e - s)
            acc = g if acc is None else acc + g
        if acc is None:
            raise ValueError(f"empty half [{lo}, {hi}) of the batch")
        return acc / (hi - lo)

    gA = mean_grad(0, half).double()
    gB = mean_grad(half, 2 * half).double()
    g = 0.5 * (gA + gB)
    return GradientNorm(
        naive=float(g.norm()),
        unbiased_sq=float(gA @ gB),
        noise=float((gA - gB).norm() / 2),
    )


# --------------------------------------------------------------------- Prop 3.2 toy model


def sequence_law(
    P: torch.Tensor, T: int, *, start: str = "uniform"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exact law of all ``S^T`` sequences of one n-gram chain (for small ``S^T``).

    ``P``: ``(S, ..., S)`` with ``n`` axes (one chain, no batch axis). Returns
    ``tokens`` ``(S^T, T)``, their probabilities ``(S^T,)`` and the next-token law after
    the last position ``(S^T, S)``. ``start`` as in :mod:`ccmc_lite.ngram`.
    """
    P = check_prob_vector("P", P)
    S = int(P.shape[-1])
    n = P.ndim
    T = check_size("T", T, minimum=n)
    start = check_choice("start", start, ("uniform", "stationary"))
    check_power("S^T sequences to enumerate", S, T, limit=2_000_000)
    flat = flatten_transitions(P.unsqueeze(0), S, n)[0]  # (H, S)
    tokens = torch.tensor(list(itertools.product(range(S), repeat=T)), dtype=torch.long)
    m = n - 1
    if m == 0:
        logp = torch.log(flat[0])[tokens].sum(-1)
        nxt = flat[0].expand(tokens.shape[0], S)
        return tokens, logp.exp(), nxt.clone()
    if start == "uniform":
        init = torch.full((S**m,), 1.0 / S**m, dtype=torch.float64)
    else:
        from .data import lifted_stationary

        init = lifted_stationary(P.unsqueeze(0), S, n)[0]
    codes = history_codes(tokens, S, m)  # (N, T)
    prob = init[codes[:, m - 1]]
    for t in range(m - 1, T - 1):
        prob = prob * flat[codes[:, t], tokens[:, t + 1]]
    nxt = flat[codes[:, T - 1]]
    return tokens, prob, nxt


class SuffixModel(nn.Module):
    """Toy model ``p_θ(x^T) = softmax(W[x_{T-L+1}, ..., x_T])`` (Prop. 3.2 illustration).

    Its score ``∂ log p_θ`` depends only on the last ``L`` tokens, so by Prop. 3.2 the
    population gradient is ``E <p_θ - p_τ(·|x_{T-L+1}^T), ∂ log p_θ>`` and vanishes when
    ``softmax(W[h]) = p_τ(·|suffix = h)``. ``L = 0`` is a constant predictor: its
    stationary point predicts the marginal law of ``x_{T+1}`` (the unigram point).
    """

    def __init__(self, S: int, suffix_len: int) -> None:
        super().__init__()
        self.S = check_size("S", S, minimum=2)
        self.L = check_size("suffix_len", suffix_len, minimum=0)
        check_power("S^suffix_len", self.S, self.L)
        self.W = nn.Parameter(torch.zeros(self.S**self.L, self.S, dtype=torch.float64))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(B, S)`` next-token probabilities."""
        tokens = check_tokens("tokens", tokens, self.S, ndim=2)
        if self.L > tokens.shape[-1]:
            raise ValueError(
                f"tokens has {tokens.shape[-1]} positions, fewer than the model's "
                f"suffix_len={self.L}"
            )
        code = history_codes(tokens, self.S, self.L)[:, -1] if self.L else tokens[:, 0] * 0
        return torch.softmax(self.W[code], dim=-1)


def suffix_law(
    tokens: torch.Tensor, prob: torch.Tensor, nxt: torch.Tensor, S: int, L: int
) -> torch.Tensor:
    """``p(x_{T+1} | x_{T-L+1}^T = h)`` for every suffix ``h`` of an enumerated law.

    Returns ``(S^L, S)``; suffixes of probability zero get the uniform row.
    """
    S = check_size("S", S, minimum=2)
    L = check_size("L", L, minimum=0)
    check_power("S^L suffixes", S, L)
    tokens = check_tokens("tokens", tokens, S, ndim=2)
    if L > tokens.shape[-1]:
        raise ValueError(f"L={L} exceeds the {tokens.shape[-1]} tokens of each sequence")
    prob = check_prob_vector("prob", prob)
    nxt = _check_law("nxt", nxt, rows=tokens.shape[0])
    if nxt.shape[-1] != S:
        raise ValueError(f"nxt has {nxt.shape[-1]} columns (tokens) but S={S}")
    if prob.shape != (tokens.shape[0],):
        raise ValueError(f"prob must have shape ({tokens.shape[0]},); got {tuple(prob.shape)}")
    code = (
        history_codes(tokens, S, L)[:, -1] if L else torch.zeros(tokens.shape[0], dtype=torch.long)
    )
    joint = torch.zeros(S**L, S, dtype=torch.float64).index_add_(0, code, prob[:, None] * nxt)
    tot = joint.sum(-1, keepdim=True)
    return torch.where(tot > 0, joint / tot.clamp_min(1e-300), torch.full_like(joint, 1.0 / S))


# --------------------------------------------------------------------- Theorem 4.2


def statistical_term(batch: NGramBatch, k: int, *, start: str = "uniform") -> float:
    """``E ||p_τ(·|x_{T-k+2}^T) - p̂_k||²`` at the last position (Thm. 4.2, first term).

    ``p̂_k`` is what θ*^k computes as ``c -> ∞`` (:func:`ccmc_lite.ngram.construction_limit`,
    the k-gram estimator with the paper's boundary convention and back-off when nothing
    matches); ``p_τ(·|suffix)`` is exact (:func:`ccmc_lite.ngram.suffix_conditional`).
    """
    check_instance("batch", batch, NGramBatch)
    k = check_size("k", k, minimum=1)
    P = batch.transitions
    S = int(P.shape[-1])
    n = P.ndim - 1
    T = batch.tokens.shape[-1]
    cond = suffix_conditional(P, k, T, start=start, n=n)  # (B, S^(k-1), S)
    code = history_codes(batch.tokens, S, k - 1)[:, -1]  # (B,)
    truth = cond[torch.arange(cond.shape[0]), code]  # (B, S)
    est = construction_limit(batch.tokens, S, offsets_for_k(k, max(n - 1, k - 1)))
    return float(((truth - est) ** 2).sum(-1).mean())


def unmatched_mass(batch: NGramBatch, k: int) -> torch.Tensor:
    """Per sequence, the true next-token mass on tokens that θ*^k suppresses by ``e^{-c}``.

    These are the tokens that occur in the sequence but never right after an earlier
    occurrence of the current ``(k-1)``-history (when the history has occurred at all). At
    scale ``c`` the construction θ*^k (Varre et al. 2025, eqs. (8a)-(8c)) gives them
    probability ``O(e^{-c})``, so their loss terms ``-log p`` grow like ``c``, and so does the
    score ``∂ log p = ∂p / p`` although ``∂p`` itself is ``O(c e^{-c})``: the proof of Thm. 4.2
    bounds ``∂p``, not ``∂ log p``. Returns ``(B,)`` (float64); ``k >= 2``.
    """
    from .estimators import kgram_counts

    check_instance("batch", batch, NGramBatch)
    k = check_int("k", k, minimum=2)
    tokens = batch.tokens
    S = int(batch.transitions.shape[-1])
    T = tokens.shape[-1]
    if T < k:
        raise ValueError(f"sequences of length {T} have no (k-1)-history for k={k}")
    truth = batch.target.double()  # (B, S): true law of x_{T+1}
    present = torch.zeros(tokens.shape[0], S, dtype=torch.bool).scatter_(-1, tokens, True)
    counts = kgram_counts(tokens, S, k)  # (B, S): continuations of the current history
    matched = counts.sum(-1, keepdim=True) > 0
    suppressed = present & (counts == 0) & matched
    return (truth * suppressed.double()).sum(-1)


def decay_fits(T: Any, values: Any) -> dict[str, tuple[float, float]]:
    """Power law ``a T^{-p}`` against exponential ``a e^{-r T}``, fitted to a decay in ``T``.

    Thm. 4.2 of Varre et al. (2025) states that the statistical term decays like
    ``e^{-Θ(T)}``. Both models are fitted by least squares to ``log values``; returns
    ``{"power": (p, rms), "exponential": (r, rms)}`` with the exponent (or rate) and the
    root-mean-square residual in ``log`` units: the smaller residual is the better model.
    """
    t = as_tensor("T", T, dtype=torch.float64, ndim=1).numpy()
    v = as_tensor("values", values, dtype=torch.float64, ndim=1).numpy()
    if t.shape != v.shape or t.size < 3:
        raise ValueError("T and values need the same length, at least 3")
    if np.any(t <= 0) or np.any(v <= 0):
        raise ValueError("T and values must be positive")
    if np.unique(t).size < 3:
        raise ValueError(
            f"T must hold at least 3 distinct values to compare two 2-parameter fits; got "
            f"{np.unique(t).size} ({np.unique(t).tolist()})"
        )
    out = {}
    for name, x in (("power", np.log(t)), ("exponential", t)):
        A = np.stack([np.ones_like(x), x], axis=1)
        coef, *_ = np.linalg.lstsq(A, np.log(v), rcond=None)
        rms = float(np.sqrt(np.mean((A @ coef - np.log(v)) ** 2)))
        out[name] = (float(-coef[1]), rms)
    return out


def exact_population_gradient(
    model: nn.Module, tokens: torch.Tensor, prob: torch.Tensor, nxt: torch.Tensor
) -> torch.Tensor:
    """``∇ Σ_x p(x) CE(p(·|x), p_θ(x))`` for an enumerated law (:func:`sequence_law`); ``(P,)``."""
    tokens, nxt = _check_batch(model, tokens, nxt, "nxt")
    check_prob_vector("prob", prob)
    if tuple(prob.shape) != (tokens.shape[0],):
        raise ValueError(f"prob must have shape ({tokens.shape[0]},); got {tuple(prob.shape)}")
    params = _params(model)
    loss = (prob * next_token_loss(model(tokens), nxt, eps=0.0, reduction="none")).sum()
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return _flatten(grads, params)
