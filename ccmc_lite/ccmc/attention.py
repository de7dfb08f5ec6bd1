"""One self-attention layer and its CCMC, Ildiz et al. 2024, Sec. 2.2–2.3 and App. A.

The model (eq. (SA)): a prompt ``X = (x_1..x_L)`` is embedded row-wise with the token
embeddings ``E`` (``(K, d)``, row ``k`` is ``e_k``), the last token is the query, the value
weights are the identity, and

.. math::

    f_W(X) = \\mathbf X^\\top \\mathbb S(\\mathbf X W x_L) \\in \\mathbb R^d,
    \\qquad \\text{next-token distribution } C f_W(X).

Under Assumption 2.3 (``C Eᵀ = I``, independent embeddings, ``d >= K``) this *is* the CCMC of the
base chain ``P^W`` (eq. (4)): Lemma 2.2 gives ``f_W(X) = Eᵀ π^X``. The map ``W ↦ P^W`` is a
bijection between the subspace :math:`\\mathcal S_E` (Def. 2.4) and the transition matrices with
positive entries (Thm. 2.6); :func:`~ccmc_lite.ccmc.weights_from_transition` implements its inverse
for any ``E`` with independent rows.

Book convention: ``P^W[i, j] = softmax_j(e_jᵀ W e_i)`` — row ``i`` is the distribution
out of state ``i`` (the paper writes the same vectors as columns).
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.seeding import torch_generator
from ..core.validation import (
    DEFAULT_LIMITS,
    as_tensor,
    check_choice,
    check_finite_result,
    check_seed,
    check_size,
    check_tokens,
)
from .chain import VARIANTS, check_transition

__all__ = [
    "attention_scores",
    "check_embeddings",
    "cross_attention",
    "embed",
    "logits_from_weights",
    "next_token_distribution",
    "positional_embeddings",
    "positional_factors",
    "project_onto_subspace",
    "random_embeddings",
    "self_attention",
    "subspace_basis",
    "transition_from_weights",
    "weights_from_logits",
    "weights_from_transition",
]

#: Relative tolerance on singular values when checking linear independence.
RANK_RTOL = 1e-10


def check_embeddings(E: Any, *, name: str = "E") -> torch.Tensor:
    """Check embeddings ``E`` ``(K, d)`` (row ``k`` is :math:`e_k`) against Assumption 2.3.

    Returns ``E`` as float64. Raises ``ValueError`` (naming ``name``) if ``d < K`` or the rows
    are linearly dependent (then no ``C`` with ``C Eᵀ = I`` exists and the CCMC
    correspondence fails), or on NaN/inf.
    """
    E = as_tensor(name, E, dtype=torch.float64, ndim=2)
    K, d = E.shape
    if K < 2:
        raise ValueError(f"{name} must embed at least K=2 tokens; got shape {tuple(E.shape)}")
    if d < K:
        raise ValueError(
            f"{name} must have d >= K (Assumption 2.3 needs K independent embeddings in R^d); "
            f"got K={K}, d={d}"
        )
    sv = torch.linalg.svdvals(E)
    if float(sv[-1]) <= RANK_RTOL * float(sv[0]):
        rank = int((sv > RANK_RTOL * sv[0]).sum())
        raise ValueError(
            f"{name} must have linearly independent rows (Assumption 2.3); got rank {rank} < K={K}"
        )
    return E


def _check_W(W: Any, d: int, *, name: str = "W", batched: bool = False) -> torch.Tensor:
    W = as_tensor(name, W, dtype=torch.float64, ndim=None if batched else 2)
    if W.ndim < 2 or W.shape[-2:] != (d, d):
        raise ValueError(f"{name} must have shape (..., {d}, {d}) to match E; got {tuple(W.shape)}")
    return W


def _tied_classifier(E: Any) -> torch.Tensor:
    """The head :math:`C = (EE^\\top)^{-1}E` with :math:`CE^\\top = I_K` (``E = I``: tying)."""
    E = check_embeddings(E)
    return torch.linalg.solve(E @ E.T, E)


def random_embeddings(K: int, d: int, *, seed: int) -> torch.Tensor:
    """Gaussian embeddings ``(K, d)`` from ``seed``, scaled by ``1/sqrt(d)``, ``d >= K``.

    Their rows are independent with probability one (checked by :func:`check_embeddings`).
    """
    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    d = check_size("d", d, minimum=1)
    g = torch_generator(check_seed(seed))
    E = torch.randn(K, d, generator=g, dtype=torch.float64) / d**0.5
    return check_embeddings(E)


def embed(E: Any, X: Any, U: Any = None) -> torch.Tensor:
    """Embed prompts ``X`` ``(..., L)``: :math:`\\mathbf X = [e_{x_1} \\dots e_{x_L}]^\\top`.

    Returns ``(..., L, d)``; ``U``: optional ``(L, d)`` absolute positions (App. A:
    :math:`x_i = u_i + e_{x_i}`).
    """
    E = as_tensor("E", E, dtype=torch.float64, ndim=2)
    X = check_tokens("X", X, E.shape[0])
    if X.ndim == 0:
        raise ValueError("X must be a sequence of tokens, not a scalar")
    out = E[X]  # (..., L, d)
    if U is not None:
        U = as_tensor("U", U, dtype=torch.float64, ndim=2)
        if U.shape != (X.shape[-1], E.shape[1]):
            raise ValueError(
                f"U must have shape (L, d) = ({X.shape[-1]}, {E.shape[1]}); got {tuple(U.shape)}"
            )
        out = out + U
    return out


def attention_scores(
    W: Any, E: Any, X: Any, *, variant: str = "self", U: Any = None
) -> torch.Tensor:
    """Softmax attention :math:`s_X = \\mathbb S(\\mathbf X W x_L)` over the keys (eq. (SA)/(CA)).

    ``W``: ``(d, d)`` key–query weights; ``X``: ``(L,)`` or ``(B, L)``; ``U``: optional
    ``(L, d)`` positions. Keys are all ``L`` tokens (``"self"``) or the first ``L - 1``
    (``"cross"``); returns ``(..., L)`` or ``(..., L - 1)``, summing to one.
    """
    variant = check_choice("variant", variant, VARIANTS)
    E = as_tensor("E", E, dtype=torch.float64, ndim=2)
    W = _check_W(W, E.shape[1])
    Xe = embed(E, X, U)  # (..., L, d)
    if variant == "cross":
        if Xe.shape[-2] < 2:
            raise ValueError("X must have at least 2 tokens for cross-attention")
        keys = Xe[..., :-1, :]
    else:
        keys = Xe
    query = Xe[..., -1, :]  # (..., d)
    scores = check_finite_result(keys @ (W @ query[..., None]), "the attention scores", "W, E")
    return torch.softmax(scores, dim=-2).squeeze(-1)


def self_attention(W: Any, E: Any, X: Any, *, U: Any = None) -> torch.Tensor:
    """Self-attention output :math:`f_W(X)=\\mathbf X^\\top\\mathbb S(\\mathbf XWx_L)` (eq. (SA)).

    ``X``: ``(L,)`` or ``(B, L)``; ``U``: optional ``(L, d)`` positions (App. A); returns
    ``(d,)`` or ``(B, d)``.
    """
    s = attention_scores(W, E, X, variant="self", U=U)  # (..., L)
    Xe = embed(E, X, U)
    return check_finite_result((Xe * s[..., None]).sum(-2), "the attention output", "W, E")


def cross_attention(W: Any, E: Any, X: Any) -> torch.Tensor:
    """Cross-attention output :math:`\\bar X^\\top \\mathbb S(\\bar X W x_L)` (Sec. 2.3, (CA)).

    Keys are :math:`\\bar X = [x_1 \\dots x_{L-1}]`; the query :math:`x_L` is not a key.
    ``X``: ``(L,)`` or ``(B, L)``, ``L >= 2``; returns ``(d,)`` or ``(B, d)``.
    """
    s = attention_scores(W, E, X, variant="cross")  # (..., L-1)
    keys = embed(E, X)[..., :-1, :]
    return check_finite_result((keys * s[..., None]).sum(-2), "the attention output", "W, E")


def next_token_distribution(
    W: Any,
    E: Any,
    X: Any,
    *,
    C: Any = None,
    variant: str = "self",
    U: Any = None,
) -> torch.Tensor:
    """The model's next-token distribution :math:`C f_W(X)` (Sec. 2.2, "sampling from softmax").

    ``E`` must satisfy Assumption 2.3 and the head ``C`` (default: the pseudo-inverse of
    ``E``) ``C Eᵀ = I``; with positions ``U`` (``(L, d)``, self-attention only) also
    ``C Uᵀ = 0`` (Assumption A.1). ``X``: ``(L,)`` or ``(B, L)``; returns ``(K,)`` or
    ``(B, K)``.
    """
    variant = check_choice("variant", variant, VARIANTS)
    E = check_embeddings(E)
    C = _tied_classifier(E) if C is None else as_tensor("C", C, dtype=torch.float64, ndim=2)
    if C.shape != E.shape:
        raise ValueError(f"C must have shape {tuple(E.shape)} like E; got {tuple(C.shape)}")
    K = E.shape[0]
    err = (C @ E.T - torch.eye(K, dtype=torch.float64)).abs().max()
    if float(err) > 1e-8:
        raise ValueError(f"C must satisfy C E^T = I (Assumption 2.3); max deviation {err:.3g}")
    if U is not None:
        if variant != "self":
            raise ValueError("positional embeddings U are supported for self-attention only")
        U = as_tensor("U", U, dtype=torch.float64, ndim=2)
        dev = (C @ U.T).abs().max()
        if float(dev) > 1e-8:
            raise ValueError(f"C must satisfy C U^T = 0 (Assumption A.1); max deviation {dev:.3g}")
        f = self_attention(W, E, X, U=U)
    else:
        f = self_attention(W, E, X) if variant == "self" else cross_attention(W, E, X)
    return f @ C.T


def logits_from_weights(W: Any, E: Any) -> torch.Tensor:
    """Logits :math:`\\Theta[i, j] = e_j^\\top W e_i` ``(..., K, K)`` of the base chain (eq. (4)).

    ``P^W = softmax(Θ, dim=-1)`` (book rows).
    """
    E = as_tensor("E", E, dtype=torch.float64, ndim=2)
    W = _check_W(W, E.shape[1], batched=True)
    logits = (E @ W @ E.T).transpose(-1, -2)
    return check_finite_result(logits, "the logits e_jᵀ W e_i", "W, E")


def transition_from_weights(W: Any, E: Any) -> torch.Tensor:
    """The base chain :math:`P^W` ``(..., K, K)`` of the attention weights (eq. (4)).

    The paper writes :math:`P^W = [\\pi_1 \\dots \\pi_K]` with columns :math:`\\pi_i = \\mathbb
    S(E W e_i)`; the book stores the same vectors as rows: ``P[i, j] = softmax_j(e_jᵀ W
    e_i)``, positive entries.
    """
    return torch.softmax(logits_from_weights(W, E), dim=-1)


def _subspace_projectors(E: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Projectors ``(Π_D, Π_R)`` with :math:`\\Pi_{\\mathcal S_E}(W) = \\Pi_D W \\Pi_R`.

    :math:`\\mathcal S_E = \\operatorname{span}\\{(e_i-e_j)e_k^\\top\\}` (Def. 2.4) is the tensor
    product of ``D = span{e_i - e_j}`` (dimension ``K - 1``) and ``R = span{e_k}``
    (dimension ``K``), so the orthogonal projection acts on each side separately; both
    projectors are ``(d, d)``.
    """
    E = check_embeddings(E)
    Dm = E[1:] - E[0]  # (K-1, d) basis of D
    Pi_D = Dm.T @ torch.linalg.solve(Dm @ Dm.T, Dm)
    Pi_R = E.T @ torch.linalg.solve(E @ E.T, E)
    return Pi_D, Pi_R


