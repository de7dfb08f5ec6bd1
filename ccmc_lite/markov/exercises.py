"""Checkers for the exercises of Part II: the single-layer Markov landscape (Makkuva et al. 2024).

Every chapter of Part II ends with exercises; each is checked by one function here, a row
of the table run by :mod:`ccmc_lite.teaching.checking`: the learner's function (or value) is
compared with the reference in :mod:`ccmc_lite.markov` on random and edge-case inputs drawn
from ``seed``. Models are built inside :func:`torch.random.fork_rng` from their own seeds, so
checkers never touch the global random state.

Checkers, by chapter of Part II:

1. :func:`check_stationary` (the stationary law), :func:`check_entropy_rate`;
2. :func:`check_bigram_construction` (Thm. 1, eq. (7)), :func:`check_tied_hessian`
   (eq. (12)), :func:`check_untied_min_eigenvalue` (Thm. 3);
3. :func:`check_attention_ratio` (Sec. 3.1), :func:`check_appendix_d_logits` (App. D,
   eq. (26));
4. :func:`check_theta_pi` (eq. (11) at any depth), :func:`check_unigram_gap` (Remark 2);
5. :func:`check_trap_curvature` (the switching term of eq. (12)),
   :func:`check_phase_prediction` (Fig. 4), :func:`check_where_runs_stop` (Thms. 2–3);
6. :func:`check_lag_one_covariance`, :func:`check_unigram_curvature`,
   :func:`check_cyclic_threshold` (the ``K``-state criterion of "Beyond two states").
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from ..core.chains import entropy_rate, stationary_distribution, unigram_entropy
from ..core.seeding import derive_seed, torch_generator
from ..core.validation import as_tensor, check_float
from ..teaching.checking import Case, CheckResult, function_checker, value_checker
from .kernels import (
    binary_kernel,
    lag_one_covariance,
    random_kernel,
    sample_chains,
    symmetric_kernel,
)
from .landscape import (
    appendix_d_logits,
    binary_unigram_hessian,
    population_hessian,
    population_loss,
    theta_pi,
    theta_star,
    unigram_curvature,
)
from .model import MarkovTransformer
from .runs import attention_ratio, unigram_gap

__all__ = [
    "check_appendix_d_logits",
    "check_attention_ratio",
    "check_bigram_construction",
    "check_cyclic_threshold",
    "check_entropy_rate",
    "check_lag_one_covariance",
    "check_phase_prediction",
    "check_stationary",
    "check_theta_pi",
    "check_tied_hessian",
    "check_trap_curvature",
    "check_unigram_curvature",
    "check_unigram_gap",
    "check_untied_min_eigenvalue",
    "check_where_runs_stop",
]

_SEED = 2024  # a checker's random inputs come from derive_seed(_SEED ^ seed, its own key)


def _seed(seed: int, key: int) -> int:
    return derive_seed(_SEED ^ seed, key)


@contextlib.contextmanager
def _single_thread() -> Iterator[None]:
    """Run tiny models on one thread (much faster than two on a shared CPU); restore after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _cycle(K: int) -> torch.Tensor:
    """The deterministic cycle ``k -> k+1 mod K`` (periodic, zero entropy rate)."""
    return torch.roll(torch.eye(K, dtype=torch.float64), 1, dims=1)


def _kernel_cases(key: int) -> Callable[[int], list[tuple[torch.Tensor]]]:
    """Kernels every kernel exercise is checked on: K = 2 and K > 2, random, edge cases."""

    def cases(seed: int) -> list[tuple[torch.Tensor]]:
        seed = _seed(seed, key)
        mixed = 0.9 * _cycle(3) + 0.1 * random_kernel(3, seed=derive_seed(seed, 2))
        return [
            (binary_kernel(0.5, 0.8),),  # the paper's Fig. 3 setting
            (binary_kernel(0.2, 0.3),),
            (binary_kernel(1e-6, 0.5),),  # a tiny switching probability
            (binary_kernel(1e-4, 3e-4),),  # both tiny: slow mixing (P^n converges slowly)
            (torch.tensor([[0.0, 1.0], [0.5, 0.5]], dtype=torch.float64),),  # a zero entry
            (symmetric_kernel(5, 0.7),),  # K = 5, uniform stationary law
            (random_kernel(4, seed=derive_seed(seed, 1)),),  # K = 4, random
            (mixed,),  # K = 3, non-reversible
            (_cycle(3),),  # periodic: powers of P never converge
        ]

    return cases


