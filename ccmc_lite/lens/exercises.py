"""Checkers for the exercises of the closing chapter ("One lens on three papers").

The closing chapter reads all three papers as next-token prediction through a coarse
statistic ``s(c)`` of the context (:mod:`ccmc_lite.lens`). Each exercise is checked by one
function here, a row of the table run by :mod:`ccmc_lite.teaching.checking`: the learner's
function is compared with the **package's reference implementation** on inputs drawn from
``seed`` (random joint laws and chains plus edge cases: a single context, zero
probabilities, a statistic value that never occurs, the full context, ``n = 1``, a periodic
chain).

========================================  =======================================================
checker                                   reference
========================================  =======================================================
:func:`check_coarse_predictor`            :func:`ccmc_lite.lens.coarse_predictor` (Varre et al.
                                          2025, Prop. 3.2; Makkuva et al. 2024, eq. (11))
:func:`check_coarse_gap`                  :func:`ccmc_lite.lens.coarse_gap` (Makkuva et al.
                                          2024, Remark 2)
:func:`check_ngram_levels`                :func:`ccmc_lite.lens.ngram_levels` (Varre et al.
                                          2025, App. H, Lemma H.6)
:func:`check_statistic_ranking`           :func:`ccmc_lite.lens.coarse_gap` on the Part II
                                          chain's three-token law (Makkuva et al. 2024)
========================================  =======================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..core.chains import stationary_distribution
from ..core.seeding import derive_seed, numpy_rng
from ..markov.kernels import binary_kernel
from ..ngram.data import NGramTask, sample_transitions
from ..teaching.checking import CheckResult, function_checker, value_checker
from .coarse import coarse_gap, coarse_predictor, ngram_levels

__all__ = [
    "check_coarse_gap",
    "check_coarse_predictor",
    "check_ngram_levels",
    "check_statistic_ranking",
]


def _long(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long)


def _binary_chain_joint(p: float, q: float) -> torch.Tensor:
    """Law of ``(x_n, x_{n+1})`` for the stationary binary chain ``P(p, q)`` (Part II)."""
    P = binary_kernel(p, q)
    return stationary_distribution(P)[:, None] * P


def _joint_cases(seed: int) -> list[tuple[Any, ...]]:
    """``(joint, groups)`` pairs: the Part II example, edge cases, then random laws."""
    chain = _binary_chain_joint(0.5, 0.8)
    cases: list[tuple[Any, ...]] = [
        (chain, _long([0, 0])),  # the unigram point: the statistic forgets x_n
        (chain, _long([0, 1])),  # the full context: nothing is lost
        (torch.tensor([[0.25, 0.75]], dtype=torch.float64), _long([0])),  # a single context
        (  # deterministic next tokens (zero probabilities, 0 log 0 = 0)
            torch.tensor([[0.5, 0.0, 0.0], [0.0, 0.3, 0.0], [0.0, 0.0, 0.2]], dtype=torch.float64),
            _long([0, 0, 1]),
        ),
        (  # a context of probability zero, alone in its group: any prediction is stationary
            torch.tensor([[0.4, 0.1], [0.0, 0.0], [0.2, 0.3]], dtype=torch.float64),
            _long([0, 1, 0]),
        ),
        (  # statistic ids with a gap: value 1 never occurs
            torch.tensor([[0.1, 0.2], [0.3, 0.1], [0.2, 0.1]], dtype=torch.float64),
            _long([0, 2, 2]),
        ),
    ]
    rng = numpy_rng(seed)
    for j, (N, S, G) in enumerate(((4, 2, 2), (6, 3, 3), (8, 4, 2), (5, 5, 5))):
        sub = numpy_rng(derive_seed(seed, j))
        J = sub.dirichlet(np.full(N * S, 0.7)).reshape(N, S)
        groups = rng.integers(0, G, size=N)
        cases.append((torch.tensor(J, dtype=torch.float64), torch.tensor(groups)))
    return cases


@function_checker(coarse_predictor, _joint_cases, name="best coarse predictor P(y | s(c))")
def check_coarse_predictor(
    my_coarse_predictor: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "The best model that sees only s(c)" (closing chapter).

    ``my_coarse_predictor(joint, groups)`` takes a joint law ``joint`` of (context, next
    token), a float64 tensor of shape ``(N, S)`` that sums to one, and the statistic
    ``groups`` (a ``torch.long`` tensor of shape ``(N,)``, ``groups[c] = s(c)``), and
    returns the ``(N, S)`` matrix whose row ``c`` is ``P(y | s(c))``: the prediction at
    which a model whose logits depend on ``c`` only through ``s(c)`` is stationary
    (Varre et al. 2025, Prop. 3.2; the unigram point ``θ_π`` of Makkuva et al. 2024,
    eq. (11)). A statistic value of probability zero gets the uniform law. Reference:
    :func:`ccmc_lite.lens.coarse_predictor`.
    """


