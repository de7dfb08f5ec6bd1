"""Context-conditioned Markov chains (CCMC), Ildiz et al. 2024, Sec. 2.1, 2.3 and App. A.

A CCMC is a *base* Markov chain ``P`` whose transitions out of the current state are
re-weighted by the token frequencies of everything generated so far (Def. 2.1):

.. math::

    \\mathbb P_P(x_{L+1} = j \\mid X) = \\pi^X_j
    = \\frac{m_j\\, P_{x_L j}}{\\sum_k m_k\\, P_{x_L k}}, \\qquad m = m(X).

Conventions (see the notation page): ``P`` is **row-stochastic**, ``P[i, j] = P(next = j |
now = i)``, tokens are ``0..K-1``. Ildiz et al. store the distributions as the *columns* of
``P`` and number tokens from 1; :mod:`ccmc_lite.ccmc.conventions` converts.

The module provides

* the weights :math:`m(X)` (eq. (2)) and the re-weighted chain :math:`P^m` (eq. (1));
* :math:`\\pi^X` for self-attention keys (eq. (3)) and cross-attention keys (Sec. 2.3), and the
  positional variant (App. A, eq. (10));
* sampling of next tokens and of whole trajectories, vectorised over many trajectories (and over a
  batch of base chains, one per trajectory);
* :class:`~ccmc_lite.ccmc.PromptData`, the sufficient statistics of a (prompt, next-token) data set,
  with constructors for explicit prompts, for the exact population law of a finite prompt
  distribution, for IID samples from it and for the prefixes of trajectories, and the log-likelihood
  of such data under a CCMC.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..core.seeding import derive_seed, numpy_rng, torch_generator
from ..core.validation import (
    DEFAULT_LIMITS,
    as_tensor,
    check_choice,
    check_int,
    check_prob_vector,
    check_seed,
    check_size,
    check_stochastic_matrix,
    check_tokens,
)

__all__ = [
    "VARIANTS",
    "PromptData",
    "Trajectories",
    "ccmc_distribution",
    "check_transition",
    "frequencies",
    "log_likelihood",
    "population_data",
    "positional_ccmc_distribution",
    "prompt_data",
    "prompt_statistics",
    "random_prompts",
    "sample_next",
    "sample_prompt_data",
    "sample_trajectories",
    "trajectory_data",
    "weighted_transition",
]

#: Names of the two attention variants. Keys are all tokens for ``"self"`` (eq. (SA))
#: and all but the last token for ``"cross"`` (eq. (CA)).
VARIANTS = ("self", "cross")


# --------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------


def _broadcast(*shapes: Any) -> torch.Size:
    """Broadcast shapes with ``numpy.broadcast_shapes``: a ``ValueError`` where they disagree
    (``torch.broadcast_shapes`` raises ``RuntimeError``), which the callers turn into named
    errors."""
    return torch.Size(np.broadcast_shapes(*(tuple(s) for s in shapes)))


def check_transition(
    P: Any, *, name: str = "P", positive: bool = False, batched: bool = False
) -> torch.Tensor:
    """Check a base chain: ``(K, K)`` (``(R, K, K)`` with ``batched``), row-stochastic, finite.

    Returns ``P`` as float64. ``positive=True`` demands strictly positive entries (Thm. 2.6
    and Lemma 5.2 need them). A ``ValueError`` names ``name`` and the offending entry.
    """
    P = as_tensor(name, P, dtype=torch.float64, ndim=(2, 3) if batched else 2)
    if P.shape[-1] < 2 or P.shape[-2] < 2:
        raise ValueError(f"{name} must be at least 2 x 2 (K >= 2 tokens); got {tuple(P.shape)}")
    return check_stochastic_matrix(name, P, positive=positive)


def _check_prompt_tokens(name: str, value: Any, K: int, *, ndim: Any = None) -> torch.Tensor:
    """:func:`ccmc_lite.core.check_tokens` with a clear error for empty prompts (an empty list
    would otherwise become a float tensor and fail as "not integers").
    """
    if isinstance(value, (list, tuple, np.ndarray, torch.Tensor)) and len(value) == 0:
        raise ValueError(f"{name} must not be empty (a prompt needs at least one token)")
    if isinstance(value, (list, tuple)) and any(
        isinstance(v, (list, tuple, np.ndarray, torch.Tensor)) and len(v) == 0 for v in value
    ):
        raise ValueError(f"{name} must not contain an empty prompt")
    return check_tokens(name, value, K, ndim=ndim)


def _check_variant(variant: str) -> str:
    return check_choice("variant", variant, VARIANTS)


def prompt_statistics(
    prompts: Any, K: int, *, variant: str = "self", name: str = "prompts"
) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """Key-token counts ``(B, K)`` and query tokens ``(B,)`` of one prompt or of many.

    ``prompts``: one prompt ``(L,)``, equal-length prompts ``(B, L)``, or a list of prompts of
    different lengths, over ``[0, K)``. Self-attention keys are all ``L`` tokens;
    cross-attention keys the first ``L - 1`` (Sec. 2.3), so those prompts need ``L >= 2``.
    The third value is ``True`` when a single 1-D prompt was given.
    """
    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    variant = _check_variant(variant)
    min_len = 2 if variant == "cross" else 1
    ragged = isinstance(prompts, (list, tuple)) and any(
        isinstance(p, (list, tuple, np.ndarray, torch.Tensor)) for p in prompts
    )
    if ragged:
        if len(prompts) == 0:
            raise ValueError(f"{name} must not be empty; got an empty list")
        rows = [
            _check_prompt_tokens(f"{name}[{i}]", p, K, ndim=1) for i, p in enumerate(prompts)
        ]  # each (L_i,)
        for i, r in enumerate(rows):
            if r.numel() < min_len:
                raise ValueError(
                    f"{name}[{i}] must have at least {min_len} tokens for {variant}-attention "
                    f"(keys exclude the last token); got length {r.numel()}"
                )
        keys = [r[:-1] if variant == "cross" else r for r in rows]
        counts = torch.stack([torch.bincount(k, minlength=K) for k in keys]).double()
        query = torch.stack([r[-1] for r in rows])
        return counts, query, False
    X = _check_prompt_tokens(name, prompts, K, ndim=(1, 2))  # (L,) or (B, L)
    single = X.ndim == 1
    X2 = X[None] if single else X  # (B, L)
    if X2.shape[-1] < min_len:
        raise ValueError(
            f"{name} must have at least {min_len} tokens for {variant}-attention; "
            f"got length {X2.shape[-1]}"
        )
    if X2.shape[0] == 0:
        raise ValueError(f"{name} must not be empty; got shape {tuple(X.shape)}")
    key_tokens = X2[:, :-1] if variant == "cross" else X2
    counts = torch.nn.functional.one_hot(key_tokens, K).sum(-2).double()  # (B, K)
    return counts, X2[:, -1].clone(), single


# --------------------------------------------------------------------------------------
# Definition 2.1: weights and transitions
# --------------------------------------------------------------------------------------


def _token_counts(X: Any, K: int) -> torch.Tensor:
    """Occurrences ``(..., K)`` of each token in prompts ``(..., L)`` (the numerator of eq. (2))."""
    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    X = _check_prompt_tokens("X", X, K)
    if X.ndim == 0:
        raise ValueError("X must have at least one dimension (a sequence of tokens)")
    if X.shape[-1] == 0:
        raise ValueError(f"X must not be empty; got shape {tuple(X.shape)}")
    return torch.nn.functional.one_hot(X, K).sum(-2).double()


def frequencies(X: Any, K: int) -> torch.Tensor:
    """Empirical token frequencies :math:`m(X)` of a prompt, Ildiz et al. 2024, eq. (2).

    ``X``: ``(..., L)`` tokens in ``[0, K)``, non-empty; returns ``(..., K)``.

    Examples
    --------
    >>> frequencies([0, 1, 0], 3).tolist()  # the paper's X = [1, 2, 1]
    [0.6666666666666666, 0.3333333333333333, 0.0]
    """
    counts = _token_counts(X, K)
    return counts / counts.sum(-1, keepdim=True)


def weighted_transition(P: Any, m: Any) -> torch.Tensor:
    """The re-weighted chain :math:`P^m[i, j] = m_j P[i, j] / \\sum_k m_k P[i, k]` (eq. (1)).

    ``m``: ``(K,)`` non-negative weights (need not sum to one). Raises ``ValueError`` when a
    row has :math:`\\sum_k m_k P[i, k] = 0` (the transition out of ``i`` is undefined).
    """
    P = check_transition(P)
    m = as_tensor("m", m, dtype=torch.float64, ndim=1)
    if m.shape[0] != P.shape[0]:
        raise ValueError(f"m must have K={P.shape[0]} entries to match P; got {m.shape[0]}")
    if bool((m < 0).any()):
        raise ValueError(f"m must be non-negative; smallest entry is {m.min().item():g}")
    num = P * m[None, :]  # (K, K)
    den = num.sum(-1, keepdim=True)
    if bool((den <= 0).any()):
        i = int((den[:, 0] <= 0).nonzero()[0])
        raise ValueError(
            f"the weighted transition out of state {i} is undefined: m_j P[{i}, j] = 0 for "
            "every j (P has zeros exactly where m is positive)"
        )
    return num / den


def _ccmc_distribution_from_counts(P: Any, counts: Any, query: Any) -> torch.Tensor:
    """:math:`\\pi^X` ``(..., K)`` from sufficient statistics: key-token counts and query tokens.

    ``pi[..., j] = counts[..., j] P[query, j] / sum_k counts[..., k] P[query, k]`` (Def. 2.1,
    eq. (3); the normalisation of ``m`` cancels). ``P`` is ``(K, K)`` or broadcasts against
    ``counts`` ``(..., K)``; ``query`` is ``(...)``. Raises ``ValueError`` when a prompt has
    ``P[x_L, j] = 0`` for all of its key tokens.
    """
    P = check_transition(P, batched=True)
    K = P.shape[-1]
    counts = as_tensor("counts", counts, dtype=torch.float64)
    if counts.ndim == 0 or counts.shape[-1] != K:
        raise ValueError(f"counts must have shape (..., {K}); got {tuple(counts.shape)}")
    if bool((counts < 0).any()):
        raise ValueError(f"counts must be non-negative; got {float(counts.min()):.6g}")
    query = check_tokens("query", query, K, allow_empty=True)
    if tuple(query.shape) != tuple(counts.shape[:-1]):
        raise ValueError(
            f"query must have one token per count vector, shape {tuple(counts.shape[:-1])}; "
            f"got {tuple(query.shape)}"
        )
    if P.ndim == 2:
        rows = P[query]  # (..., K)
    else:
        rows = _rows(P, query[..., None]).squeeze(-2)  # (..., K)
    num = counts * rows
    den = num.sum(-1, keepdim=True)
    if bool((counts.sum(-1) <= 0).any()):
        raise ValueError("counts must count at least one key token per prompt; found all zeros")
    if bool((den <= 0).any()):
        raise _undefined_transition(" (counts and the query's row of P do not overlap)")
    return num / den


def _undefined_transition(detail: str) -> ValueError:
    """The error for a prompt whose CCMC transition (Def. 2.1) has no mass to normalise."""
    return ValueError(
        "the CCMC transition is undefined for a prompt whose key tokens j all have "
        f"P[x_L, j] = 0{detail}"
    )


def _rows(P: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """Rows ``P[..., query[..., n], :]``: ``P`` is ``(K, K)`` or ``(B..., K, K)`` and
    ``query`` is ``(B..., N)`` (its last axis indexes rows of the data set)."""
    if P.ndim == 2:
        return P[query]  # (..., N, K)
    K = P.shape[-1]
    batch = _broadcast(P.shape[:-2], query.shape[:-1])
    N = query.shape[-1]
    Pb = P.expand(*batch, K, K)
    idx = query.expand(*batch, N)[..., None].expand(*batch, N, K)
    return torch.gather(Pb, -2, idx)  # (B..., N, K)


def ccmc_distribution(P: Any, X: Any, *, variant: str = "self") -> torch.Tensor:
    """Next-token distribution :math:`\\pi^X` of the CCMC, Ildiz et al. 2024, Def. 2.1 / eq. (3).

    ``X``: one prompt ``(L,)`` (returns ``(K,)``), prompts ``(B, L)`` or a ragged list
    (``(B, K)``). ``variant="cross"`` weights by the keys ``x_1..x_{L-1}`` only (Sec. 2.3).

    Examples
    --------
    >>> P = [[0.2, 0.3, 0.5], [0.5, 0.1, 0.4], [0.1, 0.6, 0.3]]
    >>> ccmc_distribution(P, [0, 1, 0]).round(decimals=6).tolist()  # m = (2/3, 1/3, 0)
    [0.571429, 0.428571, 0.0]
    """
    P = check_transition(P)
    counts, query, single = prompt_statistics(X, P.shape[0], variant=variant, name="X")
    pi = _ccmc_distribution_from_counts(P, counts, query)
    return pi[0] if single else pi


def positional_ccmc_distribution(P: Any, X: Any, a: Any, b: Any, V: Any) -> torch.Tensor:
    """The CCMC with positional encoding, Ildiz et al. 2024, App. A, eq. (10).

    .. math::

        \\mathbb P_{(P,U)}(x_{L+1}=j\\mid X) \\propto b_j\\, P_{x_L j}
        \\sum_{i=1}^L a_i V_{i, x_L} \\mathbf 1(x_i = j),

    with the positive factors :math:`a=\\exp(UWu_L)` ``(L,)``, :math:`b=\\exp(EWu_L)` ``(K,)``
    and :math:`V=\\exp(UWE^\\top)` ``(L, K)`` (:func:`ccmc_lite.ccmc.positional_factors`);
    ``P = P^W`` (eq. (4)). ``X``: ``(L,)`` or ``(B, L)``; returns ``(K,)`` or ``(B, K)``.
    """
    P = check_transition(P)
    K = P.shape[0]
    X = _check_prompt_tokens("X", X, K, ndim=(1, 2))
    single = X.ndim == 1
    X2 = X[None] if single else X  # (B, L)
    L = X2.shape[-1]
    a = as_tensor("a", a, dtype=torch.float64, ndim=1)
    b = as_tensor("b", b, dtype=torch.float64, ndim=1)
    V = as_tensor("V", V, dtype=torch.float64, ndim=2)
    if a.shape != (L,):
        raise ValueError(
            f"a must have shape ({L},) to match the prompt length; got {tuple(a.shape)}"
        )
    if b.shape != (K,):
        raise ValueError(f"b must have shape ({K},); got {tuple(b.shape)}")
    if V.shape != (L, K):
        raise ValueError(f"V must have shape ({L}, {K}); got {tuple(V.shape)}")
    for name, t in (("a", a), ("b", b), ("V", V)):
        if bool((t <= 0).any()):
            raise ValueError(f"{name} must be strictly positive (it is an exponential)")
    q = X2[:, -1]  # (B,)
    pos_w = a[None, :] * V[:, q].T  # (B, L): a_i V[i, x_L]
    onehot = torch.nn.functional.one_hot(X2, K).double()  # (B, L, K)
    mass = torch.einsum("bl,blk->bk", pos_w, onehot)  # (B, K)
    num = b[None, :] * P[q] * mass  # (B, K)
    den = num.sum(-1, keepdim=True)
    if bool((den <= 0).any()):
        raise _undefined_transition(f": prompt {int((den[:, 0] <= 0).nonzero()[0])}")
    pi = num / den
    return pi[0] if single else pi


# --------------------------------------------------------------------------------------
# sampling
# --------------------------------------------------------------------------------------


def _inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Sample index ``j`` with probability ``weights[..., j] / sum`` given uniforms ``u``."""
    cum = weights.cumsum(-1)  # (..., K)
    target = u * cum[..., -1]
    idx = torch.searchsorted(cum, target[..., None], right=True).squeeze(-1)
    return idx.clamp_(max=weights.shape[-1] - 1)


