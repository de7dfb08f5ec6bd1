"""Checkers for the exercises of Part III (Varre, Yüce & Flammarion 2025).

Every chapter of Part III ends with exercises; each is checked by one function here, a row
of the table run by :mod:`ccmc_lite.teaching.checking`: the learner's function (or value) is
compared with the **package's reference implementation** on inputs drawn from ``seed``
(random draws plus edge cases: a prompt of length 1, ``T = n``, a chain with zero
transitions, ``S = 2`` and ``S > 2``, ...).

========================================  ===========  =====================================
checker                                   chapter      reference
========================================  ===========  =====================================
:func:`check_kgram_estimator`             1            Def. 2.1, add-β smoothing
:func:`check_lifted_transition_matrix`    1            App. H, Def. H.2
:func:`check_suffix_law`                  2            Prop. 3.2 (suffix-conditional law)
:func:`check_suffix_gradient`             2            Lemma 3.1 (residual times score)
:func:`check_offset_attention`            3            Sec. 5, Figs. 3b and 5
:func:`check_detect_plateaus`             3            Sec. 5, Fig. 6
:func:`check_stage_offsets`               3            Sec. 5, Fig. 3 (stages from the heads)
:func:`check_attention_only_forward`      4            App. I.1
:func:`check_entropy_floor`               4            Sec. 5, ψ(Sα+1) − ψ(α+1)
:func:`check_subset_estimator`            5            App. F.2 (non-contiguous histories)
:func:`check_construction_limit`          5            Lemma B.1, eqs. (8a)–(8c), App. F.2
:func:`check_heads_needed`                5            App. F.2, App. I.2 (heads per history)
========================================  ===========  =====================================
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..core.seeding import derive_seed, numpy_rng, torch_generator
from ..core.validation import check_float, check_int
from ..teaching.checking import Case, CheckResult, describe, function_checker, value_checker
from .data import (
    NGramTask,
    dirichlet_mean_entropy,
    lifted_transition_matrix,
    sample_batch,
    sample_transitions,
)
from .estimators import kgram_estimator, subset_estimator
from .landscape import SuffixModel, exact_population_gradient, sequence_law, suffix_law
from .models import AttentionOnlyTransformer, construction_limit, theta_star, theta_star_subset
from .plateaus import Stage, detect_plateaus, label_stages, offset_attention

__all__ = [
    "check_attention_only_forward",
    "check_construction_limit",
    "check_detect_plateaus",
    "check_entropy_floor",
    "check_heads_needed",
    "check_kgram_estimator",
    "check_lifted_transition_matrix",
    "check_offset_attention",
    "check_stage_offsets",
    "check_subset_estimator",
    "check_suffix_gradient",
    "check_suffix_law",
]


def _tokens(values: Sequence[int]) -> torch.Tensor:
    return torch.tensor(list(values), dtype=torch.long)


def _ngram_tokens(S: int, T: int, seed: int) -> torch.Tensor:
    """One in-context trigram sequence (Dirichlet(0.5) rows): histories recur, so matches occur."""
    return sample_batch(NGramTask(S=S, n=3, T=max(T, 3), alpha=0.5), 1, seed=seed).tokens[0, :T]


# ------------------------------------------------------------------ Chapter 1


def _kgram_cases(seed: int) -> list[Any]:
    hand = _tokens([0, 1, 0, 2, 0, 1, 0])  # the chapter's hand-checked example
    cases: list[Any] = [
        (hand, 3, 2, 0.0),
        (hand, 3, 1, 0.0),
        (hand, 3, 3, 0.0),
        (hand, 3, 2, 1.0),
        (_tokens([2]), 3, 1, 0.0),  # a prompt of length 1: the unigram counts x_1
        (_tokens([2]), 3, 2, 0.0),  # ... and no bigram match at all: uniform
        (_tokens([1, 0]), 2, 3, 0.5),  # k > T: only the smoothing is left
        (_tokens([0, 1, 2]), 3, 2, 0.0),  # the last token never occurred before: 0/0
        (_tokens([1, 1, 1, 1]), 2, 2, 0.0),  # a constant sequence
    ]
    gen = torch_generator(seed)
    for j, (S, T) in enumerate(((2, 12), (5, 32), (4, 20))):
        x = _ngram_tokens(S, T, derive_seed(seed, j))
        k = 1 + j % 3
        cases.append((x, S, k + 1, 0.0))
        cases.append((x, S, k, 0.5))
    cases.append((torch.randint(0, 5, (16,), generator=gen), 5, 2, 0.25))
    return cases


def _kgram_reference(x: torch.Tensor, S: int, k: int, beta: float) -> torch.Tensor:
    return kgram_estimator(x.unsqueeze(0), S, k, smoothing=beta)[0]


@function_checker(_kgram_reference, _kgram_cases, name="k-gram estimator (Def. 2.1)")
def check_kgram_estimator(
    my_kgram_estimator: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "Implement the k-gram estimator" (Part III, Chapter 1).

    The learner's ``my_kgram_estimator(x, S, k, beta)`` takes one sequence ``x`` (a 1-D
    ``torch.long`` tensor of tokens in ``[0, S)``), the vocabulary size ``S``, the order
    ``k >= 1`` and the smoothing ``beta >= 0``, and returns the ``(S,)`` law of
    ``x_{T+1}``: the add-β smoothed k-gram estimator of Varre et al. 2025, Def. 2.1,
    ``(count + β) / (total + Sβ)``, and the uniform law when ``β = 0`` and the history was
    never seen. Reference: :func:`ccmc_lite.ngram.kgram_estimator`.
    """


