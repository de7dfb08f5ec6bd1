"""Single trajectories and distribution collapse, Ildiz et al. 2024, Sec. 5 and App. E.

Feeding a CCMC its own output makes frequent tokens more frequent: the trajectory
collapses onto a few *winner* tokens (Fig. 4). For ``K = 2`` with both rows of ``P`` equal
to ``(1 − p, p)`` (``p < 1/2``) Lemma 5.3 bounds the weak token's expected frequency by
:math:`t^{-q}`, :math:`q = (1-2p)/(1-p)`, and a Borel–Cantelli heuristic predicts finitely
many weak→weak transitions iff ``p < 1/3`` (Fig. 5).

Beyond the paper (a *conjecture*, see the chapter): the frequency vector is a stochastic
approximation of the ODE :math:`\\dot m = \\mu(m) - m`, with :math:`\\mu(m)` the
stationary law of the re-weighted chain :math:`P^m` (eq. (1)). A singleton ``{w}`` is a
stable limit iff ``P[w, w] > P[w, j]`` for all ``j ≠ w``, and a loser ``j`` then decays
like :math:`t^{-(1 - P[w,j]/P[w,w])}`; in general, at a stable fixed point :math:`m^*`
with support ``S`` the exponent is :math:`1-\\lambda_j`, :math:`\\lambda_j = \\sum_{i\\in S}
m^*_i P_{ij} / \\sum_{k\\in S} m^*_k P_{ik}` (:func:`~ccmc_lite.ccmc.predicted_decay_exponents`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from matplotlib.axes import Axes

from ..core.seeding import torch_generator
from ..core.validation import (
    DEFAULT_LIMITS,
    as_tensor,
    check_choice,
    check_elements,
    check_float,
    check_instance,
    check_int,
    check_prob_vector,
    check_probability,
    check_seed,
    check_size,
    check_tokens,
)
from .chain import check_transition

__all__ = [
    "WEAK_FREQUENCY_MAX_LENGTH",
    "binary_collapse_chain",
    "collapse_census",
    "collapse_explorer",
    "collapse_exponent",
    "collapse_limit_constant",
    "collapse_lower_bound",
    "compare_decay_exponents",
    "draw_collapse",
    "explorer_chain",
    "fixed_point",
    "interior_rates",
    "near_stability_boundary",
    "plot_frequency_curves",
    "plot_snapshots",
    "predicted_decay_exponents",
    "random_chain",
    "running_frequencies",
    "self_reinforcing_tokens",
    "stable_fixed_points",
    "stationary_of_reweighted",
    "weak_frequency_exact",
    "weak_weak_exact",
    "weak_weak_exponent",
    "zero_diagonal",
]


def binary_collapse_chain(p: float) -> torch.Tensor:
    """The ``K = 2`` chain of Lemma 5.3: both rows ``(1 − p, p)``, ``p`` in ``(0, 1)``; ``(2, 2)``.

    The paper writes it column-stochastic, :math:`P^{GT} = [[1-p, 1-p], [p, p]]`: the next
    token does not depend on the current one; token 1 (the paper's token 2) is the *weak*
    token when ``p < 1/2``.
    """
    p = check_probability("p", p)
    return torch.tensor([[1 - p, p], [1 - p, p]], dtype=torch.float64)


def collapse_exponent(p: Any) -> Any:
    """:math:`q = (1 - 2p)/(1 - p)`, the decay exponent of Lemma 5.3 (eq. (50)), in ``[0, 1)``.

    ``p`` (a float or an array) is the weak token's probability, in ``(0, 1/2]``; at
    ``p = 1/2``, ``q = 0`` (no collapse). For ``p > 1/2`` the roles swap and the formula would
    give a negative "exponent", so such ``p`` is rejected: pass ``1 - p`` instead.
    """
    arr = as_tensor("p", p, finite=False).numpy()
    if np.any(~np.isfinite(arr)) or np.any(arr <= 0) or np.any(arr > 0.5):
        raise ValueError(
            f"p must lie in (0, 1/2] (the weak token's probability, Lemma 5.3); got p={p!r}"
        )
    q = (1 - 2 * arr) / (1 - arr)
    return float(q) if q.ndim == 0 else q


def weak_weak_exponent(p: Any) -> Any:
    """Growth exponent :math:`1 - 2q = (3p-1)/(1-p)` of the expected weak→weak count (Sec. 5.2).

    The paper's heuristic: :math:`\\mathbb P(\\text{weak}\\to\\text{weak at } t) \\propto
    t^{-2q}`, so the count grows like :math:`t^{1-2q}` when ``p > 1/3`` and stays bounded when
    ``p < 1/3``. ``p`` in ``(0, 1/2]``, a float or an array.
    """
    q = collapse_exponent(p)
    return 1 - 2 * q


#: Longest ``length`` :func:`weak_frequency_exact` accepts (its work grows like ``length^2``).
WEAK_FREQUENCY_MAX_LENGTH = 100_000


class _Urn:
    """The two-token chain of Lemma 5.3 started from ``prompt``, for the exact programs.

    Validates ``p`` (in ``(0, 1/2]``), ``length`` and ``prompt`` (over ``{0, 1}``, both
    tokens present; token 1 is the weak one) and gives eq. (48)'s probability that the
    next token is weak for every weak count ``S = 0..L`` at sequence length ``L``.
    """

    def __init__(self, p: Any, length: int, prompt: Any) -> None:
        p_arr = np.atleast_1d(as_tensor("p", p, ndim=(0, 1)).numpy())
        collapse_exponent(p_arr)  # validates 0 < p <= 1/2
        # O(length^2) work and an (n_p, length) table: 10^5 tokens take minutes already
        length = check_size("length", length, limit=WEAK_FREQUENCY_MAX_LENGTH)
        self.tokens: list[int] = check_tokens("prompt", prompt, 2, ndim=1).tolist()
        if len(set(self.tokens)) != 2:
            raise ValueError(f"prompt must contain both tokens 0 and 1; got {prompt!r}")
        self.n = p_arr.shape[0]
        self.L0, self.S0 = len(self.tokens), sum(self.tokens)
        self.T = self.L0 + length
        self._q = 1 - p_arr[:, None]  # (n, 1)
        S = np.arange(self.T + 1, dtype=float)
        self._a, self._b = S * p_arr[:, None], S * self._q  # (n, T + 1): S p, S (1 - p)

    def next_weak(self, L: int) -> np.ndarray:
        """``(n, L + 1)``: :math:`Sp/(Sp + (L-S)(1-p))` for ``S = 0..L`` (eq. (48), exact)."""
        a, b = self._a[:, : L + 1], self._b[:, : L + 1]
        return a / (a + (L * self._q - b))


def weak_frequency_exact(
    p: Any, length: int, *, prompt: Any = (0, 1), statistic: str = "frequency"
) -> np.ndarray:
    """Exact :math:`\\mathbb E[m(X_t)_{\\text{weak}}]` for the chain of Lemma 5.3 (dynamic program).

    With rows ``(1 - p, p)`` the next token depends only on the weak count ``S`` of the
    current sequence of length ``L``: it is weak with probability
    :math:`Sp/(Sp + (L-S)(1-p))` (Ildiz et al. 2024, eq. (48)). The law of ``S`` is propagated
    exactly, one token at a time (``O(length^2)`` work), so no approximation such as eq.
    (49)'s ``≈`` enters. Several ``p`` in ``(0, 1/2]`` are propagated together; ``prompt``
    is over ``{0, 1}`` with both tokens (token 1 is the weak one). ``statistic="odds"`` gives
    :math:`\\mathbb E[m_1/m_0] = \\mathbb E[S/(L-S)]`, the quantity of eqs. (52)–(53).

    Returns ``(n_p, L_0 + length + 1)``: entry ``[i, t]`` is the statistic at sequence length
    ``t >= L_0`` (``nan`` below the prompt length ``L_0``).
    """
    odds = check_choice("statistic", statistic, ("frequency", "odds")) == "odds"
    urn = _Urn(p, length, prompt)
    n, L0, S0, T = urn.n, urn.L0, urn.S0, urn.T
    S = np.arange(T + 1, dtype=float)
    dist = np.zeros((n, T + 1))
    dist[:, S0] = 1.0
    inc = np.empty((n, T + 1))
    mean_S = np.full(n, float(S0))
    out = np.full((n, T + 1), np.nan)
    out[:, L0] = S0 / (L0 - S0) if odds else S0 / L0
    for L in range(L0, T):
        k = L + 1
        f = urn.next_weak(L)  # (n, k)
        np.multiply(dist[:, :k], f, out=inc[:, :k])
        mean_S += inc[:, :k].sum(1)
        dist[:, :k] -= inc[:, :k]
        dist[:, 1 : k + 1] += inc[:, :k]
        if odds:  # S <= L at length L + 1: the strong token is in the prompt
            out[:, L + 1] = dist[:, : L + 1] @ (S[: L + 1] / (L + 1 - S[: L + 1]))
        else:
            out[:, L + 1] = mean_S / (L + 1)
    return out


def weak_weak_exact(p: Any, length: int, *, prompt: Any = (0, 1)) -> np.ndarray:
    """Exact expected number of weak→weak pairs for the chain of Lemma 5.3 (Sec. 5.2, Fig. 5).

    As in :func:`weak_frequency_exact` (same ``p`` and ``prompt``), the next token is weak
    with probability :math:`Sp/(Sp + (L-S)(1-p))` (eq. (48)); the law of ``(S, last token)``
    is propagated exactly and the count grows by :math:`\\mathbb P(\\text{last weak},
    \\text{next weak})` at each step. Returns ``(n_p, L_0 + length + 1)``: the expected
    number of pairs among the first ``t`` tokens (those inside the prompt included; ``nan``
    below the prompt length).
    """
    urn = _Urn(p, length, prompt)
    n, L0, S0, T, toks = urn.n, urn.L0, urn.S0, urn.T, urn.tokens
    weak_last = np.zeros((n, T + 1))  # P(S, last token weak)
    strong_last = np.zeros((n, T + 1))  # P(S, last token strong)
    (weak_last if toks[-1] == 1 else strong_last)[:, S0] = 1.0
    count = np.full(n, float(sum(a == b == 1 for a, b in itertools.pairwise(toks))))
    out = np.full((n, T + 1), np.nan)
    out[:, L0] = count
    for L in range(L0, T):
        k = L + 1  # weak counts 0..L are possible at length L
        f = urn.next_weak(L)  # (n, k): next is weak
        count += (weak_last[:, :k] * f).sum(1)
        total = weak_last[:, :k] + strong_last[:, :k]
        weak_last[:, 1 : k + 1] = total * f  # S grows by one, the last token is weak
        weak_last[:, 0] = 0.0
        strong_last[:, :k] = total * (1 - f)
        out[:, L + 1] = count
    return out


def collapse_limit_constant(p: Any, *, prompt_length: int = 2, prompt_weak: int = 1) -> Any:
    """The exact limit of :math:`t^q\\,\\mathbb E[m(X_t)_{\\text{weak}}]` (beyond the paper).

    The chain of Lemma 5.3 draws the weak token with probability :math:`Sp/(Sp + N(1-p))`
    given ``S`` weak and ``N`` strong tokens (eq. (48)): the jump chain of two independent
    Yule processes, splitting at rates ``p`` and ``1 - p`` (Athreya–Karlin embedding). Then
    :math:`S(\\tau)e^{-p\\tau} \\to W_S \\sim \\mathrm{Gamma}(S_0)`,
    :math:`N(\\tau)e^{-(1-p)\\tau} \\to W_N \\sim \\mathrm{Gamma}(N_0)`, independent; at
    length :math:`t \\approx W_N e^{(1-p)\\tau}`, :math:`m_t \\approx W_S W_N^{-\\bar p}\\,
    t^{-q}` with :math:`\\bar p = p/(1-p)`, and

    .. math::
        t^q\\,\\mathbb E[m_t] \\to S_0\\,\\frac{\\Gamma(N_0 - \\bar p)}{\\Gamma(N_0)},
        \\qquad N_0 = L_0 - S_0 ,

    for a prompt of ``prompt_length`` :math:`L_0` tokens, ``prompt_weak`` :math:`S_0` of
    them weak, and ``p`` in ``(0, 1/2)``. For the prompt ``[0, 1]`` this is
    :math:`\\Gamma(q) > 1`, so Lemma 5.3's bound :math:`\\mathbb E[m_t] < t^{-q}` fails for
    all large ``t``; for ``[0, 0, 1]`` it is below 1. :func:`weak_frequency_exact` converges
    to it (a test checks).
    """
    from scipy.special import gammaln

    q = np.asarray(collapse_exponent(p), dtype=float)
    if np.any(q <= 0):
        raise ValueError(f"p must be below 1/2 (at p = 1/2 nothing collapses); got p={p!r}")
    L0 = check_int("prompt_length", prompt_length, minimum=2)
    S0 = check_int("prompt_weak", prompt_weak, minimum=1, maximum=L0 - 1)
    N0 = L0 - S0
    p_bar = 1.0 - q  # p / (1 - p)
    val = S0 * np.exp(gammaln(N0 - p_bar) - gammaln(N0))
    return float(val) if val.ndim == 0 else val


def collapse_lower_bound(p: Any, t: Any, *, prompt_length: int = 2, prompt_weak: int = 1) -> Any:
    """The linearised recursion of Lemma 5.3, started at the prompt: a *lower* bound.

    The exact increment of eq. (48) is :math:`\\bar p S/(L - qS) \\ge \\bar p S/L`
    (:math:`\\bar p = p/(1-p)`), so dropping the :math:`S` term as in eq. (49)
    *under*-estimates :math:`\\mathbb E[S]`, and the recursion (50) gives, exactly,

    .. math::
        \\mathbb E[m(X_t)_{\\text{weak}}] \\ge m_0 \\prod_{\\tau=L_0+1}^{t} (1 - q/\\tau)
        = m_0\\,\\frac{\\Gamma(L_0+1)\\,\\Gamma(t+1-q)}{\\Gamma(L_0+1-q)\\,\\Gamma(t+1)},

    with the product from the prompt length :math:`L_0` (``prompt_length``; eq. (51) starts
    it at 1) and :math:`m_0 = S_0/L_0` (``prompt_weak`` :math:`S_0`). It is not the upper
    bound that Lemma 5.3 states. ``p`` in ``(0, 1/2]`` and ``t >= L_0`` broadcast together.
    """
    from scipy.special import gammaln

    q = np.asarray(collapse_exponent(p), dtype=float)
    L0 = check_int("prompt_length", prompt_length, minimum=2)
    S0 = check_int("prompt_weak", prompt_weak, minimum=1, maximum=L0 - 1)
    t_arr = np.asarray(t, dtype=float)
    if np.any(~np.isfinite(t_arr)) or np.any(t_arr < L0):
        raise ValueError(f"t must be >= prompt_length={L0}; got {t!r}")
    log_val = gammaln(L0 + 1) - gammaln(L0 + 1 - q) + gammaln(t_arr + 1 - q) - gammaln(t_arr + 1)
    val = (S0 / L0) * np.exp(log_val)
    return float(val) if val.ndim == 0 else val


def random_chain(K: int, *, seed: int, scale: float = 1.0) -> torch.Tensor:
    """The base chain :math:`P^W` (``E = I``) of a random attention layer, ``(K, K)``.

    ``P[i, j] = softmax_j(W[j, i])`` (eq. (4)) with ``W`` i.i.d.
    :math:`\\mathcal N(0, \\text{scale}^2)` drawn from ``seed``; every entry is positive.
    """
    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    scale = check_float("scale", scale, minimum=0.0)
    W = scale * torch.randn(K, K, generator=torch_generator(check_seed(seed)), dtype=torch.float64)
    return torch.softmax(W.T, dim=-1)


def zero_diagonal(P: Any) -> torch.Tensor:
    """``P`` with its diagonal set to zero and rows renormalised (Fig. 4, lower panels).

    Renormalising does not change the CCMC: :math:`\\pi^X` is invariant to scaling a row. No
    attention ``W`` produces a zero entry (Thm. 2.6 needs positive entries); the CCMC itself is
    well defined while a key token with ``P[x_L, j] > 0`` exists, so every row needs mass off
    the diagonal.
    """
    P = check_transition(P)
    Q = P.clone()
    Q.fill_diagonal_(0.0)
    sums = Q.sum(-1, keepdim=True)
    if bool((sums <= 0).any()):
        raise ValueError("P must have a non-zero off-diagonal entry in every row")
    return Q / sums


def running_frequencies(tokens: Any, K: int) -> torch.Tensor:
    """Frequencies :math:`m(X_t)` of every prefix ``X_t = tokens[..., :t]`` (eq. (2)).

    ``tokens``: ``(T,)`` or ``(R, T)`` over ``K`` tokens, prompt included. Returns
    ``(..., T, K)``: row ``t - 1`` holds :math:`m(X_t)`.
    """
    from ..core.validation import check_tokens

    K = check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    X = check_tokens("tokens", tokens, K, ndim=(1, 2))
    cum = torch.nn.functional.one_hot(X, K).double().cumsum(-2)
    return cum / torch.arange(1, X.shape[-1] + 1, dtype=torch.float64)[:, None]


def self_reinforcing_tokens(P: Any) -> list[int]:
    """Tokens ``w`` that are their own strict favourite: ``P[w, w] > P[w, j]`` for ``j ≠ w``.

    Conjecture (beyond the paper): exactly these tokens can win a single trajectory alone.
    """
    P = check_transition(P)
    off = P.clone()
    off.fill_diagonal_(-1.0)
    return [int(w) for w in range(P.shape[0]) if bool(P[w, w] > off[w].max())]


def _check_weights(name: str, m: Any, K: int) -> torch.Tensor:
    """``K`` non-negative token weights, not all zero (normalised by the callers)."""
    m = as_tensor(name, m, dtype=torch.float64, ndim=1)
    if m.shape[0] != K or bool((m < 0).any()) or float(m.sum()) <= 0:
        raise ValueError(f"{name} must be {K} non-negative weights, not all zero")
    return m


def stationary_of_reweighted(P: Any, m: Any) -> torch.Tensor:
    """Stationary law :math:`\\mu(m)` of the re-weighted chain :math:`P^m` (eq. (1)), ``(K,)``.

    ``m``: ``(K,)`` non-negative weights; the chain lives on ``{j : m_j > 0}`` and the law is
    zero outside it (unique when :math:`P^m` is irreducible there; otherwise the one the
    least-squares solver returns).
    """
    P = check_transition(P)
    return _reweighted_stationary(P, _check_weights("m", m, P.shape[0]))


def _reweighted_stationary(P: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """:func:`stationary_of_reweighted` for checked ``P`` and ``m`` (the ODE's inner step)."""
    S = (m > 0).nonzero().flatten()
    Pm = P[S][:, S] * m[S][None, :]
    if bool((Pm.sum(-1) <= 0).any()):
        raise ValueError("the re-weighted chain has a state with no way out on supp(m)")
    Pm = Pm / Pm.sum(-1, keepdim=True)
    n = len(S)
    A = torch.cat([Pm.T - torch.eye(n, dtype=torch.float64), torch.ones(1, n, dtype=torch.float64)])
    b = torch.cat([torch.zeros(n, dtype=torch.float64), torch.ones(1, dtype=torch.float64)])
    sol = torch.linalg.lstsq(A, b[:, None]).solution.flatten().clamp(min=0)
    out = torch.zeros_like(m)
    out[S] = sol / sol.sum()
    return out


def fixed_point(P: Any, m0: Any, *, steps: int = 4000, dt: float = 0.05) -> torch.Tensor:
    """Follow the mean-field ODE :math:`\\dot m = \\mu(m) - m` from ``m0`` (``steps`` Euler steps).

    Its stable fixed points are the conjectured limits of :math:`m(X_t)` (beyond the paper);
    started at a trajectory's late frequencies restricted to its dominant tokens, it returns
    the ``(K,)`` fixed point :math:`m^*` that trajectory approaches. Tokens with ``m0 = 0``
    stay at zero.
    """
    steps = check_size("steps", steps, minimum=1)
    dt = check_float("dt", dt, minimum=0.0, maximum=1.0, open_lower=True)
    P = check_transition(P)
    m = _check_weights("m0", m0, P.shape[0]).clone()
    m = m / m.sum()
    for _ in range(steps):  # validated once above, not at every step
        m = m + dt * (_reweighted_stationary(P, m) - m)
    return m


def stable_fixed_points(
    P: Any, *, steps: int = 300, dt: float = 0.5, tol: float = 1e-7
) -> list[tuple[tuple[int, ...], torch.Tensor, torch.Tensor]]:
    """Fixed points :math:`m^* = \\mu(m^*)` that no absent token can invade (beyond the paper).

    For every support ``S`` the ODE of :func:`fixed_point` is followed (``steps`` Euler steps
    of size ``dt``) from the uniform point of the face ``S``; a face is kept when it converges
    to a point with all of ``S`` present (residual and masses against ``tol``) and every token
    outside ``S`` has a positive decay exponent :math:`\\alpha_j`
    (:func:`predicted_decay_exponents`): the conjectured long-run supports of a trajectory
    (Ildiz et al. 2024, Sec. 5, prove the picture only for ``K = 2``). ``2^K - 1`` ODE runs,
    so ``K <= 10``.

    Returns ``(S, m_star, alpha)`` per stable face, ``alpha`` the ``(K,)`` exponents of the
    tokens outside ``S`` (``nan`` on ``S``): the slowest loser fades like
    :math:`t^{-\\min_j \\alpha_j}`.
    """
    P = check_transition(P)
    K = P.shape[0]
    if K > 10:
        raise ValueError(f"stable_fixed_points enumerates 2^K faces; K={K} > 10 is too many")
    steps = check_size("steps", steps)
    check_elements("steps * 2^K", steps * 2**K, limit=10**8)  # Euler steps x faces
    dt = check_float("dt", dt, minimum=0.0, maximum=1.0, open_lower=True)
    tol = check_float("tol", tol, minimum=0.0, open_lower=True)
    faces = torch.tensor(
        [[mask >> k & 1 for k in range(K)] for mask in range(1, 2**K)], dtype=torch.float64
    )
    # faces on which P^m has a state with no way out (e.g. a zero diagonal) are skipped
    ok = (((P[None] * faces[:, None, :]).sum(-1) > 0) | (faces == 0)).all(-1)
    m = faces[ok] / faces[ok].sum(-1, keepdim=True)
    for _ in range(steps):  # batched Euler steps of fixed_point, all faces at once
        m = m + dt * (_stationary_batch(P, m) - m)
    resid = (_stationary_batch(P, m) - m).abs().amax(-1)
    out = []
    for face, m_f, r in zip(faces[ok], m, resid, strict=True):
        S = tuple(int(k) for k in face.nonzero().flatten())
        if float(r) > tol or bool((m_f[list(S)] <= tol).any()):
            continue
        m_f = m_f * face
        m_f = m_f / m_f.sum()
        if len(S) == K:
            alpha = torch.full((K,), float("nan"), dtype=torch.float64)
        else:
            alpha = predicted_decay_exponents(P, m_f)
            if bool((alpha[~torch.isnan(alpha)] <= 0).any()):
                continue
        out.append((S, m_f, alpha))
    return out


def near_stability_boundary(P: Any, delta: float) -> torch.Tensor:
    """``P`` with every diagonal entry set just above its row's largest other entry, ``(K, K)``.

    ``P[w, w] = (1 + delta) max_{j != w} P[w, j]``, rows renormalised: every vertex ``e_w`` is
    then a stable fixed point, but only barely — its slowest loser decays like
    :math:`t^{-\\alpha}`, :math:`\\alpha = 1 - 1/(1+\\delta)` (beyond the paper).
    """
    P = check_transition(P).clone()
    delta = check_float("delta", delta, minimum=0.0, open_lower=True)
    off = P.clone()
    off.fill_diagonal_(-1.0)
    largest = off.max(-1).values  # (K,)
    if bool((largest <= 0).any()):
        w = int((largest <= 0).nonzero()[0])
        raise ValueError(
            f"P's row {w} has no mass off the diagonal, so there is no largest other entry "
            "to set its diagonal just above"
        )
    P.diagonal().copy_(largest * (1 + delta))
    return P / P.sum(-1, keepdim=True)


def collapse_census(
    Ps: Any, length: int, *, n_traj: int, seed: int, tv: float = 0.1
) -> list[dict[str, Any]]:
    """Do trajectories of length ``length`` sit near a conjectured limit? (beyond the paper).

    For each chain of ``Ps`` (``(K, K)``, ``K <= 10``, ``K`` may differ), the limits are
    :func:`stable_fixed_points`; ``n_traj`` trajectories from the prompt ``[0, ..., K-1]``
    (all chains of one ``K`` in one batched program) are compared at the end with the nearest
    limit in total variation. Returns per chain a dict: ``K``, ``limits`` (supports),
    ``single`` (single-token limits), ``alpha_min`` (slowest conjectured loser exponent;
    ``nan`` if a limit has full support), ``near`` (share of trajectories within ``tv`` of a
    limit), ``majority`` (share whose top token exceeds 1/2) and ``final`` (``(n_traj, K)``
    final frequencies).
    """
    from .chain import sample_trajectories

    if isinstance(Ps, (str, bytes, torch.Tensor, np.ndarray)) or not isinstance(Ps, Sequence):
        raise TypeError(f"Ps must be a list of (K, K) chains; got {type(Ps).__name__}")
    chains = [check_transition(P, name=f"Ps[{i}]") for i, P in enumerate(Ps)]
    if not chains:
        raise ValueError("Ps must contain at least one chain")
    length = check_size("length", length)
    n_traj = check_size("n_traj", n_traj)
    K_max = max(P.shape[0] for P in chains)
    # memory is per trajectory (counts and transition counts, K + K^2), not per step:
    # the trajectories are simulated without keeping their tokens
    check_elements("len(Ps) * n_traj * K * K", len(chains) * n_traj * K_max * K_max)
    tv = check_float("tv", tv, minimum=0.0, maximum=1.0, open_lower=True)
    finals: dict[int, torch.Tensor] = {}
    for K in sorted({P.shape[0] for P in chains}):
        idx = [i for i, P in enumerate(chains) if P.shape[0] == K]
        batch = torch.stack([chains[i] for i in idx]).repeat_interleave(n_traj, 0)
        traj = sample_trajectories(batch, list(range(K)), length, seed=seed, keep_tokens=False)
        F = traj.frequencies[:, -1].reshape(len(idx), n_traj, K)
        finals.update({i: F[a] for a, i in enumerate(idx)})
    out = []
    for i, P in enumerate(chains):
        limits = stable_fixed_points(P)
        F = finals[i]
        if limits:
            M = torch.stack([m for _, m, _ in limits])  # (n_lim, K)
            dist = 0.5 * (F[:, None, :] - M[None]).abs().sum(-1).min(-1).values
            near = float((dist <= tv).double().mean())
            alphas = torch.cat([a[~torch.isnan(a)] for _, _, a in limits])
            full = any(len(S) == P.shape[0] for S, _, _ in limits)
            alpha_min = float("nan") if full or alphas.numel() == 0 else float(alphas.min())
        else:
            near, alpha_min = 0.0, float("nan")
        out.append(
            {
                "K": P.shape[0],
                "limits": [S for S, _, _ in limits],
                "single": sum(len(S) == 1 for S, _, _ in limits),
                "alpha_min": alpha_min,
                "near": near,
                "majority": float((F.max(-1).values > 0.5).double().mean()),
                "final": F,
            }
        )
    return out


def _stationary_batch(P: torch.Tensor, M: torch.Tensor) -> torch.Tensor:
    """:func:`stationary_of_reweighted` for a batch ``(F, K)`` of weights (no validation).

    Rows of tokens outside ``supp(m)`` are replaced by ``m`` itself, so those tokens get no
    mass and the stationary law is that of :math:`P^m` on the support.
    """
    F, K = M.shape
    Pm = P[None] * M[:, None, :]
    sums = Pm.sum(-1, keepdim=True)
    on = (M > 0)[..., None]
    w = M / M.sum(-1, keepdim=True)
    Pm = torch.where(on, Pm / sums.clamp(min=1e-300), w[:, None, :].expand(F, K, K))
    eye = torch.eye(K, dtype=torch.float64).expand(F, K, K)
    A = torch.cat([Pm.transpose(-1, -2) - eye, torch.ones(F, 1, K, dtype=torch.float64)], -2)
    b = torch.zeros(F, K + 1, 1, dtype=torch.float64)
    b[:, -1] = 1.0
    mu = torch.linalg.lstsq(A, b).solution.squeeze(-1).clamp(min=0) * (M > 0)
    return mu / mu.sum(-1, keepdim=True)


def interior_rates(P: Any, m: Any, *, h: float = 1e-6) -> np.ndarray:
    """Eigenvalues of the mean-field ODE :math:`\\dot m = \\mu(m) - m` linearised *within* the face.

    At a fixed point :math:`m^*` (``m``) with support ``S``, the Jacobian restricted to the
    directions that keep ``sum(m) = 1`` and stay in ``S``; since the ODE runs in the time
    :math:`\\log t`, a deviation along an eigenvector shrinks like
    :math:`t^{\\mathrm{Re}\\,\\lambda}`. The slowest sets how fast a trajectory settles
    *inside* its support, as :func:`predicted_decay_exponents` does for the tokens outside it
    (beyond the paper). Central differences of step ``h``; returns ``(|S| - 1,)`` complex
    eigenvalues by decreasing real part (empty for a vertex).
    """
    P = check_transition(P)
    m = check_prob_vector("m", m)
    if m.shape != (P.shape[0],):
        raise ValueError(f"m must have shape ({P.shape[0]},); got {tuple(m.shape)}")
    h = check_float("h", h, minimum=0.0, maximum=1e-2, open_lower=True)
    S = (m > 0).nonzero().flatten()
    n = len(S)
    if n == 1:
        return np.zeros(0, dtype=complex)
    m = m / m.sum()
    basis = torch.linalg.svd(torch.ones(1, n, dtype=torch.float64))[2][1:].T  # (n, n-1)

    def field(x: torch.Tensor) -> torch.Tensor:
        full = torch.zeros_like(m)
        full[S] = x
        return (_reweighted_stationary(P, full) - full)[S]

    cols = [
        (field(m[S] + h * basis[:, k]) - field(m[S] - h * basis[:, k])) / (2 * h)
        for k in range(n - 1)
    ]
    J = basis.T @ torch.stack(cols, 1)
    eig = np.linalg.eigvals(J.numpy())
    return eig[np.argsort(-eig.real)]


def predicted_decay_exponents(P: Any, m: Any, *, losers: Any = None) -> torch.Tensor:
    """Conjectured decay exponents of rare tokens, ``(K,)`` (beyond the paper).

    For a rare token ``j`` the chain spends its time on the other tokens, distributed as the
    stationary law :math:`\\mu` of :math:`P^{m_{-j}}` (``m`` without ``j``), and draws ``j``
    from state ``i`` with probability :math:`m_j P_{ij} / D_i`, :math:`D_i = \\sum_k m_k
    P_{ik}`. So ``j``'s count grows like :math:`t^{\\lambda_j}`, :math:`\\lambda_j = \\sum_i
    \\mu_i P_{ij} / D_i`, and its frequency decays like :math:`t^{-\\alpha_j}`,
    :math:`\\alpha_j = 1 - \\lambda_j`.

    At a fixed point :math:`m^*` with support ``S`` (``losers`` default: the tokens outside
    ``S``) this is :math:`\\lambda_j = \\sum_{i\\in S} m^*_i P_{ij} / \\sum_{k\\in S} m^*_k
    P_{ik}`; for a single winner ``w`` (pass ``m=w``), :math:`\\alpha_j = 1 - P_{wj}/P_{ww}`
    (for ``K = 2``, Lemma 5.3's ``q``). At measured frequencies it gives the *local* exponent.
    A negative :math:`\\alpha_j` means ``j`` grows: the point is unstable. ``nan`` for tokens
    not in ``losers``.
    """
    P = check_transition(P)
    K = P.shape[0]
    if isinstance(m, (int, np.integer)):
        w = check_int("m", m, minimum=0, maximum=K - 1)
        weights = torch.zeros(K, dtype=torch.float64)
        weights[w] = 1.0
    else:
        weights = _check_weights("m", m, K)
    weights = weights / weights.sum()
    if losers is None:
        losers = (weights == 0).nonzero().flatten().tolist()
    alpha = torch.full((K,), float("nan"), dtype=torch.float64)
    for j in losers:
        j = check_int("losers entry", int(j), minimum=0, maximum=K - 1)
        rest = weights.clone()
        rest[j] = 0.0
        if float(rest.sum()) <= 0:
            raise ValueError(f"m must put weight on tokens other than the loser {j}")
        rest = rest / rest.sum()
        mu = stationary_of_reweighted(P, rest)
        D = (P * rest[None, :]).sum(-1)  # (K,)
        on = mu > 0
        alpha[j] = 1.0 - float((mu[on] * P[on, j] / D[on]).sum())
        if not math.isfinite(float(alpha[j])):
            raise ValueError(
                f"the exponent of token {j} overflows: P has entries too close to 0 on the "
                "support of m (the rate P[i, j] / D_i is not representable)"
            )
    return alpha


def _fit_decay_exponents(times: Any, freqs: Any, *, t_min: float) -> torch.Tensor:
    """Slopes ``(K,)`` of :math:`\\mathbb E[\\log m_j]` against :math:`\\log t` from ``t_min`` on.

    ``times``: ``(C,)`` recorded lengths; ``freqs``: ``(R, C, K)`` (e.g.
    :attr:`ccmc_lite.ccmc.Trajectories.frequencies`, positive: every prompt token keeps its
    count). Averaging ``log m_j`` measures the *typical* decay exponent; averaging ``m_j``
    itself (as Lemma 5.3 does) weights the rare late collapses.
    """
    t = as_tensor("times", times, dtype=torch.float64, ndim=1)
    F = as_tensor("freqs", freqs, dtype=torch.float64, ndim=3)
    if F.shape[1] != t.shape[0]:
        raise ValueError(f"freqs must have {t.shape[0]} recorded times on axis 1; got {F.shape}")
    if bool((F <= 0).any()):
        raise ValueError("freqs must be strictly positive to take logarithms")
    t_min = check_float("t_min", t_min, minimum=0.0)
    window = t >= t_min
    if int(window.sum()) < 2:
        raise ValueError(f"need at least two recorded times >= t_min={t_min}")
    x = torch.log(t[window])
    y = torch.log(F[:, window, :]).mean(0)  # (C', K)
    xc = x - x.mean()
    if float((xc**2).sum()) <= 0:
        raise ValueError(
            "times must hold at least two distinct values >= t_min: a slope against "
            "log t needs a spread in t"
        )
    return (xc[:, None] * (y - y.mean(0))).sum(0) / (xc**2).sum()


def compare_decay_exponents(
    freqs: Any, times: Any, P: Any, m_fixed: Any, *, t_min: float
) -> list[tuple[int, float, float, float]]:
    """Measured versus conjectured decay exponents of the losers (beyond the paper).

    ``freqs``: ``(R, C, K)`` frequencies, at lengths ``times`` ``(C,)``, of trajectories that
    approach the winners' fixed point ``m_fixed`` (or ``w`` for a single winner) of the chain
    ``P``. Returns ``(j, measured, conjectured, local)`` per loser ``j``: the log-log slope of
    :math:`\\mathbb E\\log m_j` from ``t_min`` on, :math:`-\\alpha_j` at the fixed point, and
    :math:`-\\alpha_j` at the typical (geometric-mean) frequencies of that window.
    """
    F = as_tensor("freqs", freqs, dtype=torch.float64, ndim=3)
    t = as_tensor("times", times, dtype=torch.float64, ndim=1)
    alpha = predicted_decay_exponents(P, m_fixed)
    losers = [j for j in range(alpha.shape[0]) if not bool(torch.isnan(alpha[j]))]
    slopes = _fit_decay_exponents(t, F, t_min=t_min)
    window = t >= t_min
    m_now = torch.exp(torch.log(F[:, window]).mean((0, 1)))  # typical m in the window
    local = predicted_decay_exponents(P, m_now, losers=losers)
    return [(j, float(slopes[j]), -float(alpha[j]), -float(local[j])) for j in losers]


def plot_frequency_curves(
    ax: Axes,
    freqs: Any,
    *,
    start: int = 1,
    labels: Any = None,
    logx: bool = False,
) -> None:
    """Plot token frequencies :math:`m(X_t)` against ``t`` on ``ax`` (Fig. 4, middle panels).

    ``freqs``: ``(T, K)`` from :func:`running_frequencies` (one trajectory), its first row at
    ``t = start``; ``labels`` name the tokens (default ``0..K-1``); ``logx`` for a log time
    axis.
    """
    check_instance("ax", ax, Axes)
    from ..teaching.plotting import PALETTE

    F = as_tensor("freqs", freqs, dtype=torch.float64, ndim=2).numpy()
    T, K = F.shape
    labels = list(range(K)) if labels is None else list(labels)
    t = np.arange(start, start + T)
    for k in range(K):
        ax.plot(t, F[:, k], color=PALETTE[k % len(PALETTE)], label=f"token {labels[k]}")
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel("sequence length $t$")
    ax.set_ylabel("frequency $m(X_t)_k$")
    ax.set_ylim(0, 1)


def plot_snapshots(
    ax: Axes, tokens: Any, starts: Any, *, window: int = 10, K: int | None = None
) -> None:
    """Show ``window``-token snapshots of one trajectory ``tokens`` ``(T,)`` as coloured cells.

    One row per entry of ``starts`` (Fig. 4, right panels); ``K`` colours (default: the
    largest token + 1).
    """
    check_instance("ax", ax, Axes)
    from matplotlib.colors import ListedColormap

    from ..teaching.plotting import PALETTE

    X = as_tensor("tokens", tokens, dtype=torch.long, ndim=1).numpy()
    window = check_size("window", window, minimum=1)
    starts = [check_int("starts entry", int(s), minimum=0, maximum=len(X) - window) for s in starts]
    K = (
        int(X.max()) + 1
        if K is None
        else check_size("K", K, minimum=2, limit=DEFAULT_LIMITS["vocab"])
    )
    grid = np.stack([X[s : s + window] for s in starts])
    ax.imshow(grid, cmap=ListedColormap(PALETTE[:K]), vmin=-0.5, vmax=K - 0.5, aspect="auto")
    for r in range(grid.shape[0]):
        for c in range(window):
            ax.text(c, r, str(grid[r, c]), ha="center", va="center", color="white", fontsize=8)
    ax.set_yticks(range(len(starts)), [f"i={s}" for s in starts])
    ax.set_xticks([])
    ax.grid(False)
    ax.set_xlabel(f"{window}-token window starting at index $i$")


def _parse_matrix(text: str) -> np.ndarray:
    rows = [r for r in text.replace("\n", ";").split(";") if r.strip()]
    return np.array([[float(v) for v in r.replace(" ", ",").split(",") if v] for r in rows])


def explorer_chain(K: int, mode: str, *, seed: int, custom: str = "") -> torch.Tensor:
    """The base chain chosen in the explorer, ``(K, K)``.

    ``mode``: ``"random"`` (:func:`random_chain` from ``seed``), ``"zero-diagonal"``
    (:func:`zero_diagonal` of it) or ``"custom"`` (``custom`` holds the rows, e.g.
    ``"0.9,0.1; 0.5,0.5"``, renormalised).
    """
    mode = check_choice("mode", mode, ("random", "zero-diagonal", "custom"))
    if mode == "custom":
        try:
            M = _parse_matrix(custom)
        except ValueError:
            raise ValueError(
                f"custom must be rows of numbers like '0.9,0.1; 0.5,0.5'; got {custom!r}"
            ) from None
        if M.ndim != 2 or M.shape[0] != M.shape[1]:
            raise ValueError(f"custom must describe a square matrix; got shape {M.shape}")
        if np.any(M < 0) or np.any(M.sum(1) <= 0):
            raise ValueError("custom must have non-negative rows with a positive sum")
        return check_transition(M / M.sum(1, keepdims=True), name="custom")
    P = random_chain(K, seed=seed)
    return zero_diagonal(P) if mode == "zero-diagonal" else P


def draw_collapse(P: Any, prompt: Any, length: int, *, seed: int, window: int = 10) -> Any:
    """One trajectory of the CCMC ``P`` from ``prompt``: frequency curves and snapshots (Fig. 4).

    Returns the matplotlib figure: ``length`` generated tokens drawn from ``seed``, five
    ``window``-token snapshots.
    """
    import matplotlib.pyplot as plt

    from .chain import sample_trajectories

    P = check_transition(P)
    K = P.shape[0]
    length = check_size("length", length)
    window = check_size("window", window)
    if window > length:
        raise ValueError(
            f"length={length} is shorter than the snapshot window={window}: the snapshots "
            "show windows of generated tokens"
        )
    # the undecorated sampler: a figure's one short trajectory is not worth a result-cache
    # entry, and a chapter that sampled the same trajectory itself must not see a replay
    sample = getattr(sample_trajectories, "__wrapped__", sample_trajectories)
    traj = sample(P, prompt, length, seed=seed)
    if traj.tokens is None:  # keep_tokens defaults to True
        raise RuntimeError("sample_trajectories returned no tokens")
    tokens = traj.tokens[0]
    L0 = traj.prompt_length
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4), width_ratios=[1.6, 1])
    plot_frequency_curves(ax1, running_frequencies(tokens, K)[L0 - 1 :], start=L0)
    ax1.legend(ncol=2, fontsize=8)
    T = tokens.shape[0]
    starts = np.linspace(L0, T - window, 5).astype(int)
    plot_snapshots(ax2, tokens, starts, window=window, K=K)
    return fig


def collapse_explorer() -> Any:
    """An ``ipywidgets`` explorer: choose ``K``, ``P``, prompt and length; see the collapse."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    from IPython.display import display

    def show(K: int, mode: str, custom: str, prompt: str, length: int, seed: int) -> None:
        try:
            P = explorer_chain(K, mode, seed=seed, custom=custom)
            toks = [int(v) for v in prompt.replace(" ", ",").split(",") if v.strip()]
            fig = draw_collapse(P, toks, length, seed=seed)
        except (ValueError, TypeError) as err:
            print(f"cannot draw: {err}")
            return
        display(fig)
        plt.close(fig)

    return widgets.interactive(
        show,
        K=widgets.IntSlider(value=6, min=2, max=10, description="K"),
        mode=widgets.Dropdown(options=["random", "zero-diagonal", "custom"], value="random"),
        custom=widgets.Text(value="0.6,0.4; 0.4,0.6", description="custom P"),
        prompt=widgets.Text(value="0,1,2,3,4,5", description="prompt"),
        length=widgets.IntSlider(value=500, min=50, max=5000, step=50, description="length"),
        seed=widgets.IntSlider(value=0, min=0, max=50, description="seed"),
    )