def project_onto_subspace(W: Any, E: Any) -> torch.Tensor:
    """Orthogonal projection of ``W`` ``(..., d, d)`` onto :math:`\\mathcal S_E` (Def. 2.4).

    Lemma 2.5: the model output is unchanged, :math:`f_W = f_{\\Pi_{\\mathcal S_E}(W)}`.
    """
    Pi_D, Pi_R = _subspace_projectors(E)
    W = _check_W(W, Pi_D.shape[0], batched=True)
    return Pi_D @ W @ Pi_R


def subspace_basis(E: Any) -> torch.Tensor:
    """A Frobenius-orthonormal basis of :math:`\\mathcal S_E` (Def. 2.4), ``(K(K-1), d, d)``."""
    E = check_embeddings(E)
    K = E.shape[0]
    Pi_D, Pi_R = _subspace_projectors(E)
    # eigenvectors of the projectors with eigenvalue 1 span D and R
    _, vd = torch.linalg.eigh(Pi_D)
    _, vr = torch.linalg.eigh(Pi_R)
    D = vd[:, -(K - 1) :]  # (d, K-1)
    R = vr[:, -K:]  # (d, K)
    return torch.einsum("ia,jb->abij", D, R).reshape(-1, D.shape[0], R.shape[0])


def weights_from_logits(Theta: Any, E: Any) -> torch.Tensor:
    """The unique ``W`` in :math:`\\mathcal S_E` whose logits are ``Θ`` up to row shifts.

    Solves ``e_jᵀ W e_i = Θ[i, j] + c_i`` (proof of Thm. 2.6, eqs. (15)–(16)): with
    :math:`E^+ = E^\\top(EE^\\top)^{-1}`, :math:`W_0 = E^+ \\Theta^\\top (E^+)^\\top` solves it
    with ``c = 0`` and its projection onto :math:`\\mathcal S_E` has the same softmax rows
    (Lemma 2.5). ``Theta``: ``(..., K, K)``, finite; returns ``(..., d, d)``.
    """
    E = check_embeddings(E)
    K = E.shape[0]
    Theta = as_tensor("Theta", Theta, dtype=torch.float64)
    if Theta.ndim < 2 or Theta.shape[-2:] != (K, K):
        raise ValueError(f"Theta must have shape (..., {K}, {K}); got {tuple(Theta.shape)}")
    E_pinv = torch.linalg.solve(E @ E.T, E).T  # (d, K), E @ E_pinv = I
    W0 = E_pinv @ Theta.transpose(-1, -2) @ E_pinv.T
    return project_onto_subspace(W0, E)