def sample_next(
    P: Any,
    X: Any,
    *,
    seed: int,
    n_samples: int = 1,
    variant: str = "self",
) -> torch.Tensor:
    """Sample next tokens from the CCMC :math:`\\pi^X` (Def. 2.1; Sec. 2.2 "sampling from softmax").

    ``X`` and ``variant`` as in :func:`ccmc_distribution`; ``n_samples`` independent tokens
    per prompt from ``seed``: ``(n_samples,)`` for one prompt, ``(B, n_samples)`` for many.
    """
    seed = check_seed(seed)
    n_samples = check_size("n_samples", n_samples, minimum=1)
    P = check_transition(P)
    counts, query, single = prompt_statistics(X, P.shape[0], variant=variant, name="X")
    pi = _ccmc_distribution_from_counts(P, counts, query)  # (B, K)
    u = torch.rand(pi.shape[0], n_samples, generator=torch_generator(seed), dtype=torch.float64)
    tokens = _inverse_cdf(pi[:, None, :].expand(-1, n_samples, -1), u)  # (B, n)
    return tokens[0] if single else tokens


@dataclass(frozen=True)
class Trajectories:
    """Output of :func:`sample_trajectories`: ``R`` trajectories, statistics at ``C`` times.

    Attributes
    ----------
    prompt_length : int
        Length ``L0`` of the initial prompt.
    tokens : Tensor or None
        ``(R, L0 + length)``: prompt and generated tokens (``None`` for ``keep_tokens=False``).
    times : Tensor
        ``(C,)`` numbers of generated tokens at which the statistics were recorded.
    counts : Tensor
        ``(R, C, K)`` token counts of ``X_t`` (prompt included) at ``times[c]``.
    transitions : Tensor
        ``(R, C, K, K)`` counts of sampled transitions ``x_s -> x_{s+1}`` (the first starts
        at the last prompt token) up to ``times[c]``.
    """

    prompt_length: int
    tokens: torch.Tensor | None
    times: torch.Tensor
    counts: torch.Tensor
    transitions: torch.Tensor

    @property
    def frequencies(self) -> torch.Tensor:
        """``(R, C, K)`` token frequencies :math:`m(X_t)` at the recorded times (eq. (2))."""
        return self.counts / self.counts.sum(-1, keepdim=True)


