"""Checkers for the exercises of Part I (Ildiz et al. 2024, self-attention as a CCMC).

Every chapter of Part I ends with exercises; each is checked by one function here, a row
of the table run by :mod:`ccmc_lite.teaching.checking`: the learner's function is compared with
the **package's reference implementation** on inputs drawn from ``seed`` (random draws plus
edge cases: a prompt of length 1, a constant prompt, ``K = 2`` and ``K > 2``, a base chain
with zero entries, embeddings with ``d > K``, a query token that never occurs, ...).
Random inputs come from :func:`ccmc_lite.core.torch_generator` and
:func:`ccmc_lite.core.derive_seed`, never from the global random state.

=========================================  ========  ======================================
checker                                    chapter   reference
=========================================  ========  ======================================
:func:`check_ccmc_transition`              1         Def. 2.1, eqs. (1)–(3)
:func:`check_weights_from_transition`      1         Thm. 2.6 (the inverse map on S_E)
:func:`check_visible_parameters`           1         Def. 2.4, Lemma 2.5, Thm. 2.6
:func:`check_cooccurrence_components`      2         Def. 3.3, Thm. 3.4, Cor. 3.5
:func:`check_hessian_logits`               2         Lemma 3.7, App. C (Lemma C.8)
:func:`check_consistent_prompt_sets`       2         Thm. 3.4, Observation 1
:func:`check_return_visits`                3         Lemma 5.2 (App. E.1, Lemma E.2)
:func:`check_collapse_limits`              3         Lemma 5.3: the exact limit of t^q E[m_t]
:func:`check_decay_exponents`              4         Lemma 5.3 and the chapter's conjecture
:func:`check_stationary_of_reweighted`     4         eq. (1): the limit ODE of Sec. 5
=========================================  ========  ======================================
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.seeding import derive_seed, torch_generator
from ..teaching.checking import CheckResult, function_checker, value_checker
from .attention import random_embeddings, subspace_basis, weights_from_transition
from .chain import ccmc_distribution, prompt_data, random_prompts
from .collapse import (
    binary_collapse_chain,
    collapse_limit_constant,
    fixed_point,
    predicted_decay_exponents,
    random_chain,
    stationary_of_reweighted,
    zero_diagonal,
)
from .coverage import coverage_report
from .mle import hessian_logits

__all__ = [
    "check_ccmc_transition",
    "check_collapse_limits",
    "check_consistent_prompt_sets",
    "check_cooccurrence_components",
    "check_decay_exponents",
    "check_hessian_logits",
    "check_return_visits",
    "check_stationary_of_reweighted",
    "check_visible_parameters",
    "check_weights_from_transition",
]


def _matrix(rows: list[list[float]]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def _tokens(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long)


#: The base chain of the paper's Figures 1-2 in book rows (the notation page's example).
FIG1_P = [[0.2, 0.3, 0.5], [0.5, 0.1, 0.4], [0.1, 0.6, 0.3]]
#: A two-state chain that depends on the current state.
BINARY_P = [[0.7, 0.3], [0.4, 0.6]]


# ------------------------------------------------------------------ Chapter 1


def _ccmc_cases(seed: int) -> list[tuple[Any, ...]]:
    P = _matrix(FIG1_P)
    cases: list[tuple[Any, ...]] = [
        (P, _tokens([0, 1, 0])),  # the paper's Figure 1 example, X = [1, 2, 1]
        (P, _tokens([2])),  # a prompt of length 1: the only key is the query itself
        (P, _tokens([1, 1, 1, 1])),  # a constant prompt
        (P, _tokens([2, 1, 0, 0, 2])),  # every token occurs
        (zero_diagonal(P), _tokens([0, 1, 2, 0])),  # P[x_L, x_L] = 0 removes the query token
        (_matrix(BINARY_P), _tokens([1, 0])),  # K = 2
    ]
    gen = torch_generator(seed)
    for j, (K, L) in enumerate(((4, 6), (5, 12), (6, 3), (3, 20))):
        P_rand = random_chain(K, seed=derive_seed(seed, j), scale=1.5)
        cases.append((P_rand, torch.randint(0, K, (L,), generator=gen)))
    return cases


@function_checker(ccmc_distribution, _ccmc_cases, name="CCMC transition pi^X (Def. 2.1)")
def check_ccmc_transition(
    my_ccmc_transition: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "Implement the CCMC transition" (Part I, Chapter 1).

    ``my_ccmc_transition(P, X)`` takes a row-stochastic base chain ``P`` (a ``(K, K)``
    float64 tensor, ``P[i, j] = P(next = j | now = i)``) and one prompt ``X`` (a 1-D
    ``torch.long`` tensor of tokens in ``[0, K)``) and returns the ``(K,)`` next-token law
    :math:`\\pi^X_j = m_j P_{x_L j} / \\sum_k m_k P_{x_L k}` with :math:`m = m(X)` the
    token frequencies of the prompt: Ildiz et al. 2024, Def. 2.1, eqs. (1)–(3). The cases
    are the paper's Figure 1 example, a prompt of length 1, a constant prompt, a base chain
    with a zero diagonal, ``K = 2`` and random chains and prompts with ``K`` up to 6.
    Reference: :func:`ccmc_lite.ccmc.ccmc_distribution`.
    """