def weights_from_transition(P: Any, E: Any) -> torch.Tensor:
    """The inverse map :math:`P \\mapsto W \\in \\mathcal S_E`, Ildiz et al. 2024, Thm. 2.6.

    For every transition matrix ``P`` (``(..., K, K)``) with **positive** entries there is
    exactly one ``W`` ``(..., d, d)`` in :math:`\\mathcal S_E` with :math:`P^W = P`, for any
    ``E`` with independent rows (not only ``E = I``). A zero entry of ``P`` (``log 0``: no
    finite ``W``) raises ``ValueError``.
    """
    P = check_transition(P, positive=True, batched=True)
    E = check_embeddings(E)
    if P.shape[-1] != E.shape[0]:
        raise ValueError(f"P must be K x K with K={E.shape[0]} rows of E; got {tuple(P.shape)}")
    return weights_from_logits(torch.log(P), E)


def positional_embeddings(K: int, L: int, d: int, *, seed: int) -> tuple[torch.Tensor, ...]:
    """Embeddings ``(E, U, C)`` satisfying Assumptions 2.3 and A.1 (Ildiz et al. 2024, App. A).

    ``E`` ``(K, d)`` and ``U`` ``(L, d)`` are Gaussian from ``seed``, with ``[E; U]`` of full
    row rank (``d >= K + L``), and ``C`` ``(K, d)`` solves ``C [Eᵀ Uᵀ] = [I 0]`` with
    minimal norm.
    """
    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    L = check_size("L", L, minimum=1)
    d = check_size("d", d, minimum=1)
    if d < K + L:
        raise ValueError(
            f"d must be >= K + L = {K + L} so that C E^T = I and C U^T = 0 can hold; got {d}"
        )
    g = torch_generator(check_seed(seed))
    EU = torch.randn(K + L, d, generator=g, dtype=torch.float64) / d**0.5
    E, U = EU[:K], EU[K:]
    check_embeddings(EU, name="[E; U]")
    target = torch.cat([torch.eye(K), torch.zeros(K, L)], dim=1).double()  # (K, K+L)
    C = target @ torch.linalg.solve(EU @ EU.T, EU)  # (K, d)
    return E, U, C


def positional_factors(W: Any, E: Any, U: Any) -> tuple[torch.Tensor, ...]:
    """The factors ``(a, b, V)`` of the positional CCMC, Ildiz et al. 2024, App. A.

    :math:`a = \\exp(UWu_L)` ``(L,)``, :math:`b = \\exp(EWu_L)` ``(K,)``,
    :math:`V = \\exp(UWE^\\top)` ``(L, K)``: pass them with :math:`P^W` to
    :func:`ccmc_lite.ccmc.positional_ccmc_distribution` (eq. (10)).
    """
    E = as_tensor("E", E, dtype=torch.float64, ndim=2)
    W = _check_W(W, E.shape[1])
    U = as_tensor("U", U, dtype=torch.float64, ndim=2)
    if U.shape[1] != E.shape[1]:
        raise ValueError(f"U must have d={E.shape[1]} columns like E; got {tuple(U.shape)}")
    uL = U[-1]
    factors = torch.exp(U @ W @ uL), torch.exp(E @ W @ uL), torch.exp(U @ W @ E.T)
    for name, f in zip("abV", factors, strict=True):
        check_finite_result(f, f"the factor {name}", "W, E, U")
    return factors