def _model(
    seed: int, *, K: int = 2, d: int = 2, N: int = 3, depth: int = 1, tied: bool = True
) -> MarkovTransformer:
    """A float64 model, every parameter drawn from ``seed`` (the global RNG untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = MarkovTransformer(K=K, d=d, N=N, depth=depth, tied=tied, init_std=0.5).double()
        with torch.no_grad():
            model.pos.normal_()  # positional embeddings of unit scale
    return model


def _shown(model: MarkovTransformer, kernel: str) -> str:
    """A model case as failure messages show it."""
    m = model
    return (
        f"MarkovTransformer(K={m.K}, d={m.d}, N={m.N}, depth={m.depth}, tied={m.tied}) on {kernel}"
    )


# ----------------------------------------------------------------- chapter 1: the data


@function_checker(stationary_distribution, _kernel_cases(1), name="stationary law")
def check_stationary(my_stationary: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Exercise ``p2c1-ex-stationary``: the stationary law (Makkuva et al. 2024, Sec. 2.2).

    ``my_stationary(P)`` must return the stationary law ``π`` (shape ``(K,)``, ``π P = π``,
    entries summing to one) of a row-stochastic kernel ``P`` (a float64 tensor
    ``(K, K)``). For ``P(p, q)`` it is ``(q, p) / (p + q)``. Compared with
    :func:`ccmc_lite.core.stationary_distribution` on ``P(p, q)`` (including a tiny
    ``p`` and a slowly mixing chain), a kernel with a zero entry, ``K = 3, 4, 5`` kernels,
    a non-reversible one and the periodic 3-cycle (where iterating ``P`` does not converge).
    """