@function_checker(coarse_gap, _joint_cases, name="coarse gap I(y; c | s)", atol=1e-8)
def check_coarse_gap(my_coarse_gap: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Check the exercise "The price of a coarse statistic" (closing chapter).

    ``my_coarse_gap(joint, groups)`` takes the same inputs as in
    :func:`check_coarse_predictor` and returns a number: the conditional mutual
    information ``I(y; c | s) = H(y | s) - H(y | c)`` in nats, the excess loss of the
    best model that sees only ``s(c)`` (for the binary chain and ``s`` constant, the
    gap ``I(x_n; x_{n+1})`` of Makkuva et al. 2024, Remark 2). Terms with probability
    zero contribute zero. Reference: :func:`ccmc_lite.lens.coarse_gap`.
    """


def _cycle_chain(S: int, n: int) -> torch.Tensor:
    """A deterministic, periodic chain: the next token is ``(last + 1) mod S``."""
    P = torch.zeros((S,) * n, dtype=torch.float64)
    flat = P.reshape(-1, S)
    for code in range(S ** (n - 1)):
        flat[code, (code % S + 1) % S] = 1.0
    return P


def _levels_cases(seed: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [
        (binary_kernel(0.5, 0.8),),  # n = 2: levels (H(pi), entropy rate)
        (torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64),),  # n = 1: i.i.d. tokens
        (torch.tensor([[0.7, 0.3], [0.7, 0.3]], dtype=torch.float64),),  # rows equal: flat
        (_cycle_chain(3, 2),),  # deterministic and periodic: (log 3, 0)
        (_cycle_chain(2, 3),),  # a trigram that only looks at the last token
    ]
    for j, (S, n) in enumerate(((3, 3), (2, 3), (2, 4), (5, 3), (4, 2))):
        task = NGramTask(S=S, n=n, T=n, alpha=0.5)
        cases.append((sample_transitions(task, (), seed=derive_seed(seed, j)).double(),))
    return cases


def _levels_reference(P: torch.Tensor) -> torch.Tensor:
    return ngram_levels(P, int(P.shape[-1]), P.ndim)


@function_checker(
    _levels_reference, _levels_cases, name="n-gram levels (App. H, Lemma H.6)", atol=1e-8
)
def check_ngram_levels(my_ngram_levels: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Check the exercise "The staircase of levels" (closing chapter).

    ``my_ngram_levels(P)`` takes one n-gram transition tensor ``P`` (float64, shape
    ``(S, ..., S)`` with ``n = P.ndim`` axes, the last one the next token) and returns
    the ``(n,)`` tensor of levels ``H(x_{t+1} | last k-1 tokens)``, ``k = 1..n``, under
    the stationary law of the chain: the large-``T`` losses of the ``k``-gram estimators
    (Varre et al. 2025, App. H, Lemma H.6), the heights of the plateaus of Part III.
    Reference: :func:`ccmc_lite.lens.ngram_levels`.
    """


#: The statistics of the exercise "Which statistic costs most?": names and, for each
#: context ``(x_{n-1}, x_n)`` numbered ``2 x_{n-1} + x_n``, the value of the statistic.
STATISTICS: tuple[tuple[str, tuple[int, int, int, int]], ...] = (
    ("nothing (the unigram point)", (0, 0, 0, 0)),
    ("the token before last, x_{n-1}", (0, 0, 1, 1)),
    ("the last token, x_n", (0, 1, 0, 1)),
)


def _statistic_ranking() -> list[int]:
    """Rank (0 = smallest gap) of each statistic's ``I(y; c | s)`` on the Part II chain."""
    P = binary_kernel(0.5, 0.8)
    pair = stationary_distribution(P)[:, None] * P  # (x_{n-1}, x_n)
    joint = (pair.reshape(4, 1) * P.repeat(2, 1)).reshape(4, 2)  # (context, y)
    gaps = [float(coarse_gap(joint, _long(list(values)))) for _, values in STATISTICS]
    order = np.argsort(gaps, kind="stable")
    ranks = np.empty(len(gaps), dtype=int)
    ranks[order] = np.arange(len(gaps))
    return ranks.tolist()


@value_checker(
    _statistic_ranking,
    name="ranking of the three statistics by what they cost",
    entries=lambda: [(name, i) for i, (name, _) in enumerate(STATISTICS)],
)
def check_statistic_ranking(my_ranking: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Check the exercise "Which statistic costs most?" (closing chapter).

    ``my_ranking`` is the learner's list of three integers, one per statistic of
    ``STATISTICS`` (nothing, ``x_{n-1}``, ``x_n``), ranking the excess loss
    ``I(y; c | s)`` of the best predictor that sees only that statistic, for the next
    token of the stationary binary chain ``P(0.5, 0.8)`` of Part II given the context
    ``c = (x_{n-1}, x_n)``: 0 for the smallest, 2 for the largest. Reference:
    :func:`ccmc_lite.lens.coarse_gap` on the exact law of ``(x_{n-1}, x_n, x_{n+1})``.
    """