def _deterministic_chain(S: int, n: int) -> torch.Tensor:
    """``P`` with one-hot rows: the next token is ``(h_last + 1) mod S`` (many zero entries)."""
    P = torch.zeros((S,) * n, dtype=torch.float64)
    for code in range(S ** (n - 1)):
        last = code % S
        P.reshape(-1, S)[code, (last + 1) % S] = 1.0
    return P


def _lifted_cases(seed: int) -> list[Any]:
    cases: list[Any] = [
        (torch.tensor([[0.7, 0.3], [0.4, 0.6]], dtype=torch.float64),),  # n = 2: M = P
        (torch.tensor([0.2, 0.5, 0.3], dtype=torch.float64),),  # n = 1: a single state
        (_deterministic_chain(2, 3),),  # zero transitions
    ]
    for j, (S, n) in enumerate(((2, 3), (3, 3), (2, 4), (3, 2))):
        task = NGramTask(S=S, n=n, T=n, alpha=0.5)
        cases.append((sample_transitions(task, (), seed=derive_seed(seed, j)),))
    return cases


def _lifted_reference(P: torch.Tensor) -> torch.Tensor:
    S, n = int(P.shape[-1]), P.ndim
    return lifted_transition_matrix(P.unsqueeze(0), S, n)[0]