def sample_trajectories(
    P: Any,
    prompt: Any,
    length: int,
    *,
    seed: int,
    n_traj: int | None = None,
    variant: str = "self",
    record_at: Any = None,
    keep_tokens: bool = True,
    chunk: int = 512,
) -> Trajectories:
    """Generate trajectories autoregressively from a CCMC, vectorised over trajectories.

    At step ``t`` each trajectory appends ``y_t ~ pi^{X_t}`` to its sequence ``X_t`` (Ildiz et
    al. 2024, Sec. 5: one prompt fed back into the model). All ``R`` trajectories advance
    together on their running counts ``(R, K)`` and last tokens: ``O(R K)`` work per step.

    ``P`` is ``(K, K)``, shared, or ``(R, K, K)``, one chain per trajectory (a sweep over
    chains in one program); ``prompt`` is ``(L0,)`` or ``(R, L0)``; ``n_traj`` (default:
    from ``P`` and ``prompt``, else 1) must agree with both. Counts and transition counts are
    recorded after the numbers of generated tokens in ``record_at`` (default ``[length]``);
    ``keep_tokens=False`` drops the ``(R, L0 + length)`` token array; uniforms are drawn
    ``chunk`` steps at a time. Raises ``ValueError`` at a step whose transition is undefined
    (every key token ``j`` has ``P[x_L, j] = 0``).
    """
    seed = check_seed(seed)
    length = check_size("length", length, minimum=1)
    chunk = check_int("chunk", chunk, minimum=1)
    variant = _check_variant(variant)
    P = check_transition(P, batched=True)
    K = P.shape[-1]
    prompt = _check_prompt_tokens("prompt", prompt, K, ndim=(1, 2))
    sizes = set()
    if P.ndim == 3:
        sizes.add(int(P.shape[0]))
    if prompt.ndim == 2:
        sizes.add(int(prompt.shape[0]))
    if n_traj is not None:
        sizes.add(check_size("n_traj", n_traj, minimum=1))
    if len(sizes) > 1:
        raise ValueError(
            f"P, prompt and n_traj disagree on the number of trajectories: {sorted(sizes)}"
        )
    R = sizes.pop() if sizes else 1
    if prompt.ndim == 1:
        prompt = prompt[None].expand(R, -1)
    L0 = prompt.shape[-1]
    if L0 < (2 if variant == "cross" else 1):
        raise ValueError(f"prompt must have at least 2 tokens for cross-attention; got {L0}")
    if record_at is None:
        times = torch.tensor([length])
    else:
        times = as_tensor("record_at", record_at, dtype=torch.long, ndim=1)
        if times.numel() == 0 or int(times.min()) < 0 or int(times.max()) > length:
            raise ValueError(f"record_at must hold integers in [0, {length}]")
        times = torch.unique(times)  # sorted
    record = set(times.tolist())

    counts = torch.nn.functional.one_hot(prompt, K).sum(-2).double()  # (R, K)
    counts_flat = counts.view(-1)  # (R*K,) view: updated in place
    trans = torch.zeros(R * K * K, dtype=torch.float64)  # running transition counts
    last = prompt[:, -1].clone()  # (R,)
    ones = torch.ones(R, dtype=torch.float64)
    base_k = torch.arange(R) * K  # offsets of each trajectory's row in counts_flat
    base_kk = torch.arange(R) * K * K
    P_rows = P.reshape(-1, K)  # (K, K) or (R*K, K): one row per (trajectory, state)
    tokens_t = torch.empty(length, R, dtype=torch.long) if keep_tokens else None  # (T, R)
    out_counts = torch.empty(R, len(times), K, dtype=torch.float64)
    out_trans = torch.empty(R, len(times), K, K, dtype=torch.float64)
    slot = {t: c for c, t in enumerate(times.tolist())}
    gen = torch_generator(seed)
    undefined = torch.zeros(R, dtype=torch.bool)

    def save(t: int) -> None:
        out_counts[:, slot[t]] = counts
        out_trans[:, slot[t]] = trans.view(R, K, K)

    def check(step: int) -> None:
        if bool(undefined.any()):
            r = int(undefined.nonzero()[0])
            raise ValueError(
                f"trajectory {r} reached a prompt whose key tokens j all have P[x_L, j] = 0 "
                f"(before step {step}); the CCMC transition is undefined"
            )

    if 0 in record:
        save(0)
    for start in range(0, length, chunk):
        steps = min(chunk, length - start)
        uniforms = torch.rand(steps, R, generator=gen, dtype=torch.float64)  # (steps, R)
        for s in range(steps):
            idx = last if P.ndim == 2 else base_k + last
            rows = torch.index_select(P_rows, 0, idx)  # (R, K): P[x_L, :]
            if variant == "cross":  # keys exclude the query token
                keys = counts.clone()
                keys.view(-1).put_(base_k + last, -ones, accumulate=True)
                w = keys * rows
            else:
                w = counts * rows  # (R, K): unnormalised pi^X
            cum = w.cumsum(-1)
            total = cum[:, -1]
            undefined |= total <= 0
            # inverse CDF: number of cumulative weights <= u * total
            nxt = ((uniforms[s] * total)[:, None] >= cum[:, :-1]).sum(-1)  # (R,)
            counts_flat.put_(base_k + nxt, ones, accumulate=True)
            trans.put_(base_kk + last * K + nxt, ones, accumulate=True)
            if tokens_t is not None:
                tokens_t[start + s] = nxt
            last = nxt
            if start + s + 1 in record:
                check(start + s + 1)
                save(start + s + 1)
        check(start + steps)
    tokens = None
    if tokens_t is not None:
        tokens = torch.cat([prompt, tokens_t.T], dim=1)  # (R, L0 + length)
    return Trajectories(L0, tokens, times, out_counts, out_trans)