def _inverse_cases(seed: int) -> list[tuple[Any, ...]]:
    P = _matrix(FIG1_P)
    gen = torch_generator(seed)
    sharp = torch.softmax(8.0 * torch.randn(3, 3, generator=gen, dtype=torch.float64), -1)
    eye3 = torch.eye(3, dtype=torch.float64)
    return [
        (P, eye3),  # E = I: W is log P^T with its columns centred
        (_matrix(BINARY_P), torch.eye(2, dtype=torch.float64)),  # K = 2
        (torch.full((3, 3), 1 / 3, dtype=torch.float64), eye3),  # the uniform chain: W = 0
        (P, 2.0 * eye3),  # embeddings that are not orthonormal: E^T is not E^+
        (P, random_embeddings(3, 3, seed=derive_seed(seed, 0))),  # random E, d = K
        (random_chain(4, seed=derive_seed(seed, 1)), random_embeddings(4, 7, seed=seed)),
        (random_chain(2, seed=derive_seed(seed, 2)), random_embeddings(2, 5, seed=seed)),
        (sharp, random_embeddings(3, 4, seed=derive_seed(seed, 3))),  # tiny entries
    ]


@function_checker(
    weights_from_transition, _inverse_cases, name="inverse map P -> W in S_E (Thm. 2.6)"
)
def check_weights_from_transition(
    my_weights_from_transition: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "Invert the map W ↦ P^W on S_E" (Part I, Chapter 1).

    ``my_weights_from_transition(P, E)`` takes a ``(K, K)`` transition matrix ``P`` with
    positive entries and ``(K, d)`` embeddings ``E`` with independent rows (``d >= K``) and
    returns the unique ``(d, d)`` matrix ``W`` in :math:`\\mathcal S_E` (Def. 2.4) with
    :math:`P^W = P`, i.e. ``softmax_j(e_jᵀ W e_i) = P[i, j]`` (eq. (4)): Ildiz et al. 2024,
    Thm. 2.6 and its constructive proof. The cases include ``E = I``, ``E = 2I`` (not
    orthonormal), random ``E`` with ``d = K`` and ``d > K``, ``K = 2``, the uniform chain
    and a chain with entries near zero. Reference:
    :func:`ccmc_lite.ccmc.weights_from_transition`.
    """


# ------------------------------------------------------------------ Chapter 2


def _format_components(components: Any, *case: Any) -> list[str]:
    """Canonical text of per-query components: ``"{0, 2} | {1} | {3}"`` for each ``k``.

    Components are sorted internally and by their smallest token, so any order is accepted.
    """
    out = []
    for comps in components:
        canon = sorted(sorted(int(v) for v in comp) for comp in comps)
        out.append(" | ".join("{" + ", ".join(str(v) for v in c) + "}" for c in canon))
    return out


def _components_reference(prompts: list[list[int]], K: int, variant: str) -> list[Any]:
    return coverage_report(prompts, K, variant=variant).components


def _components_cases(seed: int) -> list[tuple[Any, ...]]:
    fig3 = [[1, 2, 0], [3, 0]]
    omega = random_prompts(4, 40, min_length=2, max_length=5, seed=derive_seed(seed, 0))
    gap = [x for x in omega if not (x[-1] == 1 and 3 in x)]
    fresh = [
        x
        for x in random_prompts(4, 60, min_length=3, max_length=6, seed=derive_seed(seed, 1))
        if x[-1] not in x[:-1]
    ]
    few = random_prompts(5, 6, min_length=1, max_length=4, seed=derive_seed(seed, 2))
    few_cross = random_prompts(5, 6, min_length=2, max_length=4, seed=derive_seed(seed, 3))
    return [
        (fig3, 4, "self"),  # the paper's Figure 3 in book tokens
        (fig3, 4, "cross"),
        ([[0]], 2, "self"),  # a prompt of length 1; query 1 never occurs
        ([[0, 1]], 2, "cross"),  # the query is not a key
        (omega, 4, "self"),  # covering: every graph connected
        (gap, 4, "self"),  # G^(1) loses token 3
        (fresh, 4, "cross"),  # query tokens never among the keys
        (fresh, 4, "self"),
        (few, 5, "self"),  # few prompts: many components
        (few_cross, 5, "cross"),
    ]


@function_checker(
    _components_reference,
    _components_cases,
    name="co-occurrence components (Def. 3.3)",
    compare_as=_format_components,
)
def check_cooccurrence_components(
    my_components: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "Which transitions does this prompt set identify?" (Part I, Ch. 2).

    ``my_components(prompts, K, variant)`` takes a list of prompts (lists of tokens in
    ``[0, K)``, possibly of different lengths), the vocabulary size and ``"self"`` or
    ``"cross"``, and returns a list with one entry per query token ``k = 0..K-1``: the
    connected components of the co-occurrence graph :math:`\\mathcal G^{(k)}` of Ildiz et
    al. 2024, Def. 3.3 (vertices: all ``K`` tokens; edge ``i — j`` iff some prompt ending
    in ``k`` has both ``i`` and ``j`` among its key tokens, which are all tokens for
    self-attention and all but the last for cross-attention), each component a set or list
    of tokens. Tokens that are never keys of a prompt ending in ``k`` are singleton
    components. The ratio ``P[k, i] / P[k, j]`` is identified iff ``i`` and ``j`` share a
    component (Thm. 3.4, Cor. 3.5). Components may come in any order; the message shows
    them as ``"{0, 2} | {1} | {3}"`` per query. Reference:
    :func:`ccmc_lite.ccmc.coverage_report` (its ``components``).
    """


def _hessian_reference(
    Theta: torch.Tensor, prompts: list[list[int]], weights: torch.Tensor
) -> torch.Tensor:
    K = Theta.shape[-1]
    data = prompt_data(prompts, [x[-1] for x in prompts], K, weights=weights)
    return hessian_logits(Theta, data)  # (K, K, K)


def _hessian_cases(seed: int) -> list[tuple[Any, ...]]:
    gen = torch_generator(seed)

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return scale * torch.randn(*shape, generator=gen, dtype=torch.float64)

    def w(*values: float) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.float64)

    cases: list[tuple[Any, ...]] = [
        (torch.zeros(3, 3, dtype=torch.float64), [[0, 1, 0]], w(1.0)),  # one prompt
        (randn(4, 4), [[1, 2, 0], [3, 0]], w(0.3, 0.7)),  # Figure 3's prompts
        (randn(3, 3), [[2, 2, 2]], w(1.0)),  # one distinct key: pi is one-hot, block 0
        (randn(3, 3), [[0, 1, 2], [1, 2], [2, 0, 0, 1]], w(2.0, 6.0, 2.0)),  # unnormalised
        (randn(3, 3), [[0, 1], [1, 2, 1]], w(1.0, 0.0)),  # a weight of zero
        (randn(3, 3, scale=30.0), [[0, 1, 2, 1], [2, 0]], w(0.5, 0.5)),  # large logits
        (randn(2, 2), [[0, 1], [1], [1, 0, 0]], w(0.2, 0.3, 0.5)),  # K = 2
    ]
    for j, K in enumerate((4, 5)):
        prompts = random_prompts(K, 12, min_length=1, max_length=6, seed=derive_seed(seed, j))
        weights = 0.1 + torch.rand(12, generator=gen, dtype=torch.float64)
        cases.append((randn(K, K), prompts, weights))
    return cases


