"""In-context n-gram data (Varre, Yüce & Flammarion 2025, Sec. 2.1–2.2 and App. H).

Every sequence has its own n-gram language model: a transition tensor ``P`` whose rows
``P[h_1, ..., h_{n-1}, :]`` (one per history, oldest token first, the **last** axis is the
next token) are drawn independently from a symmetric Dirichlet(α) prior. A sequence
``x_1, ..., x_T`` is then sampled from that model. The paper calls this the *in-context*
setting: the model has to infer the transition tensor from the sequence itself.

Conventions (``book/notation.md``): tokens are ``0..S-1``; the vocabulary size keeps the
paper's name ``S``; position ``t`` in code is ``x_{t+1}`` on the page. Internally a history
``(h_1, ..., h_{n-1})`` is flattened to the integer ``sum_j h_j S^(n-2-j)`` (row-major, as
``P.reshape(-1, S)`` does), so ``P_flat[code, j] = P[h_1, ..., h_{n-1}, j]``.

Two ways to start a sequence are provided:

``"uniform"``
    the first ``n-1`` tokens are i.i.d. uniform, as in the authors' public code. The
    likelihood of the start does not depend on ``P``, so the add-α ``n``-gram counts are the
    exact posterior mean (:func:`ccmc_lite.ngram.bayes_predictor`).
``"stationary"``
    the first ``n-1`` tokens are drawn from the stationary law π of the lifted chain on
    ``[S]^(n-1)`` (App. H.1); every window of ``n-1`` tokens then has law π (Lemma H.3)
    and lower-order conditionals are time-homogeneous (Lemma H.5).

Besides the tokens, the samplers return the **true next-token distribution at every
position**, so losses can be computed against it instead of against a sampled token (the
same expectation with much lower variance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from scipy import special

from ..core.chains import stationary_distribution
from ..core.seeding import torch_generator
from ..core.validation import (
    DEFAULT_LIMITS,
    as_tensor,
    check_choice,
    check_elements,
    check_float,
    check_int,
    check_prob_vector,
    check_size,
    check_tokens,
)

__all__ = [
    "NGramBatch",
    "NGramTask",
    "dirichlet",
    "dirichlet_mean_entropy",
    "flatten_transitions",
    "history_codes",
    "lifted_stationary",
    "lifted_transition_matrix",
    "log_uniform",
    "sample_batch",
    "sample_sequences",
    "sample_transitions",
    "sample_urn",
    "suffix_conditional",
]

STARTS = ("uniform", "stationary")


def _check_shape(
    name: str, value: Any, *, minimum: int = 1, per_entry: int = 1, limit: int | None = None
) -> tuple[int, ...]:
    """Check a shape: a tuple (or list) of sizes, each at least ``minimum``, whose product times
    ``per_entry`` (the entries each index holds, e.g. ``S`` probabilities) is at most ``limit``
    (default ``DEFAULT_LIMITS["elements"]``): refused before anything is allocated."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list)):
        raise TypeError(f"{name} must be a tuple of sizes; got {value!r:.60}")
    shape = tuple(check_size(f"{name} entry", s, minimum=minimum) for s in value)
    check_elements(f"prod({name}) * {per_entry}", math.prod(shape) * per_entry, limit=limit)
    return shape


def _check_S(S: int) -> int:
    return check_size("S", S, minimum=2, limit=DEFAULT_LIMITS["vocab"])


def _check_n(n: int) -> int:
    return check_size("n", n, minimum=1)


def _alpha_range(dtype: torch.dtype = torch.float64) -> tuple[float, float]:
    """The Dirichlet concentrations :func:`dirichlet` can sample in ``dtype``.

    Below the lower end the boost ``log U / α`` of the Gamma sampler overflows (every
    entry of a row would be ``-inf`` and the row ``0/0``); above the upper end ``α + 1``
    overflows and the rejection step never accepts.
    """
    info = torch.finfo(dtype)
    return -4.0 * math.log(info.tiny) / info.max, info.max / 64.0


def _check_alpha(alpha: float, dtype: torch.dtype = torch.float64) -> float:
    alpha = check_float("alpha", alpha, minimum=0.0, open_lower=True)
    lo, hi = _alpha_range(dtype)
    if not lo <= alpha <= hi:
        raise ValueError(
            f"alpha={alpha:g} cannot be sampled in {str(dtype).replace('torch.', '')}: "
            f"use {lo:.3g} <= alpha <= {hi:.3g} (outside, the Gamma variates over- or "
            "underflow)"
        )
    return alpha