# --------------------------------------------------------------------------------------
# data sets of (prompt, next token) pairs and their likelihood
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptData:
    """Sufficient statistics of a data set of (prompt, next-token) pairs.

    Under a CCMC (and so under the attention model of Assumption 2.3) the likelihood of
    ``(X, y)`` depends on ``X`` only through its key-token counts and its query token ``x_L``
    (eq. (3)). A data set is therefore ``N`` rows ``(counts, query, y)`` with a weight each:
    how often the pair occurs, or its probability for the population loss (eqs. (5)/(6)). All
    tensors may carry the same leading run axes (one data set per run), e.g. ``weights``
    ``(R, N)`` with shared rows.

    Attributes
    ----------
    counts : Tensor
        ``(..., N, K)`` key-token counts.
    query : Tensor
        ``(..., N)`` query tokens ``x_L``.
    y : Tensor
        ``(..., N)`` next tokens.
    weights : Tensor
        ``(..., N)`` non-negative weights.
    K : int
        Vocabulary size.
    variant : str
        ``"self"`` or ``"cross"`` (how the counts were formed).
    """

    counts: torch.Tensor
    query: torch.Tensor
    y: torch.Tensor
    weights: torch.Tensor
    K: int
    variant: str = "self"

    @property
    def batch_shape(self) -> torch.Size:
        """Leading run axes shared by the data set (``()`` for a single data set)."""
        return _broadcast(
            self.counts.shape[:-2],
            self.query.shape[:-1],
            self.y.shape[:-1],
            self.weights.shape[:-1],
        )

    def run_axes_with(self, name: str, shape: Sequence[int]) -> torch.Size:
        """The run axes of a parameter with leading axes ``shape`` and of the data, broadcast.

        One run of ``P`` (or ``W``, ``Θ``) meets one data set: two runs against three data
        sets contradict each other, and the ``ValueError`` names ``name`` and the data.
        """
        try:
            shape = torch.Size(shape)
        except (TypeError, ValueError):
            raise TypeError(f"shape must be a sequence of sizes; got {shape!r:.60}") from None
        try:
            return _broadcast(shape, self.batch_shape)
        except ValueError:
            raise ValueError(
                f"{name} and data must have the same run axes (or broadcast): {name} has "
                f"{tuple(shape)}, data {tuple(self.batch_shape)}"
            ) from None

    @property
    def n_rows(self) -> int:
        """Number of rows ``N``."""
        return int(self.weights.shape[-1])

    def total_weight(self) -> torch.Tensor:
        """``(...)`` sum of the weights: the sample size for count data."""
        return self.weights.sum(-1)

    def with_weights(self, weights: Any) -> PromptData:
        """The same rows with new (e.g. resampled, batched) weights ``(..., N)``."""
        w = as_tensor("weights", weights, dtype=torch.float64)
        if w.ndim == 0 or w.shape[-1] != self.n_rows:
            raise ValueError(f"weights must have shape (..., {self.n_rows}); got {tuple(w.shape)}")
        if bool((w < 0).any()):
            raise ValueError("weights must be non-negative")
        if bool((w.sum(-1) <= 0).any()):
            raise ValueError("weights must have a positive sum in every run")
        return PromptData(self.counts, self.query, self.y, w, self.K, self.variant)