@function_checker(
    _hessian_reference,
    _hessian_cases,
    name="Hessian in logit coordinates (Lemma 3.7)",
    atol=1e-8,
)
def check_hessian_logits(
    my_hessian_logits: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "The Hessian in logit coordinates" (Part I, Chapter 2).

    ``my_hessian_logits(Theta, prompts, weights)`` takes logits ``Theta`` (a ``(K, K)``
    float64 tensor, ``Θ[k, j] = e_jᵀ W e_k``), a list of ``n`` self-attention prompts
    (lists of tokens) and ``(n,)`` non-negative weights (not necessarily summing to one),
    and returns the ``(K, K, K)`` Hessian of the weighted mean loss
    :math:`\\sum_i w_i \\ell_i / \\sum_i w_i` in the logit coordinates, as one ``K x K``
    block per query token ``k``:
    :math:`H_k = \\sum_i \\tfrac{w_i}{\\sum w} [x^{(i)}_L = k]
    (\\operatorname{diag}(\\pi_i) - \\pi_i\\pi_i^\\top)` with
    :math:`\\pi_i = \\pi^{X_i}` the CCMC law of ``softmax(Θ)`` (Ildiz et al. 2024,
    Lemma 3.7 and App. C, Lemma C.8; the next tokens do not enter). The cases include a
    one-hot :math:`\\pi`, unnormalised and zero weights, logits of size 30, ``K = 2`` and
    random prompt sets in which some query tokens never occur. Reference:
    :func:`ccmc_lite.ccmc.hessian_logits`.
    """


# ------------------------------------------------------------------ Chapter 3


def _decay_reference(P: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    alpha = predicted_decay_exponents(P, m)  # (K,), nan on the support of m
    return torch.where(m > 0, torch.zeros_like(alpha), alpha)


def _vertex(K: int, w: int) -> torch.Tensor:
    e = torch.zeros(K, dtype=torch.float64)
    e[w] = 1.0
    return e


def _decay_cases(seed: int) -> list[tuple[Any, ...]]:
    with_zero = _matrix([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]])
    cases: list[tuple[Any, ...]] = [
        (binary_collapse_chain(0.2), _vertex(2, 0)),  # Lemma 5.3: alpha_weak = q
        (binary_collapse_chain(0.45), _vertex(2, 0)),
        (binary_collapse_chain(0.3), _vertex(2, 1)),  # the weak token on top: it loses
        (_matrix(BINARY_P), _vertex(2, 1)),
        (_matrix(FIG1_P), _vertex(3, 1)),  # token 1 is not self-reinforcing
        (with_zero, _vertex(3, 0)),  # P[w, j] = 0: alpha_j = 1
        (with_zero, 3.0 * _vertex(3, 2)),  # unnormalised weights
        # zero diagonal: P^m on {0, 1} alternates, so m = (1/2, 1/2, 0) is a fixed point
        (zero_diagonal(_matrix(FIG1_P)), torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)),
    ]
    for j, K in enumerate((4, 6)):
        P = random_chain(K, seed=derive_seed(seed, j), scale=1.5)
        w = int(torch.diagonal(P).argmax())
        cases.append((P, _vertex(K, w)))
        cases.append((P, _vertex(K, (w + 1) % K)))
        # a fixed point with three tokens of the zero-diagonal chain (m* = mu(m*))
        start = torch.zeros(K, dtype=torch.float64)
        start[:3] = 1.0
        Z = zero_diagonal(P)
        m_star = _converged_fixed_point(Z, start)
        if m_star is not None:  # the exercise's formula needs m* = mu(m*) exactly
            cases.append((Z, m_star))
    return cases


def _converged_fixed_point(P: torch.Tensor, start: torch.Tensor) -> torch.Tensor | None:
    """A fixed point ``m* = mu(m*)`` reached from ``start`` to 1e-13, or ``None``.

    The mean-field flow first lets dying tokens fade; they are then set to exactly 0 and the
    map ``m -> mu(m)`` is iterated on the remaining support until it stops moving.
    """
    m = fixed_point(P, start, steps=400, dt=0.5)
    m = torch.where(m > 1e-6, m, 0.0)  # tokens on their way out: exactly 0
    m = m / m.sum()
    for _ in range(2000):
        nxt = stationary_of_reweighted(P, m)
        if float((nxt - m).abs().max()) < 1e-13:
            return nxt
        m = 0.5 * (m + nxt)
    return None


def _visible_parameters() -> list[int]:
    K, d = 5, 8
    dim_S_E = int(subspace_basis(random_embeddings(K, d, seed=0)).shape[0])
    return [d * d, dim_S_E, K * (K - 1)]


@value_checker(
    _visible_parameters,
    name="parameters of W, of S_E and of a chain (K = 5, d = 8)",
    entries=lambda: [
        ("entries of W", 0),
        ("dimension of S_E", 1),
        ("free parameters of a chain on 5 tokens", 2),
    ],
)
def check_visible_parameters(my_counts: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Check the exercise "How many numbers does the layer really have?" (Part I, Chapter 1).

    ``my_counts`` is the learner's list of three integers for ``K = 5`` tokens embedded in
    ``d = 8`` dimensions with linearly independent embeddings: the number of entries of the
    attention matrix ``W``, the dimension of the subspace ``S_E`` the predictions depend on
    (Ildiz et al. 2024, Def. 2.4 and Lemma 2.5), and the number of free parameters of a
    ``K x K`` transition matrix with positive entries — equal to the second, which is what
    makes Thm. 2.6 a bijection. Reference: :func:`ccmc_lite.ccmc.subspace_basis`.
    """


#: The prompt sets of the exercise "Which prompt sets are enough?" (K = 3), and the variant.
PROMPT_SETS: tuple[tuple[list[list[int]], str], ...] = (
    ([[0, 1, 2], [1, 2, 0], [2, 0, 1]], "self"),
    ([[0, 1], [1, 0], [2, 2]], "self"),
    ([[1, 0], [2, 0], [0, 1], [2, 1], [0, 2], [1, 2]], "self"),
    ([[1, 0], [2, 0], [0, 1], [2, 1], [0, 2], [1, 2]], "cross"),
)


def _consistent_prompt_sets() -> list[bool]:
    return [bool(coverage_report(p, 3, variant=v).consistent) for p, v in PROMPT_SETS]


@value_checker(
    _consistent_prompt_sets,
    name="which prompt sets identify the layer (K = 3)",
    entries=lambda: [(f"prompt set {'ABCD'[i]}", i) for i in range(len(PROMPT_SETS))],
)
def check_consistent_prompt_sets(
    my_answers: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "Which prompt sets are enough?" (Part I, Chapter 2).

    ``my_answers`` is the learner's list of four booleans: whether maximum likelihood on
    the prompt sets A–D of ``PROMPT_SETS`` (``K = 3``; A–C read by self-attention, D
    is C read by cross-attention) recovers every attention layer, i.e. whether every
    co-occurrence graph is connected (Ildiz et al. 2024, Thm. 3.4 and Observation 1).
    Reference: :func:`ccmc_lite.ccmc.coverage_report`.
    """


def _return_visits() -> torch.Tensor:
    return _matrix(FIG1_P).min(0).values * torch.log(torch.tensor(10.0, dtype=torch.float64))


@value_checker(
    _return_visits,
    name="visits per decade, Lemma 5.2's lower bound",
    entries=lambda: [(f"token {k}", k) for k in range(3)],
)
def check_return_visits(my_visits: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    r"""Check the exercise "How often does a loser come back?" (Part I, Chapter 3).

    ``my_visits[k]`` is the learner's lower bound on the expected number of times token
    ``k`` appears between lengths ``t`` and ``10 t`` (large ``t``) when the CCMC of the
    paper's Fig. 1 chain (Part I, Chapter 1) writes its own text: the proof of Ildiz et al.
    2024, Lemma 5.2 (App. E.1) bounds the chance of ``k`` at length ``t`` below by
    :math:`\bar\pi_k/t` with :math:`\bar\pi_k = \min_i P_{ik}`, so the bound is
    :math:`\bar\pi_k \ln 10`. Each entry must be right to ``1e-6``.
    """


#: The prompts of the exercise "Which prompts keep the bound?": (length, weak tokens) at p = 0.3.
COLLAPSE_PROMPTS = ((2, 1), (3, 1), (4, 1), (4, 2))


def _collapse_limits() -> list[float]:
    return [
        float(collapse_limit_constant(0.3, prompt_length=L, prompt_weak=S))
        for L, S in COLLAPSE_PROMPTS
    ]


@value_checker(
    _collapse_limits,
    name="limits of t^q E[m_t] at p = 0.3",
    entries=lambda: [
        (f"prompt of length {L} with {S} weak token(s)", i)
        for i, (L, S) in enumerate(COLLAPSE_PROMPTS)
    ],
)
def check_collapse_limits(my_limits: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    r"""Check the exercise "Which prompts keep the bound?" (Part I, Chapter 3).

    ``my_limits`` is the learner's list of the four limits of
    :math:`t^q\,\mathbb E[m(X_t)_{\text{weak}}]` at ``p = 0.3`` for the prompts
    ``[0, 1]``, ``[0, 0, 1]``, ``[0, 0, 0, 1]`` and ``[0, 0, 1, 1]`` (token 1 is the weak
    one), worked out from the chapter's formula
    :math:`S_0\,\Gamma(N_0 - \bar p)/\Gamma(N_0)` with :math:`\bar p = p/(1-p)`
    (beyond Ildiz et al. 2024, Lemma 5.3). Each must be right to ``1e-6``. Reference:
    :func:`ccmc_lite.ccmc.collapse_limit_constant`.
    """


@function_checker(_decay_reference, _decay_cases, name="decay exponents of the losers (Lemma 5.3)")
def check_decay_exponents(
    my_decay_exponents: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "Predict how fast the losers fade" (Part I, Chapter 4).

    ``my_decay_exponents(P, m)`` takes a row-stochastic ``(K, K)`` base chain and a fixed
    point ``m`` of :math:`m = \\mu(m)` (``(K,)`` non-negative weights, not necessarily
    normalised, with support ``S``: a vertex ``e_w`` or a set of winners) and returns the
    ``(K,)`` exponents with which the losers' frequencies decay,
    :math:`m(X_t)_j \\sim t^{-\\alpha_j}`:
    :math:`\\alpha_j = 1 - \\sum_{i\\in S} m_i P_{ij} / D_i` with
    :math:`D_i = \\sum_{k\\in S} m_k P_{ik}` for ``j`` outside ``S``, and ``0`` on ``S``.
    For a single winner ``w`` this is :math:`1 - P_{wj}/P_{ww}`; for ``K = 2`` with both
    rows ``(1 - p, p)`` and ``w = 0`` it is the exponent :math:`q = (1-2p)/(1-p)` of
    Ildiz et al. 2024, Lemma 5.3. For ``K >= 3`` it is the chapter's conjecture (beyond the
    paper); a negative value means that ``j`` grows (the fixed point is unstable). The
    cases include both sides of Lemma 5.3, a non-self-reinforcing vertex, a zero entry
    ``P[w, j] = 0``, unnormalised weights and fixed points with two and three winners of
    zero-diagonal chains. Reference: :func:`ccmc_lite.ccmc.predicted_decay_exponents`
    (with the entries on ``S`` set to 0).
    """


def _stationary_cases(seed: int) -> list[tuple[Any, ...]]:
    P = _matrix(FIG1_P)
    gen = torch_generator(seed)

    def m(*values: float) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.float64)

    cases: list[tuple[Any, ...]] = [
        (binary_collapse_chain(0.3), m(0.5, 0.5)),  # rows (1-p, p): mu is m-weighted row
        (P, m(1 / 3, 1 / 3, 1 / 3)),  # uniform weights: the stationary law of P itself
        (P, m(2.0, 1.0, 0.0)),  # unnormalised, with a token outside the support
        (P, m(0.0, 0.0, 1.0)),  # a vertex e_w: mu = e_w
        (zero_diagonal(P), m(0.2, 0.3, 0.5)),
        (zero_diagonal(P), m(0.5, 0.5, 0.0)),  # a periodic re-weighted chain 0 <-> 1
        (_matrix([[0.999, 0.001], [0.001, 0.999]]), m(0.25, 0.75)),  # slow mixing
    ]
    for j, K in enumerate((4, 6)):
        weights = torch.rand(K, generator=gen, dtype=torch.float64)
        weights[torch.randperm(K, generator=gen)[: K // 3]] = 0.0
        chain = random_chain(K, seed=derive_seed(seed, j), scale=1.5)
        cases.append((chain, weights))
        cases.append((zero_diagonal(chain), weights))
    return cases


@function_checker(
    stationary_of_reweighted,
    _stationary_cases,
    name="stationary law mu(m) of P^m (eq. (1))",
    atol=1e-8,
)
def check_stationary_of_reweighted(
    my_stationary_of_reweighted: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "The limiting frequencies μ(m)" (Part I, Chapter 4).

    ``my_stationary_of_reweighted(P, m)`` takes a row-stochastic ``(K, K)`` base chain and
    ``(K,)`` non-negative weights ``m`` (not all zero, not necessarily summing to one) and
    returns the ``(K,)`` stationary law :math:`\\mu(m)` of the re-weighted chain
    :math:`P^m_{ij} = m_j P_{ij} / \\sum_k m_k P_{ik}` of Ildiz et al. 2024, eq. (1),
    restricted to the support :math:`\\{j : m_j > 0\\}` (zero outside it). Its fixed points
    :math:`m = \\mu(m)` are the limits of a single trajectory's frequencies in the chapter
    (beyond the paper). The cases include a vertex ``e_w``, a zero diagonal, a periodic and
    a slowly mixing re-weighted chain (where powers of :math:`P^m` converge slowly or not
    at all) and random chains. Reference: :func:`ccmc_lite.ccmc.stationary_of_reweighted`.
    """