@function_checker(
    lambda P: float(entropy_rate(P)), _kernel_cases(2), name="entropy rate", atol=1e-8
)
def check_entropy_rate(my_entropy_rate: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Exercise ``p2c1-ex-entropy-rate``: the entropy rate (Makkuva et al. 2024, Sec. 2.2).

    ``my_entropy_rate(P)`` must return ``H(x_{n+1} | x_n) = Σ_i π_i H(P_i·)`` in nats (a
    number), with the convention ``0 log 0 = 0``; for ``P(p, q)`` this is
    ``(q h(p) + p h(q)) / (p + q)``. Compared with :func:`ccmc_lite.core.entropy_rate`
    on the kernels of :func:`check_stationary` (zero entries and the deterministic
    3-cycle, whose entropy rate is 0, included).
    """


# ------------------------------------------------------- chapter 2: minima and the trap


def _bigram_summary(out: Any, p: float, q: float, d: int) -> np.ndarray:
    """``(|e|², b)`` of a pair ``(e, b)``: what the prediction depends on."""
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ValueError(f"return a pair (e, b); got {type(out).__name__}")
    e = np.asarray(torch.as_tensor(out[0], dtype=torch.float64).detach(), dtype=float)
    if e.shape != (d,):
        raise ValueError(f"e must have shape ({d},); got {e.shape}")
    return np.array([float(e @ e), float(np.asarray(out[1], dtype=float))])


def _bigram_reference(p: float, q: float, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    star = theta_star(_model(0, d=d, N=1), p, q)
    return star.e.detach(), star.b.detach()


@function_checker(
    _bigram_reference,
    [(0.2, 0.3, 4), (0.5, 0.5, 3), (0.3, 0.7, 2), (1e-4, 0.5, 4), (0.05, 0.9, 1)],
    name="bigram construction (|e|^2, b)",
    compare_as=_bigram_summary,
    atol=1e-8,
)
def check_bigram_construction(
    my_bigram_construction: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Exercise ``p2c2-ex-bigram``: the global minimum of Makkuva et al. (2024), eq. (7).

    ``my_bigram_construction(p, q, d)`` (``p + q <= 1``) must return ``(e, b)``: the tied
    embedding ``e`` (shape ``(d,)``) and the bias ``b`` such that the attention-free model
    with ``p_n = 0`` predicts ``σ(x_n |e|² + b) = P(x_{n+1} = 1 | x_n)``. The prediction
    depends on ``e`` only through ``|e|²``, so ``(|e|², b)`` is compared with that of
    :func:`ccmc_lite.markov.theta_star`, for ``d = 1`` and ``d > 1``, on the line
    ``p + q = 1`` (where ``e = 0``), with a tiny ``p`` and with very unequal ``p, q``.
    """


def _hessian_cases(seed: int) -> list[tuple[float, float, torch.Tensor]]:
    gen = torch_generator(_seed(seed, 4))

    def pos(N: int, d: int, scale: float = 1.0) -> torch.Tensor:
        return scale * torch.randn(N, d, generator=gen, dtype=torch.float64)

    return [
        (0.5, 0.8, pos(8, 3)),
        (0.2, 0.3, pos(8, 3)),
        (0.5, 0.8, pos(64, 4, 0.02)),  # the paper's initial scale
        (0.9, 0.6, pos(1, 2)),  # a single position: the covariance of p_n vanishes
        (0.3, 0.7, pos(5, 1)),  # p + q = 1, d = 1
        (1e-3, 0.9, pos(6, 2)),  # tiny p
    ]


@function_checker(
    binary_unigram_hessian, _hessian_cases, name="tied Hessian H_alpha (eq. (12))", atol=1e-9
)
def check_tied_hessian(my_tied_hessian: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Exercise ``p2c2-ex-hessian``: derive ``H_α`` (Makkuva et al. 2024, eq. (12)).

    ``my_tied_hessian(p, q, pos)`` must return the tied Hessian at ``θ_π`` in the
    coordinates ``α = (b, e)``: ``π0 π1 [[1, uᵀ], [u, V]]`` with ``u = Σ p_n / N`` and
    ``V = Σ p_n p_nᵀ / N + 2 (p + q - 1) I``, shape ``(1 + d, 1 + d)``, where ``pos`` is
    the ``(N, d)`` float64 tensor of positional embeddings. Compared with
    :func:`ccmc_lite.markov.binary_unigram_hessian` for random embeddings of unit and
    of initial (0.02) scale, a single position (``N = 1``), ``d = 1``, ``p + q = 1`` and a
    tiny ``p``.
    """


def _untied_min_eigenvalue() -> float:
    H = binary_unigram_hessian(0.5, 0.8, torch.zeros(4, 2, dtype=torch.float64), tied=False)
    return float(torch.linalg.eigvalsh(H)[0])


@value_checker(
    _untied_min_eigenvalue, name="smallest eigenvalue of the untied H_alpha at (0.5, 0.8)"
)
def check_untied_min_eigenvalue(
    my_min_eig: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Exercise ``p2c2-ex-untied``: the untied saddle (Makkuva et al. 2024, Thm. 3).

    ``my_min_eig`` is the learner's answer: the smallest eigenvalue of the **untied**
    Hessian ``H_α`` (coordinates ``(b, a, e)``) at ``θ_π`` for ``(p, q) = (0.5, 0.8)``,
    ``d = 2`` and all positional embeddings equal to zero, derived by hand. Compared (to
    ``1e-6``) with the smallest eigenvalue of :func:`ccmc_lite.markov.binary_unigram_hessian`
    (``tied=False``).
    """


# ---------------------------------------------------------- chapter 3: trained models


def _attention_cases(seed: int) -> list[Case]:
    seed = _seed(seed, 6)
    P3 = symmetric_kernel(3, 0.8)
    cases = []
    specs: list[tuple[dict[str, Any], int | None, int, torch.Tensor | None, str]] = [
        ({"d": 4, "N": 16}, 8, 16, None, ""),  # T = N
        ({"d": 4, "N": 16, "tied": False}, 4, 1, None, ""),  # a single token
        ({"d": 3, "N": 8, "depth": 2}, 3, 8, None, ""),  # only the first block counts
        ({"K": 3, "d": 4, "N": 8}, 5, 6, P3, "symmetric K=3, p=0.8"),
        ({"d": 2, "N": 8}, None, 7, None, ""),  # x of shape (T,)
    ]
    for k, (model_args, B, T, P, kernel) in enumerate(specs):
        model = _model(derive_seed(seed, 100 + k), **model_args)
        P, kernel = (binary_kernel(0.5, 0.8), "P(0.5, 0.8)") if P is None else (P, kernel)
        x = sample_chains(P, B or 1, T, generator=torch_generator(derive_seed(seed, k + 1)))
        x = x[0] if B is None else x
        cases.append(Case(model, x, show=f"{_shown(model, kernel)}, x of shape {tuple(x.shape)}"))
    return cases


@function_checker(
    attention_ratio,
    _attention_cases,
    name="attention ratio",
    atol=1e-9,
    context=_single_thread,
)
def check_attention_ratio(
    my_attention_ratio: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Exercise ``p2c3-ex-attention``: attention vs. skip (Makkuva et al. 2024, Sec. 3.1).

    ``my_attention_ratio(model, x)`` must return the mean over sequences and positions of
    ``|W_O Σ_i att_{n,i} W_V x_i| / |y_n|`` in the **first** block (a number), for a
    :class:`~ccmc_lite.markov.MarkovTransformer` and tokens ``x`` of shape
    ``(B, T)`` or ``(T,)``. Compared with :func:`ccmc_lite.markov.attention_ratio` on
    random models (``K = 2`` and ``K = 3``, depth 1 and 2) and sequences, including a
    single token (``T = 1``), a 1-D input and ``T = N``.
    """


def _appendix_d_cases(seed: int) -> list[tuple[float, ...]]:
    rng = np.random.default_rng(_seed(seed, 7))
    e_r, p_r, w_r, b_r = (float(v) for v in rng.normal(0.0, 0.5, 4))
    return [
        (0.3618, -0.1539, 0.3264, -0.1229, 5, 4, 16),  # the paper's trained model
        (0.5, 0.2, 0.3, 0.1, 5, 4, 16),  # p > 0: both symbols activate the same ReLUs
        (0.3618, -0.1539, -0.3264, -0.1229, 5, 4, 16),  # w1 < 0: the roles of β swap
        (-0.4, 0.1, 0.5, 0.0, 3, 2, 8),  # e < 0
        (0.3, -0.1, 0.4, 0.2, 0, 4, 16),  # β = 0
        (0.3, -0.1, 0.4, 0.2, 16, 4, 16),  # β = r
        (0.7, -0.2, 1.1, -0.3, 1, 1, 1),  # d = r = 1
        (e_r, p_r, w_r, b_r, 7, 4, 16),  # random
    ]


@function_checker(
    lambda e, p, w1, b, beta, d, r: appendix_d_logits(e, p, w1, b, beta, d=d, r=r),
    _appendix_d_cases,
    name="App. D logits (x_n = 1, x_n = 0)",
    atol=1e-9,
)
def check_appendix_d_logits(
    my_appendix_d_logits: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Exercise ``p2c3-ex-appendix-d``: the formula of App. D (Makkuva et al. 2024, eq. (26)).

    ``my_appendix_d_logits(e, p, w1, b, beta, d, r)`` must return
    ``(logit at x_n = 1, logit at x_n = 0)`` for the low-rank solution ``e = e v``,
    ``p_n = p v``, ``W_1 = w_1 w vᵀ``, ``W_2 = W_1ᵀ``: ``e d s (1 + w_1² d n(s)) + b`` with
    ``s = e x_n + p`` and ``n(s)`` the number of active ReLUs, ``β`` if ``w_1 s > 0`` and
    ``r - β`` otherwise. Compared with :func:`ccmc_lite.markov.appendix_d_logits` on the
    paper's numbers and on cases where the signs differ from the paper's (so that eq. (26)
    as printed does not apply), with ``β = 0``, ``β = r`` and ``d = r = 1``.
    """


# ------------------------------------------------------------------- chapter 4: depth


def _unigram_point_summary(point: Any, model: MarkovTransformer, P: torch.Tensor) -> np.ndarray:
    """Exact loss, largest gradient entry and the eigenvalues of ``H_α`` of a model."""
    if not isinstance(point, MarkovTransformer):
        raise TypeError(f"return a MarkovTransformer; got {type(point).__name__}")
    point = point.double()
    point.zero_grad()
    loss = population_loss(point, P, method="enumerate")
    grads = torch.autograd.grad(loss, list(point.parameters()), allow_unused=True)
    grad = max(float(g.abs().max()) for g in grads if g is not None)
    readout = ["e"] if model.tied else ["a", "e"]
    if model.K > 2:
        readout = [n.upper() for n in readout]
    H, _ = population_hessian(point, P, ["b", *readout], method="enumerate")
    eigs = torch.linalg.eigvalsh(H).numpy()
    return np.concatenate([[float(loss.detach()), grad], eigs])


def _theta_pi_cases(seed: int) -> list[Case]:
    specs: list[tuple[dict[str, Any], str, torch.Tensor]] = [
        ({"depth": 1}, "P(0.5, 0.8)", binary_kernel(0.5, 0.8)),
        ({"depth": 2}, "P(0.5, 0.8)", binary_kernel(0.5, 0.8)),
        ({"depth": 3, "tied": False}, "P(0.2, 0.3)", binary_kernel(0.2, 0.3)),
        ({"depth": 2, "N": 1}, "P(0.9, 0.6)", binary_kernel(0.9, 0.6)),
        ({"K": 3, "depth": 2}, "symmetric K=3, p=0.8", symmetric_kernel(3, 0.8)),
    ]
    cases = []
    for k, (model_args, kernel, P) in enumerate(specs):
        model = _model(_seed(seed, 100 + k), **model_args)
        cases.append(Case(model, P, show=_shown(model, kernel)))
    return cases


@function_checker(
    theta_pi,
    _theta_pi_cases,
    name="theta_pi (exact loss, max |grad|, eigenvalues of H_alpha)",
    compare_as=_unigram_point_summary,
    atol=1e-9,
    context=_single_thread,
)
def check_theta_pi(my_theta_pi: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Exercise ``p2c4-ex-theta-pi``: ``θ_π`` at any depth (Makkuva et al. 2024, eq. (11)).

    ``my_theta_pi(model, P)`` must return a **copy** of the
    :class:`~ccmc_lite.markov.MarkovTransformer` ``model`` set to the unigram
    point ``θ_π``: token embedding and readout zero, ``W_O = W_2 = 0`` in **every** block,
    and the bias making the prediction the stationary law (``b = log(p/q)`` for ``K = 2``,
    ``b = log π`` for ``K > 2``). A point is compared with
    :func:`ccmc_lite.markov.theta_pi` through what decides its nature: the exact loss,
    the largest gradient entry and the eigenvalues of the Hessian in ``α = (b, e)``
    (``(b, a, e)`` untied), all computed exactly. Cases: depth 1, 2 and 3, tied and
    untied, ``K = 2`` and ``K = 3``, a single position (``N = 1``); the free parameters
    are drawn with a large scale so that a block left switched on shows.
    """


def _gap_cases(seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch_generator(_seed(seed, 9))
    two = torch.stack([binary_kernel(0.5, 0.8), binary_kernel(0.2, 0.3)])
    levels = torch.stack([entropy_rate(two), unigram_entropy(two)], -1)  # (2, 2): the levels
    three = torch.stack([binary_kernel(a, b) for a, b in ((0.5, 0.8), (0.9, 0.9), (0.1, 0.4))])
    K3 = torch.stack([symmetric_kernel(3, 0.8), random_kernel(3, seed=_seed(seed, 10))])
    return [
        (levels, two),  # exactly at the two levels: 0 and 1
        (0.4 + 0.4 * torch.rand(3, 5, generator=gen, dtype=torch.float64), three),
        (0.8 + 0.3 * torch.rand(2, 4, generator=gen, dtype=torch.float64), K3),  # K = 3
        (torch.tensor([[0.6]], dtype=torch.float64), binary_kernel(0.3, 0.9)[None]),  # R = S = 1
        (torch.tensor([[0.01, 0.02]], dtype=torch.float64), binary_kernel(1e-3, 0.5)[None]),
    ]


@function_checker(unigram_gap, _gap_cases, name="unigram gap", atol=1e-8)
def check_unigram_gap(my_unigram_gap: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Exercise ``p2c4-ex-gap``: where a run ends (Makkuva et al. 2024, Remark 2).

    ``my_unigram_gap(loss, kernels)`` must return ``(L - H(x_{n+1}|x_n)) / I(x_n; x_{n+1})``
    for losses ``loss`` of shape ``(R, S)`` (run, checkpoint) and kernels of shape
    ``(R, K, K)`` (one per run), with the shape of ``loss``: 0 at the entropy rate, 1 at
    the unigram loss ``H(π)``. Compared with :func:`ccmc_lite.markov.unigram_gap` on
    losses exactly at the two levels, random losses for several kernels, ``K = 3`` kernels,
    a single run with a single checkpoint, and a kernel with a tiny ``p``.
    """


# ----------------------------------------------------------- chapter 5: phase diagram


def _curvature_cases(seed: int) -> list[tuple[Any, Any]]:
    p_r, q_r = (float(v) for v in np.random.default_rng(_seed(seed, 11)).uniform(0.05, 0.95, 2))
    grid = np.array([0.1, 0.4, 0.85])  # elementwise on arrays, as the next exercise uses it
    p_g, q_g = np.meshgrid(grid, grid, indexing="ij")
    return [(0.5, 0.8), (0.2, 0.3), (0.1, 0.85), (0.85, 0.85), (0.4, 0.6), (1e-4, 0.5), (p_r, q_r),
            (p_g, q_g)]  # fmt: skip


def _curvature_reference(p: Any, q: Any) -> Any:
    one = np.vectorize(lambda a, b: float(unigram_curvature(binary_kernel(a, b))[0]))
    out = one(p, q)
    return float(out) if np.ndim(out) == 0 else out


@function_checker(
    _curvature_reference,
    _curvature_cases,
    name="trap curvature 2 pi0 pi1 (p+q-1)",
    atol=1e-10,
)
def check_trap_curvature(
    my_trap_curvature: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Exercise ``p2c5-ex-curvature``: the depth of the trap (Makkuva et al. 2024, eq. (12)).

    ``my_trap_curvature(p, q)`` must return the curvature that the switching term gives the
    tied loss at ``θ_π`` along a unit direction of ``e`` when all positional embeddings are
    equal: ``2 π0 π1 (p + q - 1)`` (positive: a trap). Compared with
    :func:`ccmc_lite.markov.unigram_curvature` on the Fig. 4 grid's corners and centre,
    the line ``p + q = 1``, a tiny ``p``, a random ``(p, q)`` and, elementwise, a 3 x 3
    meshgrid of NumPy arrays.
    """


def _grid(grid: Any) -> list[float]:
    g = as_tensor("grid", grid, ndim=1)
    if g.numel() == 0:
        raise ValueError("grid must not be empty")
    return [
        check_float("grid", float(v), minimum=0.0, maximum=1.0, open_lower=True, open_upper=True)
        for v in g
    ]


def _predicted_grid(grid: Any) -> np.ndarray:
    def predicted(p: float, q: float) -> float:
        P = binary_kernel(p, q)
        trapped = float(unigram_curvature(P)[0]) > 0  # the unigram point is a local minimum
        return float(stationary_distribution(P)[1]) if trapped else p

    g = _grid(grid)
    return np.array([[predicted(p, q) for q in g] for p in g])  # (G, G)


@value_checker(
    _predicted_grid,
    name="predicted Fig. 4 (tied)",
    entries=lambda grid: [
        (f"at (p, q) = ({p:g}, {q:g})", (i, j))
        for i, p in enumerate(_grid(grid))
        for j, q in enumerate(_grid(grid))
    ],
)
def check_phase_prediction(
    my_prediction: Any, *, grid: Any, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Exercise ``p2c5-ex-predict``: predict Fig. 4 (Makkuva et al. 2024, Fig. 4, Thms. 1–2).

    ``my_prediction[i, j]`` is the learner's prediction of the tied model's probability of a
    1 after a 0 at ``(p, q) = (grid[i], grid[j])``, assuming every run ends where the
    landscape says: at the unigram point, which predicts ``π1 = p / (p + q)``, where it is
    a local minimum (positive curvature from
    :func:`ccmc_lite.markov.unigram_curvature`), and at the kernel's ``p`` elsewhere.
    The expected grid is computed from :func:`ccmc_lite.core.stationary_distribution`
    and :func:`ccmc_lite.markov.unigram_curvature`; each cell must be right to ``1e-6``.

    Parameters
    ----------
    grid : array-like
        The ``G`` switching probabilities of the chapter's grid, in ``(0, 1)``.
    """


#: The four cases of the exercise "Why is the untied model never caught?": (tied, p, q).
STOP_CASES: tuple[tuple[bool, float, float], ...] = (
    (True, 0.5, 0.8),
    (True, 0.2, 0.3),
    (False, 0.5, 0.8),
    (False, 0.2, 0.3),
)


def _where_runs_stop() -> list[bool]:
    """Whether θ_π is a local minimum in each case, with all positional embeddings equal."""
    pos = torch.zeros(4, 4, dtype=torch.float64)  # equal embeddings: no covariance term
    return [
        bool(torch.linalg.eigvalsh(binary_unigram_hessian(p, q, pos, tied=tied)).min() > 0)
        for tied, p, q in STOP_CASES
    ]


@value_checker(
    _where_runs_stop,
    name="where the unigram point is a local minimum",
    entries=lambda: [
        (f"{'tied' if t else 'untied'}, p + q {'>' if p + q > 1 else '<'} 1", i)
        for i, (t, p, q) in enumerate(STOP_CASES)
    ],
)
def check_where_runs_stop(my_answers: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Exercise ``p2c5-ex-untied``: where training can stop at ``θ_π`` (Thms. 2 and 3).

    ``my_answers`` is the learner's list of four booleans: whether the unigram point is a
    local minimum of the loss for the tied model with ``p + q > 1`` and with ``p + q < 1``,
    then for the untied model on both sides (all positional embeddings equal, as in
    :func:`check_trap_curvature`). Reference: the smallest eigenvalue of
    :func:`ccmc_lite.markov.binary_unigram_hessian` at ``(0.5, 0.8)`` and ``(0.2, 0.3)``.
    """


# ------------------------------------------------------------- chapter 6: K states


@function_checker(lag_one_covariance, _kernel_cases(13), name="lag-one covariance C", atol=1e-9)
def check_lag_one_covariance(
    my_lag_one_covariance: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Exercise ``p2c6-ex-covariance``: the lag-one covariance (Part II, "Beyond two states").

    ``my_lag_one_covariance(P)`` must return ``C = diag(π) P - π πᵀ`` (shape ``(K, K)``),
    the covariance of the one-hot vectors of ``x_n`` and ``x_{n+1}`` under the stationary
    chain. Compared with :func:`ccmc_lite.markov.lag_one_covariance` on the kernels of
    :func:`check_stationary` (a non-reversible kernel, where ``C ≠ Cᵀ``, included).
    """


@function_checker(
    unigram_curvature,
    _kernel_cases(14),
    name="unigram curvature (eigenvalues of -C_s on 1-perp)",
    atol=1e-9,
)
def check_unigram_curvature(
    my_unigram_curvature: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Exercise ``p2c6-ex-criterion``: the ``K``-state trap criterion (extends Thm. 2).

    ``my_unigram_curvature(P)`` must return the eigenvalues, in ascending order (shape
    ``(K-1,)``), of ``-C_s`` restricted to the subspace orthogonal to ``1``, where ``C_s``
    is the symmetric part of ``C = diag(π) P - π πᵀ``: all positive means the tied unigram
    point is a bad local minimum. Compared with :func:`ccmc_lite.markov.unigram_curvature`
    on the kernels of :func:`check_stationary` (``K = 2``: one eigenvalue; ``K = 5``
    symmetric: a repeated one; non-reversible kernels).
    """


def _cyclic_threshold() -> float:
    """Where the smallest curvature of the cyclic 3-state chain changes sign (bisection)."""

    def trapped(p: float) -> bool:
        P = (1.0 - p) * torch.eye(3, dtype=torch.float64) + p * _cycle(3)
        return float(unigram_curvature(P).min()) > 0

    lo, hi = 1e-3, 1.0 - 1e-9
    if trapped(lo) or not trapped(hi):  # pragma: no cover - a property of the reference
        raise RuntimeError("the cyclic chain's curvature does not change sign on (0, 1)")
    while hi - lo > 1e-10:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if trapped(mid) else (mid, hi)
    return 0.5 * (lo + hi)


@value_checker(_cyclic_threshold, name="threshold p* of the cyclic 3-state chain")
def check_cyclic_threshold(my_threshold: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Exercise ``p2c6-ex-cyclic``: the threshold of a cyclic chain (open in Makkuva et al.).

    ``my_threshold`` is the learner's answer: the switching probability ``p*`` above which
    the tied unigram point is a bad local minimum for the **cyclic** 3-state chain (stay
    with probability ``1 - p``, else move to ``x + 1 mod 3``). The expected value is the
    sign change of the smallest eigenvalue of :func:`ccmc_lite.markov.unigram_curvature`,
    located by bisection to ``1e-10``; the answer must be right to ``1e-6``.
    """