def _check_T(T: int, n: int) -> int:
    T = check_size("T", T, minimum=1)
    if T < n:
        raise ValueError(
            f"T must be >= n (a sequence must hold one full history); got T={T}, n={n}"
        )
    return T


def _generator(generator: torch.Generator | None, seed: int | None) -> torch.Generator:
    if generator is not None and seed is not None:
        raise ValueError("give either generator or seed, not both")
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator; got {type(generator).__name__}")
        return generator
    if seed is None:
        raise ValueError("a seed (int) or a torch.Generator is required; got neither")
    return torch_generator(seed)


@dataclass(frozen=True)
class NGramTask:
    """The in-context n-gram task of Varre et al. 2025, Sec. 2.2 (paper setting in Sec. 5).

    Attributes
    ----------
    S : int
        Vocabulary size (``S >= 2``); tokens are ``0..S-1``.
    n : int
        Order of the n-gram (``n >= 1``): each token depends on the ``n-1`` before it.
    T : int
        Sequence length (``T >= n``); the model predicts ``x_{T+1}``.
    alpha : float
        Concentration of the symmetric Dirichlet prior on each row (``alpha > 0``).
    start : str
        ``"uniform"`` or ``"stationary"`` (see the module docstring).
    """

    S: int = 5
    n: int = 3
    T: int = 32
    alpha: float = 0.5
    start: str = "uniform"

    def __post_init__(self) -> None:
        _check_S(self.S)
        _check_n(self.n)
        _check_T(self.T, self.n)
        _check_alpha(self.alpha)
        check_choice("start", self.start, STARTS)

    @property
    def n_histories(self) -> int:
        """Number of rows of the transition tensor, ``S^(n-1)``."""
        return self.S ** (self.n - 1)


@dataclass
class NGramBatch:
    """A batch of in-context sequences with everything needed to score a predictor.

    Attributes
    ----------
    tokens : Tensor
        ``(*batch, T)`` long, the sequences.
    next_probs : Tensor
        ``(*batch, T, S)``: ``next_probs[..., t, :]`` is the true law of the token after
        position ``t`` given everything up to ``t`` (row ``-1`` is the target of the task).
    transitions : Tensor
        ``(*batch, S, ..., S)`` with ``n`` axes of size ``S``: each sequence's n-gram model.
    """

    tokens: torch.Tensor
    next_probs: torch.Tensor
    transitions: torch.Tensor

    @property
    def target(self) -> torch.Tensor:
        """The true distribution of ``x_{T+1}``, shape ``(*batch, S)``."""
        return self.next_probs[..., -1, :]