@function_checker(_lifted_reference, _lifted_cases, name="lifted chain (App. H, Def. H.2)")
def check_lifted_transition_matrix(
    my_lifted_matrix: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "Build the lifted chain" (Part III, Chapter 1).

    ``my_lifted_matrix(P)`` takes one n-gram transition tensor ``P`` of shape
    ``(S, ..., S)`` (``n = P.ndim`` axes, the last one the next token) and returns the
    ``(S^(n-1), S^(n-1))`` transition matrix of the order-1 chain on histories of
    Varre et al. 2025, App. H, Def. H.2: ``M[h, h'] = P[h, j]`` when
    ``h' = (h_2, ..., h_{n-1}, j)``, histories coded row-major (oldest token most
    significant); ``n = 1`` gives ``[[1.0]]``. Reference:
    :func:`ccmc_lite.ngram.lifted_transition_matrix`.
    """


# ------------------------------------------------------------------ Chapter 2


def _enumerated_laws(seed: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]]:
    """Exact laws ``(tokens, prob, nxt)`` of small chains, with the vocabulary size."""
    binary = torch.tensor([[0.7, 0.3], [0.4, 0.6]], dtype=torch.float64)
    stuck = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)  # never leaves 0
    laws = [
        (*sequence_law(binary, 3), 2),
        (*sequence_law(stuck, 3), 2),  # the suffix "1" has probability 0 at T = 3
        (*sequence_law(binary, 4, start="stationary"), 2),
    ]
    for j, (S, n, T) in enumerate(((3, 3, 3), (2, 3, 5), (3, 2, 4))):  # (3, 3, 3): T = n
        P = sample_transitions(NGramTask(S=S, n=n, T=T, alpha=0.5), (), seed=derive_seed(seed, j))
        laws.append((*sequence_law(P, T), S))
    return laws


def _suffix_law_cases(seed: int) -> list[Any]:
    cases: list[Any] = []
    for tokens, prob, nxt, S in _enumerated_laws(seed):
        for L in (0, 1, 2):
            cases.append((tokens, prob, nxt, S, L))
    cases.insert(0, cases.pop(1))  # start with a readable one: binary chain, L = 1
    return cases


@function_checker(suffix_law, _suffix_law_cases, name="suffix-conditional law (Prop. 3.2)")
def check_suffix_law(my_suffix_law: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Check the exercise "The suffix-conditional law" (Part III, Chapter 2).

    ``my_suffix_law(tokens, prob, nxt, S, L)`` takes an enumerated law of sequences
    (``tokens`` ``(N, T)``, their probabilities ``prob`` ``(N,)`` and the next-token law
    ``nxt`` ``(N, S)``, as returned by :func:`ccmc_lite.ngram.sequence_law`) and
    returns the ``(S^L, S)`` matrix whose row ``h`` is ``p(x_{T+1} | last L tokens = h)``:
    the predictor at which a model whose score depends on that suffix is stationary
    (Varre et al. 2025, Prop. 3.2). Suffixes of probability zero get the uniform row.
    Reference: :func:`ccmc_lite.ngram.suffix_law`.
    """


def _suffix_gradient_cases(seed: int) -> list[Any]:
    gen = torch_generator(seed)
    cases: list[Any] = []
    for tokens, prob, nxt, S in _enumerated_laws(seed):
        for L in (0, 1, 2):
            W = torch.randn(S**L, S, generator=gen, dtype=torch.float64)
            cases.append((W, tokens, prob, nxt, L))
    # at the suffix-conditional law the gradient vanishes (Prop. 3.2): an edge case
    tokens, prob, nxt, S = _enumerated_laws(seed)[3]
    for L in (1, 2):
        W_star = torch.log(suffix_law(tokens, prob, nxt, S, L))
        cases.append((W_star, tokens, prob, nxt, L))
    cases.insert(0, cases.pop(1))  # binary chain, L = 1 first
    return cases


def _suffix_gradient_reference(
    W: torch.Tensor, tokens: torch.Tensor, prob: torch.Tensor, nxt: torch.Tensor, L: int
) -> torch.Tensor:
    model = SuffixModel(int(W.shape[-1]), L)
    with torch.no_grad():
        model.W.copy_(W)
    with torch.enable_grad():
        return exact_population_gradient(model, tokens, prob, nxt).reshape(W.shape)


@function_checker(
    _suffix_gradient_reference,
    _suffix_gradient_cases,
    name="suffix-model gradient (Lemma 3.1)",
    atol=1e-8,
)
def check_suffix_gradient(
    my_suffix_gradient: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "Lemma 3.1 by hand" (Part III, Chapter 2).

    ``my_suffix_gradient(W, tokens, prob, nxt, L)`` returns the gradient with respect to
    ``W`` (shape ``(S^L, S)``) of the population loss
    ``Σ_x prob[x] · (−Σ_s nxt[x, s] log softmax(W[h(x)])[s])`` of the toy model
    :class:`ccmc_lite.ngram.SuffixModel`, where ``h(x)`` is the code of the last
    ``L`` tokens of ``x``. Written as Lemma 3.1 of Varre et al. 2025 (residual times score)
    it is ``Σ_x prob[x] (softmax(W[h(x)]) − nxt[x])`` accumulated in row ``h(x)``.
    Reference: :func:`ccmc_lite.ngram.exact_population_gradient` on a
    ``SuffixModel`` holding ``W``.
    """


# ------------------------------------------------------------------ Chapter 3


def _offset_cases(seed: int) -> list[Any]:
    gen = torch_generator(seed)
    rand = torch.randn(2, 6, 6, generator=gen, dtype=torch.float64)
    upper = torch.triu(torch.full((1, 5, 5), 10.0, dtype=torch.float64), diagonal=1)
    star = theta_star(3, S=5, T=8, n_heads=2, c=5.0)["A1"].double()
    cases: list[Any] = [
        (rand, 1),
        (rand, 0),
        (torch.zeros(2, 5, 5, dtype=torch.float64), 1),  # uniform causal attention
        (upper, 1),  # large logits on future keys: the causal mask must remove them
        (star, 1),
        (star, 2),
        (torch.randn(1, 2, 2, generator=gen, dtype=torch.float64), 0),  # T = 2
        (torch.randn(3, 4, 4, generator=gen, dtype=torch.float64), 2),  # offset = T - 2
    ]
    return cases


@function_checker(offset_attention, _offset_cases, name="offset attention (Sec. 5, Fig. 5)")
def check_offset_attention(
    my_offset_attention: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "Read the stage from the attention maps" (Part III, Chapter 3).

    ``my_offset_attention(A1, offset)`` takes the first-layer parameter ``A1`` of the
    simplified transformer, shape ``(H, T, T)``, forms the causal row softmax
    ``σ(A_1^(h))`` (keys ``j <= i``; Varre et al. 2025, Sec. 2.3) and returns, for each
    head, the weight on the key ``offset`` places back averaged over the query rows
    ``i = offset, ..., T-2`` (the last row is excluded), shape ``(H,)``: the summary behind
    the stage detection of Sec. 5 (Figs. 3b and 5). Reference:
    :func:`ccmc_lite.ngram.offset_attention`.
    """


def _plateau_cases(seed: int) -> list[Any]:
    rng = numpy_rng(seed)

    def history(levels: Sequence[tuple[float, int]], noise: float) -> np.ndarray:
        g = np.concatenate([np.full(n, v) for v, n in levels])
        return g * (1.0 + noise * rng.standard_normal(g.size))

    def loss_for(g: np.ndarray) -> np.ndarray:
        return np.linspace(1.7, 1.5, g.size) + 0.02 * rng.standard_normal(g.size)

    one = history([(1.0, 100), (0.2, 200), (1.0, 100)], 0.05)
    two = history([(1.0, 80), (0.3, 120), (1.0, 80), (0.31, 150), (1.0, 50)], 0.05)
    to_end = history([(1.0, 120), (0.25, 180)], 0.05)
    const = np.full(60, 0.5)
    short = history([(1.0, 5), (0.2, 10)], 0.0)
    noisy = np.abs(rng.standard_normal(300)) + 0.5
    cases = [
        (one, loss_for(one), 20, 50),
        (two, loss_for(two), 20, 60),
        (to_end, loss_for(to_end), 20, 50),
        (const, loss_for(const), 10, 20),  # everything is as quiet as the quietest part
        (one, loss_for(one), 20, 400),  # min_length longer than any stretch: no plateau
        (short, loss_for(short), 30, 3),  # history shorter than the window
        (noisy, loss_for(noisy), 25, 30),
    ]
    # the smallest gradients come first: the threshold must ignore the first `window` steps
    # (drawn last, so that the cases above keep their numbers)
    early = history([(0.01, 5), (1.0, 100), (0.2, 120), (1.0, 100)], 0.05)
    return [*cases, (early, loss_for(early), 20, 50)]


def _plateau_reference(
    grad_norm: np.ndarray, loss: np.ndarray, window: int, min_length: int
) -> list[tuple[int, int, float]]:
    found = detect_plateaus(grad_norm, loss, window=window, min_length=min_length)
    return [(p.start, p.end, p.loss) for p in found]


@function_checker(_plateau_reference, _plateau_cases, name="plateau detection (Sec. 5, Fig. 6)")
def check_detect_plateaus(
    my_detect_plateaus: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "Find the plateaus" (Part III, Chapter 3).

    ``my_detect_plateaus(grad_norm, loss, window, min_length)`` smooths both per-step
    histories with a trailing moving average over ``window`` steps (shorter at the start),
    sets the threshold to 1.2 times the smallest smoothed gradient norm after the first
    ``window`` steps (over all steps if the history is not longer than ``window``), and
    returns one ``(start, end, loss)`` tuple per maximal stretch of at least ``min_length``
    steps whose smoothed gradient norm is below the threshold: first and last step
    (inclusive) and the median smoothed loss there. This is the plateau rule used to read
    the stages of Varre et al. 2025, Sec. 5 (their Fig. 6 links plateaus to small
    gradients). Reference: :func:`ccmc_lite.ngram.detect_plateaus`.
    """


#: The snapshots of the exercise "Name the stage" (Part III, Chapter 3), each in the middle
#: of a flat stretch of the test loss: ``(loss, weight on -1 per head, weight on -2 per
#: head)`` for a model with two first-layer heads.
STAGE_CASES: tuple[tuple[float, tuple[float, float], tuple[float, float]], ...] = (
    (1.612, (0.77, 0.09), (0.02, 0.07)),
    (1.553, (0.58, 0.03), (0.17, 0.80)),
    (1.640, (0.12, 0.10), (0.08, 0.06)),
    (1.615, (0.37, 0.23), (0.06, 0.07)),
)


def _stage_offsets() -> list[int]:
    """How far back the furthest head looks in each snapshot, as ``label_stages`` reads it."""
    offset = {"uniform": 0, "bigram": 1, "trigram": 2}
    out = []
    for loss, w1, w2 in STAGE_CASES:
        (stage,) = label_stages([Stage(0, 1, loss)], [0], [w1], [w2])
        out.append(offset[stage.label])
    return out


@value_checker(
    _stage_offsets,
    name="the stage of each snapshot, read from the heads",
    entries=lambda: [(f"snapshot {i + 1}", i) for i in range(len(STAGE_CASES))],
)
def check_stage_offsets(my_stages: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Check the exercise "Name the stage" (Part III, Chapter 3; Varre et al. 2025, Fig. 3).

    ``my_stages`` is the learner's list of four integers: for each snapshot of
    ``STAGE_CASES``, how many tokens back the furthest first-layer head looks (0 when no
    head puts more than 0.3 on the previous token or on the token two back). Reference:
    :func:`ccmc_lite.ngram.label_stages` (uniform 0, bigram 1, trigram 2), which ignores
    the loss level, as the chapter argues one must.
    """


# ------------------------------------------------------------------ Chapter 4


def _random_model(
    S: int, T: int, heads: tuple[int, ...], embedding: str, gen: torch.Generator
) -> AttentionOnlyTransformer:
    d = None if embedding == "onehot" else S + 2
    with torch.random.fork_rng(devices=[]):  # the constructor draws from the global RNG
        model = AttentionOnlyTransformer(S, T, heads, embedding=embedding, d=d).double()
    scale = 1.0 / math.sqrt(model.d)  # logits of order one: outputs far from one-hot
    with torch.no_grad():  # every parameter, read-out included, from our seed
        for p in model.parameters():
            p.copy_(scale * torch.randn(p.shape, generator=gen, dtype=torch.float64))
    return model


def _forward_cases(seed: int) -> list[Any]:
    gen = torch_generator(seed)
    cases = []
    for S, T, heads, emb, B, Tq in (
        (3, 4, (2, 1), "onehot", 3, 4),
        (3, 4, (2, 1), "onehot", 2, 1),  # a prompt of length 1
        (2, 5, (1,), "onehot", 4, 5),  # one layer
        (3, 5, (1, 1, 1), "onehot", 2, 5),  # three layers
        (4, 4, (2, 1), "learned", 3, 4),
        (3, 6, (2, 1), "onehot", 2, 4),  # a prompt shorter than the model's T
    ):
        m = _random_model(S, T, heads, emb, gen)
        tokens = torch.randint(0, S, (B, Tq), generator=gen)
        shown = f"AttentionOnlyTransformer(S={S}, T={T}, heads={heads}, embedding={emb!r}, d={m.d})"
        cases.append(Case(m, tokens, show=f"{shown}, {describe(tokens)}"))
    return cases


def _forward_reference(model: AttentionOnlyTransformer, tokens: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(tokens)


@function_checker(
    _forward_reference, _forward_cases, name="attention-only forward pass (App. I.1)", atol=1e-8
)
def check_attention_only_forward(
    my_forward: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "The attention-only forward pass" (Part III, Chapter 4).

    ``my_forward(model, tokens)`` takes a
    :class:`ccmc_lite.ngram.AttentionOnlyTransformer` and tokens ``(B, T')`` and
    returns the ``(B, S)`` next-token probabilities of Varre et al. 2025, App. I.1:
    ``r_0 = model.embed(tokens)``; for each layer ``ℓ``,
    ``r_ℓ = r_{ℓ-1} + Σ_h σ(r_{ℓ-1} Q_h^T K_h r_{ℓ-1}^T) r_{ℓ-1} V_h^T`` with the causal
    softmax σ and ``Q_h = model.Q[ℓ][h]`` (likewise ``K``, ``V``); finally
    ``softmax(r_L[T'] W)`` with ``W = model.W``. The models are random (every parameter,
    the read-out included) and use one-hot or learned embeddings, one to three layers and
    prompts of length 1 up to ``T``. Reference: ``model(tokens)``.
    """


def _floor(S: int, alpha: float) -> float:
    S = check_int("S", S, minimum=2)
    return dirichlet_mean_entropy(S, check_float("alpha", alpha, minimum=0.0, open_lower=True))


@value_checker(
    _floor,
    name=lambda S, alpha: f"mean entropy of a Dirichlet row for S={S}, alpha={alpha:g}",
    atol=5e-4,
    rtol=0,
)
def check_entropy_floor(
    my_row_entropy: Any, *, S: Any = 3, alpha: Any = 1.0, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "Derive the Dirichlet-row entropy of this setting" (Part III, Chapter 4).

    ``my_row_entropy`` is the learner's value of the mean entropy of a Dirichlet(α·1_S)
    row, ``ψ(Sα+1) − ψ(α+1)`` nats (a reference level for the loss of Varre et al. 2025,
    Sec. 5, derived in Chapter 1; not a floor, since the row that generates the next token
    is selected by the chain), derived by hand for the chapter's setting ``S = 3``,
    ``α = 1`` (or for the ``S`` and ``alpha`` given here). It must agree to three decimals.
    Reference: :func:`ccmc_lite.ngram.dirichlet_mean_entropy`.

    Parameters
    ----------
    S : int
        Vocabulary size of the setting.
    alpha : float
        Dirichlet concentration of the setting.
    """


# ------------------------------------------------------------------ Chapter 5


def _subset_cases(seed: int) -> list[Any]:
    hand = _tokens([0, 1, 0, 2, 0, 1, 0])
    cases: list[Any] = [
        (hand, 3, [2], 0.0),  # the skip-bigram: match the token two back only
        (hand, 3, [], 0.0),  # the empty history: unigram
        (hand, 3, [1, 2], 0.0),  # the contiguous trigram
        (hand, 3, [1, 3], 0.5),
        (_tokens([2]), 3, [1], 0.0),  # a prompt of length 1: no key has a history
        (_tokens([1, 0, 1]), 2, [4], 0.5),  # an offset beyond the prompt
    ]
    for j, (S, T) in enumerate(((2, 16), (5, 32), (3, 24))):
        x = _ngram_tokens(S, T, derive_seed(seed, 10 + j))
        cases.append((x, S, [2], 0.0))
        cases.append((x, S, [1, 3], 0.25))
        cases.append((x, S, [3], 1.0))
    return cases


def _subset_reference(x: torch.Tensor, S: int, offsets: list[int], beta: float) -> torch.Tensor:
    return subset_estimator(x.unsqueeze(0), S, offsets, smoothing=beta)[0]


@function_checker(_subset_reference, _subset_cases, name="N-history estimator (App. F.2)")
def check_subset_estimator(
    my_subset_estimator: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "Estimators with non-contiguous histories" (Part III, Chapter 5).

    ``my_subset_estimator(x, S, offsets, beta)`` generalises the k-gram estimator to a set
    ``N`` of offsets (Varre et al. 2025, App. F.2): a key position ``l`` (1-based,
    ``max(N) < l <= T``) matches when ``x_{l-h} = x_{T+1-h}`` for every ``h`` in ``N``, and
    the estimate is ``(count + β) / (total + Sβ)`` over the tokens ``x_l`` of matching keys
    (uniform when ``β = 0`` and nothing matches); ``N = []`` is the unigram and
    ``N = [1, ..., k-1]`` the k-gram. Reference: :func:`ccmc_lite.ngram.subset_estimator`.
    """


def _limit_cases(seed: int) -> list[Any]:
    hand = _tokens([0, 1, 0, 2, 0, 1, 0])
    cases: list[Any] = [
        (hand, 3, [1]),
        (hand, 3, [1, 2]),
        (hand, 3, [2]),
        (hand, 3, []),  # no head: uniform attention, the unigram
        (_tokens([0, 1, 2]), 3, [1]),  # no key matches: every key ties at score 0
        (_tokens([2]), 3, [1, 2]),  # a prompt of length 1
        (_tokens([1, 0, 1, 1]), 2, [1, 3]),  # a clamped key history
    ]
    for j, (S, T) in enumerate(((2, 12), (5, 32), (3, 20))):
        x = _ngram_tokens(S, T, derive_seed(seed, 20 + j))
        cases.append((x, S, [1, 2]))
        cases.append((x, S, [2]))
    return cases


def _limit_reference(x: torch.Tensor, S: int, offsets: list[int]) -> torch.Tensor:
    return construction_limit(x.unsqueeze(0), S, offsets)[0]


@function_checker(
    _limit_reference, _limit_cases, name="hard-max limit of the construction (Lemma B.1)"
)
def check_construction_limit(
    my_construction_limit: Any, *, seed: int = 0, quiet: bool = False
) -> CheckResult:
    """Check the exercise "What the construction computes as c → ∞" (Part III, Chapter 5).

    ``my_construction_limit(x, S, offsets)`` returns the ``(S,)`` output of the
    constructions θ*^k (Varre et al. 2025, eqs. (8a)–(8c), Lemma B.1) and θ*_N (App. F.2)
    in the limit ``c -> ∞``: with 0-based positions, key ``i`` copies
    ``x[max(i - o, 0)]`` for each offset ``o`` (eq. (8a) sends the first ``o`` rows to
    position 0), the query holds ``x[max(T - o, 0)]``, the score of key ``i`` is the number
    of offsets at which the two agree, and the output is the token histogram over the keys
    with the **largest** score (uniform attention among them). Reference:
    :func:`ccmc_lite.ngram.construction_limit`.
    """


#: The histories of the exercise "How many heads does a history need?" (Part III, Ch. 5).
HISTORIES: tuple[tuple[int, ...], ...] = ((1,), (2,), (1, 2), (3,), (1, 3))


def _heads_needed() -> list[int]:
    """First-layer heads that attend to a fixed earlier token in the construction θ*_N."""
    out = []
    for offsets in HISTORIES:
        params = theta_star_subset(offsets, S=3, T=8, n_heads=4, c=20.0)
        weight = np.stack([offset_attention(params["A1"], o) for o in (1, 2, 3)])  # (3, H)
        out.append(int((weight.max(0) > 0.5).sum()))
    return out


@value_checker(
    _heads_needed,
    name="first-layer heads the construction of each history needs",
    entries=lambda: [(f"N = {set(N)}", i) for i, N in enumerate(HISTORIES)],
)
def check_heads_needed(my_heads: Any, *, seed: int = 0, quiet: bool = False) -> CheckResult:
    """Check the exercise "How many heads does a history need?" (Part III, Chapter 5).

    ``my_heads`` is the learner's list of five integers: for each history ``N`` of
    ``HISTORIES`` ({1}, {2}, {1, 2}, {3}, {1, 3}), the number of first-layer heads that
    the construction θ*_N of App. F.2 uses. The query must hold the tokens ``x_{T+1-h}``,
    ``h ∈ N``; the query's own token is in the residual stream, so every offset up to
    ``max(N)`` needs a head that copies the token ``g`` back (``g = 1..max(N)``). Reference:
    the heads of :func:`ccmc_lite.ngram.theta_star_subset` that attend to a fixed earlier
    token (:func:`ccmc_lite.ngram.offset_attention` above 0.5).
    """