def _validate_rows(counts: torch.Tensor, y: torch.Tensor, weights: torch.Tensor) -> None:
    """Every row with positive weight must have its next token among its key tokens."""
    shape = _broadcast(counts.shape[:-1], y.shape, weights.shape)
    cy = torch.gather(counts.expand(*shape, counts.shape[-1]), -1, y.expand(shape)[..., None])
    bad = (cy.squeeze(-1) <= 0) & (weights.expand(shape) > 0)
    if bool(bad.any()):
        where = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"next_tokens: the next token of row {where} does not occur among the key tokens "
            "of its prompt; its likelihood is 0 under every CCMC/attention model "
            "(the model can only emit tokens it attends to)"
        )


def random_prompts(
    K: int, n: int, *, min_length: int, max_length: int, seed: int
) -> list[list[int]]:
    """``n`` prompts, lengths uniform in ``[min_length, max_length]``, tokens uniform (``seed``).

    A convenient finite support :math:`\\Omega` for the prompt distribution of Secs. 3–4.
    """
    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    n = check_size("n", n, minimum=1)
    lo = check_size("min_length", min_length, minimum=1)
    hi = check_size("max_length", max_length, minimum=lo)
    rng = numpy_rng(seed)
    lengths = rng.integers(lo, hi + 1, size=n)
    return [rng.integers(0, K, size=int(L)).tolist() for L in lengths]


