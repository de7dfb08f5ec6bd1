"""Markov-chain quantities shared by every part: stationary law, entropies, mutual information.

One copy of each idea, used by Part I (reweighted chains), Part II (the binary and
``K``-state kernels of Makkuva et al. 2024, Sec. 2.2), Part III (the lifted chain of
Varre et al. 2025, App. H) and the closing chapter. Kernels are row-stochastic,
``P[i, j] = P(x_{t+1} = j | x_t = i)``, batched as ``(..., K, K)``; logarithms are
natural (nats), with ``0 log 0 = 0``.
"""

from __future__ import annotations

from typing import Any

import torch

from .validation import check_prob_vector, check_stochastic_matrix

__all__ = [
    "entropy",
    "entropy_rate",
    "mutual_information",
    "stationary_distribution",
    "unigram_entropy",
]


def stationary_distribution(P: Any, *, name: str = "P") -> torch.Tensor:
    """The stationary law ``π`` with ``π P = π`` of kernels ``P`` ``(..., K, K)`` (``(..., K)``).

    Solves ``π (P - I) = 0`` with one equation replaced by ``sum(π) = 1`` (an LU solve in
    float64: the same bits in every process with the same thread count). For ``P(p, q)`` this
    is ``(q, p) / (p + q)`` (Makkuva et al. 2024, Sec. 2.2). Raises ``ValueError`` (naming
    ``name``) if ``P`` is not row-stochastic or a chain has no unique stationary law (a
    reducible kernel such as the identity).
    """
    P = check_stochastic_matrix(name, P)
    P = P / P.sum(-1, keepdim=True)  # exact row sums (inputs pass with rows within 1e-6)
    K = P.shape[-1]
    A = (P - torch.eye(K, dtype=P.dtype)).transpose(-1, -2).clone()  # (..., K, K): A pi = 0
    A[..., -1, :] = 1.0  # the last equation becomes sum(pi) = 1
    b = torch.zeros(*P.shape[:-1], 1, dtype=P.dtype)  # (..., K, 1)
    b[..., -1, 0] = 1.0
    # The replaced system is non-singular iff the eigenvalue 1 of P is simple, i.e. iff the
    # stationary law is unique. An LU pivot of (near) zero, or a solution that is not a
    # non-negative fixed point of P, means it is not.
    sol, info = torch.linalg.solve_ex(A, b)
    pi = sol[..., 0]  # (..., K)
    ok = (info == 0) & torch.isfinite(pi).all(-1)
    pi = torch.where(ok.unsqueeze(-1), pi, torch.zeros_like(pi))
    residual = (pi.unsqueeze(-2) @ P).squeeze(-2) - pi  # (..., K)
    ok &= (pi.min(-1).values > -1e-9) & (residual.abs().amax(-1) < 1e-8)
    if not bool(ok.all()):
        raise ValueError(
            f"{name} must have a unique stationary distribution (an irreducible chain); "
            "got a kernel whose eigenvalue 1 is not simple"
        )
    pi = pi.clamp_min(0.0)
    return pi / pi.sum(-1, keepdim=True)


def entropy(p: Any, *, name: str = "p") -> torch.Tensor:
    """Shannon entropy ``H(p) = -sum_i p_i log p_i`` in nats along the last axis.

    ``p`` must hold probability vectors (non-negative, summing to one along the last axis);
    zero probabilities contribute zero. A kernel ``P`` gives the entropy of each row.
    """
    p = check_prob_vector(name, p)
    logs = torch.where(p > 0, p.log(), torch.zeros_like(p))
    return -(p * logs).sum(-1)


def entropy_rate(P: Any) -> torch.Tensor:
    """The entropy rate ``H(x_{n+1} | x_n) = sum_i pi_i H(P_i)`` of a stationary chain (nats).

    By Lemma 1 of Makkuva et al. (2024) this is the smallest possible next-token loss of a
    model that sees the previous token.
    """
    pi = stationary_distribution(P)
    return (pi * entropy(P, name="P")).sum(-1)


def unigram_entropy(P: Any) -> torch.Tensor:
    """``H(pi)``: the loss of the best predictor that ignores the past (the *unigram*)."""
    return entropy(stationary_distribution(P), name="pi")


def mutual_information(P: Any) -> torch.Tensor:
    """``I(x_n; x_{n+1}) = H(pi) - H(x_{n+1} | x_n)`` under the stationary law (nats).

    Makkuva et al. (2024, Remark 2): the optimality gap of the unigram point.
    """
    return unigram_entropy(P) - entropy_rate(P)