def dirichlet(
    alpha: float | torch.Tensor,
    shape: tuple[int, ...],
    S: int,
    *,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """Draw ``shape`` independent symmetric Dirichlet(α·1_S) vectors; returns ``(*shape, S)``.

    Gamma variates come from the Marsaglia–Tsang method (shape ``α+1``) with the boost
    ``G(α) = G(α+1) U^{1/α}`` applied in log space, and the Dirichlet vector is the softmax
    of the log-gammas, so rows never underflow to ``0/0`` even for small ``α``.
    ``alpha`` may be a tensor broadcastable to ``shape`` (one concentration per row), which
    the α-sweeps use to sample all their runs in one call.
    """
    S = _check_S(S)
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(
            f"dtype must be torch.float32 or torch.float64 (the Gamma sampler needs their "
            f"range); got {dtype}"
        )
    gen = _generator(generator, seed)
    if isinstance(alpha, torch.Tensor):
        lo, hi = _alpha_range(dtype)
        if not bool(torch.isfinite(alpha).all()) or not bool(((alpha >= lo) & (alpha <= hi)).all()):
            raise ValueError(
                f"alpha must lie in [{lo:.3g}, {hi:.3g}] everywhere, the concentrations "
                f"{str(dtype).replace('torch.', '')} can sample"
            )
        a = alpha.to(dtype)
    else:
        a = torch.tensor(_check_alpha(alpha, dtype), dtype=dtype)
    shape = _check_shape("shape", shape, minimum=0, per_entry=S)  # before any gamma variate
    a = torch.broadcast_to(a.reshape((*a.shape, 1)), (*shape, S))  # (*shape, S)
    return torch.softmax(_log_gamma(a, gen), dim=-1)


def _log_gamma(conc: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """``log G`` for independent ``G ~ Gamma(conc, 1)``, elementwise (any shape, conc > 0).

    Marsaglia–Tsang for the shape ``conc + 1 >= 1`` (rejection, redrawing only the
    rejected entries), then the boost ``log G(a) = log G(a + 1) + log(U) / a``.
    """
    dtype = conc.dtype
    a = conc.reshape(-1)
    d = a + 1.0 - 1.0 / 3.0
    c = 1.0 / torch.sqrt(9.0 * d)
    log_g = torch.empty_like(d)
    todo = None  # indices of the entries still to draw; None: all of them (first pass)
    tiny = torch.finfo(dtype).tiny
    while todo is None or todo.numel():
        dd, cc = (d, c) if todo is None else (d[todo], c[todo])
        z = torch.randn(dd.shape, generator=gen, dtype=dtype)
        u = torch.rand(dd.shape, generator=gen, dtype=dtype)
        v = (1.0 + cc * z) ** 3
        vpos = v.clamp_min(tiny)
        ok = (v > 0) & (torch.log(u) < 0.5 * z**2 + dd - dd * vpos + dd * torch.log(vpos))
        log_g[ok if todo is None else todo[ok]] = torch.log(dd[ok] * vpos[ok])
        todo = (~ok).nonzero().squeeze(1) if todo is None else todo[~ok]
    u = torch.rand(d.shape, generator=gen, dtype=dtype).clamp_min(tiny)
    return (log_g + torch.log(u) / a).reshape(conc.shape)


def sample_transitions(
    task: NGramTask,
    batch_shape: tuple[int, ...],
    *,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    alpha: torch.Tensor | None = None,
) -> torch.Tensor:
    """Transition tensors ``P`` with i.i.d. Dirichlet(α) rows (Varre et al. 2025, Sec. 5).

    Returns ``(*batch_shape, S, ..., S)`` with ``n`` axes of size ``S``; the last axis is
    the next token. ``alpha`` (optional) overrides ``task.alpha`` with a tensor
    broadcastable to ``(*batch_shape, S^(n-1))``.
    """
    if not isinstance(task, NGramTask):
        raise TypeError(f"task must be an NGramTask; got {type(task).__name__}")
    batch_shape = _check_shape("batch_shape", batch_shape, minimum=0, per_entry=task.S**task.n)
    a = task.alpha if alpha is None else alpha
    rows = dirichlet(
        a, (*batch_shape, task.n_histories), task.S, generator=generator, seed=seed
    )  # (*batch, S^(n-1), S)
    return rows.reshape(*batch_shape, *([task.S] * task.n))


def flatten_transitions(P: torch.Tensor, S: int, n: int) -> torch.Tensor:
    """Reshape ``(*batch, S, ..., S)`` (``n`` axes) to ``(*batch, S^(n-1), S)``, checking it."""
    S, n = _check_S(S), _check_n(n)
    P = as_tensor("P", P, dtype=None)
    if not P.is_floating_point():
        raise TypeError(f"P must hold floating-point probabilities; got {P.dtype}")
    if P.ndim < n or tuple(P.shape[P.ndim - n :]) != (S,) * n:
        raise ValueError(f"P must end with {n} axes of size S={S}; got shape {tuple(P.shape)}")
    batch = P.shape[: P.ndim - n]
    flat = P.reshape(*batch, S ** (n - 1), S)
    if bool((flat < 0).any()) or bool(((flat.sum(-1) - 1).abs() > 1e-6).any()):
        raise ValueError("P must hold probability distributions along its last axis")
    return flat


def lifted_transition_matrix(P: torch.Tensor, S: int, n: int) -> torch.Tensor:
    """The order-1 chain on histories ``[S]^(n-1)`` (Varre et al. 2025, App. H, Def. H.2).

    ``M[h, h'] = P[h, j]`` when ``h' = (h_2, ..., h_{n-1}, j)`` and 0 otherwise; shape
    ``(*batch, S^(n-1), S^(n-1))``, row-stochastic. For ``n = 1`` the chain has one state.
    """
    flat = flatten_transitions(P, S, n)  # (*batch, H, S)
    H = flat.shape[-2]
    batch = flat.shape[:-2]
    M = flat.new_zeros(*batch, H, H)
    if n == 1:
        return M + 1.0
    codes = torch.arange(H)
    nxt = (codes[:, None] * S) % H + torch.arange(S)[None, :]  # (H, S): next history code
    idx = nxt.expand(*batch, H, S)
    return M.scatter_add(-1, idx, flat)


def lifted_stationary(P: torch.Tensor, S: int, n: int) -> torch.Tensor:
    """Stationary law π of the lifted chain, ``π M = π`` (Varre et al. 2025, App. H, eq. (37)).

    ``M`` is :func:`lifted_transition_matrix`; the law is solved by
    :func:`ccmc_lite.core.stationary_distribution` in float64. Returns ``(*batch, S^(n-1))``.
    Dirichlet rows are positive almost surely, so the chain is irreducible and π is unique.
    """
    M = lifted_transition_matrix(P, S, n).to(torch.float64)  # (*batch, H, H)
    return stationary_distribution(M, name="the lifted transition matrix of P")


def _check_chains(P: Any, n: int | None = None) -> tuple[torch.Tensor, int]:
    """``(B, S, ..., S)`` n-gram transition tensors and their order ``n`` (``n`` axes of size S).

    Every last-axis slice must be a distribution. The order is ``P.ndim - 1`` (one leading
    batch axis). When ``B == S`` the shape alone does not say whether the first axis is the
    batch (``(S, S)``: ``S`` unigram laws, or one bigram table given without its batch
    axis), so ``n`` must then be passed; a given ``n`` is checked against the shape.
    """
    P = check_prob_vector("P", P, atol=1e-4, dtype=P.dtype if _is_float(P) else torch.float64)
    if P.ndim < 2 or any(s != P.shape[-1] for s in P.shape[1:]):
        raise ValueError(f"P must have shape (B, S, ..., S); got {tuple(P.shape)}")
    if n is None:
        if P.shape[0] == P.shape[-1]:
            shape = tuple(P.shape)
            raise ValueError(
                f"P of shape {shape} is ambiguous: a batch of {shape[0]} tables of order "
                f"n={P.ndim - 1}, or one table of order n={P.ndim} without its batch axis; "
                f"pass n= (the order) and, for one table, add the batch axis (P[None])"
            )
        return P, P.ndim - 1
    n = _check_n(n)
    if P.ndim != n + 1:
        raise ValueError(
            f"P must have shape (B, S, ..., S) with n={n} axes of size S after the batch "
            f"axis; got shape {tuple(P.shape)} ({P.ndim - 1} axes after the first)"
        )
    return P, n


def _is_float(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def history_codes(tokens: torch.Tensor, S: int, length: int) -> torch.Tensor:
    """Integer code of the ``length`` tokens ending at each position (oldest most significant).

    ``codes[..., t] = sum_j tokens[..., t-length+1+j] S^(length-1-j)`` for
    ``t >= length-1``; earlier entries are ``-1`` (no full history), so a ``length`` above
    the sequence length gives ``-1`` everywhere. ``length = 0`` gives all zeros (the empty
    history).
    """
    S = _check_S(S)
    length = check_size("length", length, minimum=0)
    x = check_tokens("tokens", tokens, S)
    T = x.shape[-1]
    codes = torch.zeros_like(x)
    if length > T:  # no position has a full history
        return torch.full_like(x, -1)
    if length == 0:
        return codes
    for j in range(length):
        shifted = torch.full_like(x, 0)
        lag = length - 1 - j
        shifted[..., lag:] = x[..., : T - lag]
        codes = codes * S + shifted
    codes[..., : length - 1] = -1
    return codes


def sample_sequences(
    P: torch.Tensor,
    T: int,
    *,
    start: str = "uniform",
    generator: torch.Generator | None = None,
    seed: int | None = None,
    n: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One sequence of length ``T >= n`` from each n-gram model in ``P`` (vectorised).

    ``P``: ``(B, S, ..., S)``, one transition table per sequence (``P[None]`` for one table);
    the order ``n`` is read from the shape unless given (required when ``B == S``, where the
    shape is ambiguous). Returns the tokens ``(B, T)`` and the true law of the next token after
    each position ``(B, T, S)``.
    """
    P, n = _check_chains(P, n)
    S = int(P.shape[-1])
    T = _check_T(T, n)
    start = check_choice("start", start, STARTS)
    gen = _generator(generator, seed)
    flat = flatten_transitions(P, S, n)  # (B, H, S)
    B, H = flat.shape[0], flat.shape[1]
    dtype = flat.dtype
    u = torch.rand(B, T, generator=gen, dtype=torch.float64)
    tokens = torch.empty(B, T, dtype=torch.long)
    next_probs = torch.empty(B, T, S, dtype=dtype)
    m = n - 1  # history length
    if m > 0:
        if start == "uniform":
            init = torch.full((B, H), 1.0 / H, dtype=torch.float64)
        else:
            init = lifted_stationary(P, S, n)  # (B, H)
        # draw the whole first history at once from its joint law
        cdf = init.cumsum(-1)
        code0 = torch.searchsorted(cdf, u[:, :1] * cdf[:, -1:]).clamp(max=H - 1).squeeze(-1)
        for j in range(m):
            tokens[:, j] = (code0 // S ** (m - 1 - j)) % S
        # next-token laws inside the first history: conditionals of the start law
        joint = init.reshape(B, *([S] * m))
        for t in range(m - 1):
            # law of x_{t+2} given x_1..x_{t+1}: marginalise the start law
            marg = joint.sum(dim=tuple(range(t + 3, m + 1))) if t + 2 < m else joint
            idx = tuple(tokens[:, j] for j in range(t + 1))
            cond = marg[(torch.arange(B), *idx)]  # (B, S)
            next_probs[:, t] = (cond / cond.sum(-1, keepdim=True)).to(dtype)
        code = code0
        for t in range(m - 1, T):
            row = flat[torch.arange(B), code]  # (B, S)
            next_probs[:, t] = row
            if t + 1 < T:
                c = row.to(torch.float64).cumsum(-1)
                tok = torch.searchsorted(c, u[:, t + 1 : t + 2] * c[:, -1:]).clamp(max=S - 1)
                tok = tok.squeeze(-1)
                tokens[:, t + 1] = tok
                code = (code * S) % H + tok
    else:  # n = 1: i.i.d. tokens from P[b]
        row = flat[:, 0]  # (B, S)
        c = row.to(torch.float64).cumsum(-1)
        tokens = torch.searchsorted(c, u * c[:, -1:]).clamp(max=S - 1)
        next_probs[:] = row[:, None, :]
    return tokens, next_probs


def sample_batch(
    task: NGramTask,
    batch_size: int,
    *,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    alpha: torch.Tensor | None = None,
    T: int | None = None,
) -> NGramBatch:
    """Draw ``batch_size`` tasks and one sequence from each (Varre et al. 2025, Sec. 2.1).

    ``alpha`` (a tensor of shape ``(batch_size,)``) gives each sequence its own prior
    concentration; ``T`` overrides ``task.T``. Same generator state, same batch.
    """
    if not isinstance(task, NGramTask):
        raise TypeError(f"task must be an NGramTask; got {type(task).__name__}")
    batch_size = check_size("batch_size", batch_size, minimum=1)
    gen = _generator(generator, seed)
    T = task.T if T is None else _check_T(T, task.n)
    a = None
    if alpha is not None:
        a = as_tensor("alpha", alpha, ndim=1)
        if a.shape[0] != batch_size:
            raise ValueError(f"alpha must have shape ({batch_size},); got {tuple(a.shape)}")
        a = a[:, None]  # (B, 1) broadcast over histories
    P = sample_transitions(task, (batch_size,), generator=gen, alpha=a)
    tokens, next_probs = sample_sequences(P, T, start=task.start, generator=gen, n=task.n)
    return NGramBatch(tokens=tokens, next_probs=next_probs, transitions=P)


_URN_BLOCK = 8192  # sequences per pass of the urn loop: its (S, block) temporaries stay in cache


def _urn_block(
    u: torch.Tensor,
    a: torch.Tensor | float,
    q: torch.Tensor | None,
    tokens: torch.Tensor,
    S: int,
    m: int,
) -> torch.Tensor:
    """The Pólya-urn loop of :func:`sample_urn` for one block of sequences.

    ``u``: ``(n, T)`` uniforms; ``a``: ``(n,)`` concentrations, or one float for all; ``q``:
    ``(n,)`` query positions or ``None`` (``T - 1``); ``tokens``: ``(n, T)`` with the first
    ``m`` filled, the others filled in place. Returns the ``(n, S)`` transition counts of the
    history at each sequence's query position. The counts live in an ``(S, n * S^m)`` table,
    one column per (sequence, history), so that every reduction over the ``S`` symbols runs
    across rows of ``n`` entries (vectorised); the history code is carried from step to step.
    ``x_{t+1}`` is the number of ``s < S - 1`` whose cumulative weight ``N_h(s) + α`` is below
    ``u (N_h + Sα)``, so the tokens do not depend on the block or the layout.
    """
    n, T = u.shape
    H = S**m
    columns = n * H
    counts = torch.zeros(S, columns)  # counts[s, i * H + h] = N_h(s) in sequence i
    flat = counts.view(-1)
    base = torch.arange(n) * H  # (n,): first column of each sequence
    code = torch.zeros(n, dtype=torch.long)  # (n,): code of the current history
    for j in range(m):
        code = code * S + tokens[:, j]
    col = base + code  # (n,): column of the current history
    lead = S ** (m - 1) if m > 0 else 0  # weight of the oldest token in a code
    ones = torch.ones(n)
    steps = u[:, m:].t().contiguous()  # (T - m, n): one contiguous row of uniforms per step
    history = [tokens[:, j] for j in range(m)]  # token at every position so far, (n,) each
    q_col = col
    for t in range(m, T):
        cdf = counts.index_select(1, col).add_(a).cumsum(0)  # (S, n): cumsum of N_h + alpha
        tok = (cdf[:-1] < steps[t - m] * cdf[-1]).sum(0)  # (n,) long
        flat.index_add_(0, torch.add(col, tok, alpha=columns), ones)  # N_h(tok) += 1
        if m > 0:
            code = torch.add(tok, torch.sub(code, history[t - m], alpha=lead), alpha=S)
            col = base + code
        history.append(tok)
        if q is not None:
            q_col = torch.where(q == t, col, q_col)
    if T > m:
        tokens[:, m:] = torch.stack(history[m:], 1)
    return counts.index_select(1, col if q is None else q_col).t()  # (n, S)


def sample_urn(
    task: NGramTask,
    shape: tuple[int, ...],
    *,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    alpha: torch.Tensor | None = None,
    T: int | None = None,
    query_pos: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fast exact sampler for training: tokens ``(*shape, T)`` and the next token's true law.

    Drawing a whole transition tensor costs ``S^n`` gamma variates per sequence, most of which
    a training step never looks at. For the ``"uniform"`` start (required) the rows are
    independent Dirichlet(α) vectors and the start does not depend on them, so

    1. the sequence is drawn with ``P`` integrated out: each history's row is a Pólya urn,
       ``P(x_{t+1} = s | x^t) = (N_h(s) + α) / (N_h + Sα)`` (Dirichlet–multinomial);
    2. given the sequence, the queried history's row has the posterior Dirichlet(α + counts),
       from which the target row ``(*shape, S)`` is drawn.

    The pair has exactly the law of the forward sampler (:func:`sample_batch`), at ``S`` gamma
    variates per sequence instead of ``S^n``. ``shape``: e.g. ``(R, B)`` for ``R`` runs of
    batch ``B``; ``alpha``: a concentration per sequence (α-sweeps); ``T``: default
    ``task.T``; ``query_pos``: the position (0-based) whose next token is the target, default
    ``T - 1`` (T-sweeps sample ``T_max`` tokens and query run ``r`` at ``T_r - 1``).
    """
    if not isinstance(task, NGramTask):
        raise TypeError(f"task must be an NGramTask; got {type(task).__name__}")
    if task.start != "uniform":
        raise ValueError(f"sample_urn needs task.start='uniform'; got {task.start!r}")
    gen = _generator(generator, seed)
    T = task.T if T is None else _check_T(T, task.n)
    S, m = task.S, task.n - 1
    shape = _check_shape("shape", shape, per_entry=max(T, S))  # tokens, uniforms, posteriors
    N = math.prod(shape)
    one_alpha = None  # the concentration when all sequences share it (a faster add)
    if alpha is None:
        a = torch.full((N,), task.alpha, dtype=torch.float32)
        one_alpha = float(a[0])  # task.alpha rounded to float32, as in a
    else:
        a = torch.broadcast_to(as_tensor("alpha", alpha, dtype=torch.float32), shape).reshape(-1)
        if not bool((a > 0).all()):
            raise ValueError("alpha must be > 0 everywhere")
    q = None  # query positions; None: T - 1 for every sequence
    if query_pos is not None:
        q = torch.broadcast_to(as_tensor("query_pos", query_pos, dtype=torch.long), shape)
        q = q.reshape(-1)
        if bool((q < m - 1).any()) or bool((q >= T).any()):
            raise ValueError(f"query_pos must lie in [{max(m - 1, 0)}, {T - 1}]")
    u = torch.rand(N, T, generator=gen)
    tokens = torch.empty(N, T, dtype=torch.long)
    tokens[:, :m] = (u[:, :m] * S).long().clamp(max=S - 1)
    post = torch.empty(N, S)  # counts of the queried history, then + alpha
    for s in range(0, N, _URN_BLOCK):
        e = min(s + _URN_BLOCK, N)
        a_block = a[s:e] if one_alpha is None else one_alpha
        post[s:e] = _urn_block(u[s:e], a_block, None if q is None else q[s:e], tokens[s:e], S, m)
    post += a[:, None]  # (N, S)
    target = torch.softmax(_log_gamma(post, gen), dim=-1)  # posterior draw of the row
    return tokens.reshape(*shape, T), target.reshape(*shape, S)


def suffix_conditional(
    P: torch.Tensor, k: int, T: int, *, start: str = "uniform", n: int | None = None
) -> torch.Tensor:
    """``p_τ(x_{T+1} = · | x_{T-k+2}^T)``: the law of the next token given a ``(k-1)``-suffix.

    This is the conditional probability that drives the gradient at the k-gram point
    (Varre et al. 2025, Prop. 3.2 and Thm. 4.2). It is computed exactly by propagating the
    law of the current history forward ``T`` steps from the start law; with
    ``start="stationary"`` it does not depend on ``T`` (Lemma H.5).

    Returns ``(B, S^(k-1), S)`` (rows indexed by the suffix code); suffixes of probability
    zero get the uniform row. ``P`` is ``(B, S, ..., S)``; its order ``n`` is read from the
    shape unless given, and is required when ``B == S`` (see :func:`sample_sequences`).
    """
    P, n = _check_chains(P, n)
    S = int(P.shape[-1])
    k = check_int("k", k, minimum=1, maximum=n)
    T = check_size("T", T, minimum=max(n - 1, 1))
    start = check_choice("start", start, STARTS)
    flat = flatten_transitions(P, S, n).to(torch.float64)  # (B, H, S)
    B, H = flat.shape[0], flat.shape[1]
    m = n - 1
    if m == 0:
        return flat.clone()
    if start == "uniform":
        mu = torch.full((B, H), 1.0 / H, dtype=torch.float64)
        M = lifted_transition_matrix(P, S, n).to(torch.float64)
        for _ in range(T - m):
            mu = torch.einsum("bh,bhg->bg", mu, M)
    else:
        mu = lifted_stationary(P, S, n)
    joint = (mu[..., None] * flat).reshape(B, *([S] * (m + 1)))  # (B, x_{T-m+1..T}, x_{T+1})
    keep = k - 1
    if m - keep > 0:
        joint = joint.sum(dim=tuple(range(1, 1 + m - keep)))
    joint = joint.reshape(B, S**keep, S)
    tot = joint.sum(-1, keepdim=True)
    uniform = torch.full_like(joint, 1.0 / S)
    return torch.where(tot > 0, joint / tot.clamp_min(1e-300), uniform)


def dirichlet_mean_entropy(S: int, alpha: float) -> float:
    """Mean entropy of a symmetric Dirichlet row, ``E[H(p)] = ψ(Sα+1) − ψ(α+1)`` nats.

    A predictor that knew the true row ``P(·|h)`` would still pay its entropy, so this is the
    floor of the in-context loss when the row is a fresh Dirichlet(α·1_S) draw (Varre et al.
    2025, Sec. 5; derived in Part III, Chapter 1 from ``E[H] = -S E[p_1 log p_1]``,
    ``p_1 ~ Beta(α, (S-1)α)``). For ``α = 1`` it is ``H_S - 1`` (harmonic numbers), e.g.
    ``5/6`` for ``S = 3``; always in ``(0, log S)``.
    """
    S = _check_S(S)
    alpha = _check_alpha(alpha)
    return float(special.digamma(S * alpha + 1.0) - special.digamma(alpha + 1.0))


def log_uniform(S: int) -> float:
    """Cross-entropy of the uniform predictor, ``log S`` nats."""
    return math.log(_check_S(S))