def prompt_data(
    prompts: Any,
    next_tokens: Any,
    K: int,
    *,
    variant: str = "self",
    weights: Any = None,
) -> PromptData:
    """:class:`PromptData` of explicit prompts (``(n, L)`` or ragged) and next tokens ``(n,)``.

    Each next token must occur among the keys of its prompt (``variant``, Sec. 2.3);
    ``weights``: ``(n,)`` or ``(R, n)``, default ones.
    """
    counts, query, single = prompt_statistics(prompts, K, variant=variant)
    if single:
        raise ValueError("prompts must be a batch of prompts (n, L) or a list of prompts")
    n = counts.shape[0]
    y = check_tokens("next_tokens", next_tokens, K, ndim=1)
    if y.shape[0] != n:
        raise ValueError(f"next_tokens must have {n} entries (one per prompt); got {y.shape[0]}")
    w = torch.ones(n, dtype=torch.float64) if weights is None else weights
    data = PromptData(counts, query, y, torch.ones(n, dtype=torch.float64), K, variant)
    data = data.with_weights(w)
    _validate_rows(counts, y, data.weights)
    return data


def population_data(
    P: Any,
    prompts: Any,
    prompt_probs: Any = None,
    *,
    variant: str = "self",
) -> PromptData:
    """The exact population law :math:`\\mathcal D_{XY}` of a finite prompt distribution.

    Row ``(X, y)`` gets weight :math:`\\mathcal D_X(X)\\,\\pi^X_y`, :math:`\\pi^X` the CCMC
    of ``P`` (Ildiz et al. 2024, Sec. 3: prompts of finite support :math:`\\Omega`, labels
    from the ground truth). ``prompts``: :math:`\\Omega`, ``(n, L)`` or ragged;
    ``prompt_probs``: ``(n,)``, default uniform. Returns ``n * K`` rows, one per prompt and
    next token. Minimising their weighted negative log-likelihood is problem (5)/(6).
    """
    P = check_transition(P)
    K = P.shape[0]
    counts, query, single = prompt_statistics(prompts, K, variant=variant)
    if single:
        raise ValueError("prompts must be a batch of prompts (n, L) or a list of prompts")
    n = counts.shape[0]
    if prompt_probs is None:
        probs = torch.full((n,), 1.0 / n, dtype=torch.float64)
    else:
        probs = check_prob_vector("prompt_probs", prompt_probs)
        if probs.shape != (n,):
            raise ValueError(f"prompt_probs must have shape ({n},); got {tuple(probs.shape)}")
    pi = _ccmc_distribution_from_counts(P, counts, query)  # (n, K)
    y = torch.arange(K).repeat(n)  # (n*K,)
    weights = (probs[:, None] * pi).reshape(-1)
    return PromptData(
        counts.repeat_interleave(K, 0), query.repeat_interleave(K), y, weights, K, variant
    )


