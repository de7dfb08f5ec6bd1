"""Markov chains for Part II: kernels, stationary laws, entropies and fast sampling.

Makkuva et al. (2024, Sec. 2.2) train transformers on the binary chain with kernel

.. math::

    P(p, q) = \\begin{pmatrix} 1-p & p \\\\ q & 1-q \\end{pmatrix},

and the long version (Makkuva et al. 2024, *framework*, Sec. 4.3) on the symmetric
:math:`K`-state chain that stays put with probability :math:`1-p` and otherwise jumps to
one of the other :math:`K-1` states uniformly. Every kernel here is row-stochastic,
``P[i, j] = P(x_{n+1} = j | x_n = i)``, tokens are ``0..K-1`` and logarithms are natural
(entropies in nats), as on the notation page of the book.

Sampling (:func:`~ccmc_lite.markov.sample_chains`) draws many sequences at once, for one kernel or
for one kernel per training run: one vectorised ``gather`` per time step advances every sequence of
every run together.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

from ..core.chains import entropy, stationary_distribution
from ..core.seeding import torch_generator
from ..core.validation import (
    DEFAULT_LIMITS,
    as_tensor,
    check_choice,
    check_int,
    check_power,
    check_prob_vector,
    check_probability,
    check_size,
    check_stochastic_matrix,
)

__all__ = [
    "binary_entropy_rate",
    "binary_kernel",
    "check_kernel",
    "empirical_transitions",
    "enumerate_chains",
    "lag_one_covariance",
    "random_kernel",
    "sample_chains",
    "symmetric_kernel",
]


def check_kernel(P: Any, name: str = "P", *, positive: bool = False) -> torch.Tensor:
    """Validate a Markov kernel: a square row-stochastic matrix with ``K >= 2`` states.

    Batched kernels of shape ``(..., K, K)`` are accepted. Returns a float64 tensor.

    Raises
    ------
    ValueError
        If the matrix is not square, has fewer than two states, has negative entries or a
        row that does not sum to one (the message names the row).
    """
    P = check_stochastic_matrix(name, P, positive=positive)
    K = P.shape[-1]
    if K < 2:
        raise ValueError(f"{name} must have K >= 2 states; got K={K}")
    return P


def binary_kernel(p: float, q: float) -> torch.Tensor:
    """The binary kernel ``P(p, q) = [[1-p, p], [q, 1-q]]`` (Makkuva et al. 2024, Sec. 2.2).

    ``p = P(x_{n+1}=1 | x_n=0)`` and ``q = P(x_{n+1}=0 | x_n=1)``, both in ``(0, 1)``.
    """
    p = check_probability("p", p)
    q = check_probability("q", q)
    return torch.tensor([[1.0 - p, p], [q, 1.0 - q]], dtype=torch.float64)


def symmetric_kernel(K: int, p: float) -> torch.Tensor:
    """The symmetric ``K``-state kernel of Makkuva et al. (2024, *framework*, Sec. 4.3).

    The chain stays with probability ``1 - p`` (``p`` in ``(0, 1)``) and otherwise moves to one
    of the other ``K - 1`` states uniformly: ``P = (1-p) I + p/(K-1) (J - I)``; ``K = 2`` gives
    ``P(p, p)``.
    """
    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    p = check_probability("p", p)
    P = torch.full((K, K), p / (K - 1), dtype=torch.float64)
    P.fill_diagonal_(1.0 - p)
    return P


def random_kernel(K: int, seed: int, *, alpha: float = 1.0) -> torch.Tensor:
    """A ``(K, K)`` kernel with i.i.d. Dirichlet(``alpha``) rows (strictly positive) from ``seed``.

    Small ``alpha`` gives peaked rows; it must be at least ``1e-3`` (below, the rows are one-hot
    up to the 1e-12 clipping anyway, and numpy < 2's Dirichlet sampler never returns for
    concentrations near 1e-20).
    """
    from ..core.seeding import numpy_rng
    from ..core.validation import check_float

    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    alpha = check_float("alpha", alpha, minimum=1e-3)
    rows = numpy_rng(seed).dirichlet([alpha] * K, size=K)
    rows = rows.clip(1e-12)  # keep entries strictly positive (log P appears in entropies)
    rows = rows / rows.sum(1, keepdims=True)
    return torch.as_tensor(rows, dtype=torch.float64)


def _binary_entropy(p: Any) -> torch.Tensor:
    """The binary entropy ``h(p) = -p log p - (1-p) log(1-p)`` (nats), elementwise."""
    p = as_tensor("p", p)
    if bool(((p < 0) | (p > 1)).any()):
        raise ValueError("p must lie in [0, 1]")
    return entropy(torch.stack([p, 1 - p], -1))


def binary_entropy_rate(p: float, q: float) -> float:
    """Closed form ``(q h(p) + p h(q)) / (p + q)`` for ``P(p, q)`` (Makkuva et al. 2024, 2.2)."""
    p = check_probability("p", p)
    q = check_probability("q", q)
    h = _binary_entropy(torch.tensor([p, q], dtype=torch.float64))
    return float((q * h[0] + p * h[1]) / (p + q))


def lag_one_covariance(P: Any) -> torch.Tensor:
    """``C = diag(pi) P - pi pi^T``: the covariance of the one-hot vectors of ``x_n, x_{n+1}``.

    ``v^T C v = Cov(v(x_n), v(x_{n+1}))`` for any function ``v`` of the state. Its
    symmetric part decides the curvature of the tied model at the unigram point (Part II,
    chapter "Beyond two states"); for ``P(p, q)``,
    ``Cov(x_n, x_{n+1}) = pi_0 pi_1 (1 - p - q)``.
    """
    P = check_kernel(P)
    pi = stationary_distribution(P)
    return pi.unsqueeze(-1) * P - pi.unsqueeze(-1) * pi.unsqueeze(-2)


def _initial_states(
    P: torch.Tensor, shape: tuple[int, ...], init: Any, generator: torch.Generator | None
) -> torch.Tensor:
    K = P.shape[-1]
    if isinstance(init, str):
        check_choice("init", init, ("stationary", "uniform"))
        mu = stationary_distribution(P) if init == "stationary" else torch.full((K,), 1.0 / K)
    else:
        mu = check_prob_vector("init", init)
        if mu.shape[-1] != K or mu.shape[:-1] not in ((), P.shape[:-2]):
            want = f"({K},)" + (f" or {(*P.shape[:-2], K)}" if P.ndim > 2 else "")
            raise ValueError(
                f"init must have shape {want}: one law for all kernels or one per kernel; "
                f"got {tuple(mu.shape)}"
            )
    mu = mu.to(dtype=torch.float64, device=P.device)
    if mu.shape[:-1] != P.shape[:-2]:
        mu = mu.expand(*P.shape[:-2], K)  # one law shared by all kernels
    cum = mu.cumsum(-1)  # (*kernels, K); one draw per sequence below
    u = torch.rand(shape, generator=generator, dtype=torch.float64, device=P.device)
    lead = len(P.shape) - 2
    cum = cum.reshape(*P.shape[:-2], *([1] * (len(shape) - lead)), K)
    return (u.unsqueeze(-1) >= cum[..., :-1]).sum(-1)


def _check_sampling_args(
    P: Any, n: int, T: int, seed: Any, generator: torch.Generator | None
) -> tuple[torch.Tensor, int, int, torch.Generator | None]:
    P = check_kernel(P)
    if P.ndim not in (2, 3):
        raise ValueError(f"P must have shape (K, K) or (R, K, K); got {tuple(P.shape)}")
    n = check_size("n", n, minimum=1)
    T = check_size("T", T, minimum=1)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator; got {type(generator).__name__}")
    if seed is not None:
        if generator is not None:
            raise ValueError(f"give seed or generator, not both; got seed={seed!r} and a generator")
        generator = torch_generator(seed)  # checks the seed
    return P, n, T, generator


def sample_chains(
    P: Any,
    n: int,
    T: int,
    *,
    seed: int | None = None,
    generator: torch.Generator | None = None,
    init: Any = "stationary",
) -> torch.Tensor:
    """Sample ``n`` sequences of length ``T`` from ``(init, P)``, for many kernels at once.

    ``P``: one kernel ``(K, K)`` (returns ``(n, T)`` tokens) or one per run ``(R, K, K)``
    (``(R, n, T)``). Randomness from a fresh CPU generator seeded ``seed``, or ``generator``
    (e.g. one advanced over many calls), else torch's global generator. ``init``:
    ``"stationary"`` (default; Makkuva et al. 2024 start at ``π``), ``"uniform"`` or a
    probability vector. All uniforms are drawn at once; ``u_t`` defines the map ``F_t(k)`` =
    inverse CDF of row ``k`` at ``u_t``, and ``x_{t+1} = F_t(x_t)`` is one ``gather`` per
    time step over all runs and sequences.
    """
    P, n, T, generator = _check_sampling_args(P, n, T, seed, generator)
    if generator is not None:
        P = P.to(generator.device)  # sample where the generator lives (CPU or CUDA)
    batch = (*P.shape[:-2], n)
    x = _initial_states(P, batch, init, generator)  # (*batch,)
    if T == 1:
        return x.unsqueeze(-1)
    K = P.shape[-1]
    u = torch.rand((T - 1, *batch), generator=generator, dtype=torch.float64, device=P.device)
    cum = P.cumsum(-1)[..., :-1].reshape(1, *P.shape[:-2], 1, K, K - 1)
    maps = (u[..., None, None] >= cum).sum(-1)  # (T-1, *batch, K): next state from each k
    states = [x]
    for t in range(T - 1):
        states.append(torch.gather(maps[t], -1, states[-1].unsqueeze(-1))[..., 0])
    return torch.stack(states, -1)


def enumerate_chains(
    P: Any, N: int, *, max_sequences: int = 2**16
) -> tuple[torch.Tensor, torch.Tensor]:
    """All ``K^N`` sequences of length ``N`` and their probabilities under ``(π, P)``.

    Returns ``(x, prob)`` with ``x`` of shape ``(K^N, N)`` (lexicographic order) and
    ``prob`` of shape ``(K^N,)`` (float64, sums to one). Used for exact population losses
    (Makkuva et al. 2024, eq. (1)) of models that look at the whole past.

    Raises
    ------
    ValueError
        If ``K^N`` exceeds ``max_sequences``.
    """
    P = check_kernel(P)
    if P.ndim != 2:
        raise ValueError(f"P must be one kernel of shape (K, K); got {tuple(P.shape)}")
    N = check_size("N", N, minimum=1)
    max_sequences = check_int("max_sequences", max_sequences, minimum=1)
    K = P.shape[0]
    check_power("K**N sequences (max_sequences)", K, N, limit=max_sequences)
    x = torch.tensor(list(itertools.product(range(K), repeat=N)), dtype=torch.long)
    pi = stationary_distribution(P)
    prob = pi[x[:, 0]] * P[x[:, :-1], x[:, 1:]].prod(-1)
    return x, prob


def empirical_transitions(x: Any, K: int) -> torch.Tensor:
    """Row-normalised transition counts of sequences ``x`` (``(..., T)``): an estimate of ``P``.

    Rows of states that never occur (except as the last token) are returned as zeros.
    """
    from ..core.validation import check_tokens

    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    x = check_tokens("x", x, K)
    if x.shape[-1] < 2:
        raise ValueError(f"x must have at least 2 time steps; got shape {tuple(x.shape)}")
    pairs = (x[..., :-1] * K + x[..., 1:]).flatten()
    counts = torch.bincount(pairs, minlength=K * K).reshape(K, K).to(torch.float64)
    totals = counts.sum(1, keepdim=True)
    return torch.where(totals > 0, counts / totals.clamp_min(1.0), counts)