def sample_prompt_data(
    population: PromptData, n: int, *, seed: int, n_runs: int | None = None
) -> PromptData:
    """The counts of ``n`` IID (prompt, next-token) pairs drawn from ``population``.

    The counts of its ``N`` rows are multinomial(``n``, weights), exactly the law of the
    sufficient statistics of ``n`` IID samples (Sec. 4, eqs. (7)–(8)). ``n_runs`` draws ``R``
    independent data sets at once (weights ``(R, N)``).
    """
    if not isinstance(population, PromptData):
        raise TypeError(f"population must be a PromptData; got {type(population).__name__}")
    n = check_size("n", n, minimum=1)
    seed = check_seed(seed)
    if population.weights.ndim != 1:
        raise ValueError("population must have unbatched weights (N,)")
    p = population.weights.numpy()
    p = p / p.sum()
    size = None if n_runs is None else check_size("n_runs", n_runs, minimum=1)
    counts = numpy_rng(derive_seed(seed, 0)).multinomial(n, p, size=size)
    return population.with_weights(torch.as_tensor(counts, dtype=torch.float64))


def trajectory_data(
    tokens: Any, prompt_length: int, K: int, *, variant: str = "self"
) -> PromptData:
    """The single-trajectory data set of Sec. 5: :math:`X_i = [X_1, y_1, \\dots, y_{i-1}]`.

    ``tokens``: ``(T,)`` or ``(R, T)``, the prompt (``prompt_length`` tokens; at least 2 for
    cross-attention) followed by the generated tokens. Returns ``T - prompt_length`` rows
    (with the run axis), unit weights.
    """
    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    variant = _check_variant(variant)
    X = _check_prompt_tokens("tokens", tokens, K, ndim=(1, 2))
    T = X.shape[-1]
    L0 = check_size("prompt_length", prompt_length, minimum=2 if variant == "cross" else 1)
    if L0 >= T:
        raise ValueError(f"prompt_length must be < the sequence length {T}; got {L0}")
    onehot = torch.nn.functional.one_hot(X, K).double()  # (..., T, K)
    cum = onehot.cumsum(-2)  # counts of X[..., :t+1]
    # row i predicts X[..., L0 + i] from the prefix X[..., :L0 + i]
    prefix = cum[..., L0 - 1 : T - 1, :]  # (..., N, K)
    query = X[..., L0 - 1 : T - 1]
    if variant == "cross":
        prefix = prefix - onehot[..., L0 - 1 : T - 1, :]
    y = X[..., L0:]
    weights = torch.ones(y.shape, dtype=torch.float64)
    _validate_rows(prefix, y, weights)
    return PromptData(prefix, query, y, weights, K, variant)


def log_likelihood(P: Any, data: PromptData, *, average: bool = False) -> torch.Tensor:
    """Log-likelihood :math:`\\sum_i w_i \\log \\mathbb P_P(y_i \\mid X_i)` under a CCMC (eq. (6)).

    ``P``: ``(K, K)`` or batched like the data's run axes. Returns one value per run;
    ``average=True`` divides by the total weight (then ``-value`` is the loss
    :math:`\\mathcal L(P)`); ``-inf`` where a row with positive weight has probability 0
    under ``P``. Raises ``ValueError`` where such a row's transition is undefined.
    """
    if not isinstance(data, PromptData):
        raise TypeError(f"data must be a PromptData; got {type(data).__name__}")
    P = check_transition(P, batched=True)
    if P.shape[-1] != data.K:
        raise ValueError(f"P must be {data.K} x {data.K} to match the data; got {tuple(P.shape)}")
    data.run_axes_with("P", P.shape[:-2])
    rows = _rows(P, data.query)  # (..., N, K)
    num = data.counts * rows
    den = num.sum(-1)  # (..., N)
    undefined = (data.weights > 0) & (den <= 0)
    if bool(undefined.any()):
        where = undefined.nonzero()[0].tolist()  # (run axes..., row)
        run = f" of run {tuple(where[:-1])}" if len(where) > 1 else ""
        raise _undefined_transition(f": data row {where[-1]}{run} has positive weight")
    py = torch.gather(num, -1, data.y[..., None].expand(*num.shape[:-1], 1)).squeeze(-1)
    logp = torch.log(py) - torch.log(den)
    ll = torch.where(data.weights > 0, data.weights * logp, torch.zeros_like(logp)).sum(-1)
    return ll / data.weights.sum(-1) if average else ll
