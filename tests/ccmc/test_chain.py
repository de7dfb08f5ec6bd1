"""Tests for ccmc_lite.ccmc.chain (Ildiz et al. 2024, Def. 2.1, eq. (1)-(3), Sec. 2.3, App. A)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ccmc_lite.ccmc import (
    PromptData,
    ccmc_distribution,
    check_transition,
    frequencies,
    log_likelihood,
    population_data,
    positional_ccmc_distribution,
    prompt_data,
    prompt_statistics,
    sample_next,
    sample_prompt_data,
    sample_trajectories,
    trajectory_data,
    weighted_transition,
)
from ccmc_lite.ccmc.chain import _ccmc_distribution_from_counts, _token_counts

P3 = torch.tensor([[0.2, 0.3, 0.5], [0.5, 0.1, 0.4], [0.1, 0.6, 0.3]], dtype=torch.float64)


def random_P(K: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(K, K, generator=g, dtype=torch.float64), -1)


# ---------------------------------------------------------------- Def. 2.1 and eq. (1)-(3)


def test_frequencies_of_paper_prompt():
    # the paper's X = [1, 2, 1] is [0, 1, 0] in book tokens
    m = frequencies([0, 1, 0], 3)
    torch.testing.assert_close(m, torch.tensor([2 / 3, 1 / 3, 0.0], dtype=torch.float64))
    assert _token_counts([[0, 1, 0], [2, 2, 2]], 3).tolist() == [[2, 1, 0], [0, 0, 3]]


def test_weighted_transition_values():
    m = torch.tensor([2.0, 1.0, 0.0])
    Pm = weighted_transition(P3, m)
    expected0 = torch.tensor([0.4, 0.3, 0.0]) / 0.7
    torch.testing.assert_close(Pm[0], expected0.double())
    torch.testing.assert_close(Pm.sum(1), torch.ones(3, dtype=torch.float64))


def test_ccmc_distribution_matches_hand_computation():
    pi = ccmc_distribution(P3, [0, 1, 0])  # state 0, m = (2/3, 1/3, 0)
    torch.testing.assert_close(pi, torch.tensor([4 / 7, 3 / 7, 0.0], dtype=torch.float64))
    pi_b = ccmc_distribution(P3, [[0, 1, 0], [2, 2, 1]])
    assert pi_b.shape == (2, 3)
    torch.testing.assert_close(pi_b[1], torch.tensor([0.0, 0.1, 0.8], dtype=torch.float64) / 0.9)


def test_cross_attention_excludes_query_from_keys():
    # keys of [1, 2, 0] are {1, 2}: the query token 0 cannot be emitted
    pi = ccmc_distribution(P3, [1, 2, 0], variant="cross")
    assert pi[0] == 0
    torch.testing.assert_close(pi[1:], torch.tensor([0.3, 0.5], dtype=torch.float64) / 0.8)


def test_ragged_prompts_equal_one_by_one():
    prompts = [[0, 1], [2], [1, 1, 2, 0]]
    batch = ccmc_distribution(P3, prompts)
    for i, p in enumerate(prompts):
        torch.testing.assert_close(batch[i], ccmc_distribution(P3, p))


def test_distribution_from_counts_with_batched_chains():
    Ps = torch.stack([P3, random_P(3, 1)])  # (2, 3, 3)
    counts = torch.tensor([[1.0, 2.0, 0.0], [1.0, 1.0, 1.0]])
    pi = _ccmc_distribution_from_counts(Ps, counts, torch.tensor([2, 0]))
    manual0 = counts[0].double() * Ps[0, 2]
    torch.testing.assert_close(pi[0], manual0 / manual0.sum())
    manual = counts[1].double() * Ps[1, 0]
    torch.testing.assert_close(pi[1], manual / manual.sum())


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 6), st.integers(1, 12), st.integers(0, 10_000))
def test_pi_depends_only_on_counts_and_query(K, L, seed):
    """Def. 2.1: pi^X is the token counts of X times the query's row of P, normalised; so
    permuting x_1..x_{L-1} leaves it unchanged. Cross-attention counts all but the query."""
    g = torch.Generator().manual_seed(seed)
    P = random_P(K, seed)
    X = torch.randint(0, K, (L,), generator=g)
    perm = torch.cat([X[:-1][torch.randperm(L - 1, generator=g)], X[-1:]])
    torch.testing.assert_close(ccmc_distribution(P, X), ccmc_distribution(P, perm))
    pi = ccmc_distribution(P, X)
    assert math.isclose(float(pi.sum()), 1.0, rel_tol=1e-12)
    # support of pi is the set of tokens in X (self-attention only repeats key tokens)
    assert set(pi.nonzero().flatten().tolist()) == set(X.tolist())
    # the formula itself, for both key sets
    weights = torch.bincount(X, minlength=K).double() * P[X[-1]].double()
    torch.testing.assert_close(pi, weights / weights.sum())
    if L >= 2:
        cross = torch.bincount(X[:-1], minlength=K).double() * P[X[-1]].double()
        torch.testing.assert_close(ccmc_distribution(P, X, variant="cross"), cross / cross.sum())


# ---------------------------------------------------------------- positional CCMC (eq. (10))


def test_positional_ccmc_reduces_to_ccmc_without_positions():
    L, K = 4, 3
    X = torch.tensor([0, 2, 2, 1])
    pi = positional_ccmc_distribution(
        P3, X, torch.ones(L), torch.ones(K), torch.ones(L, K, dtype=torch.float64)
    )
    torch.testing.assert_close(pi, ccmc_distribution(P3, X))


def test_positional_ccmc_weights_positions():
    X = torch.tensor([0, 1, 1])
    a = torch.tensor([5.0, 1.0, 1.0])  # first position counts five times
    pi = positional_ccmc_distribution(P3, X, a, torch.ones(3), torch.ones(3, 3))
    num = torch.tensor([5.0 * 0.5, 2.0 * 0.1, 0.0], dtype=torch.float64)
    torch.testing.assert_close(pi, num / num.sum())


def test_positional_bad_shapes():
    X = torch.tensor([0, 1, 1])
    with pytest.raises(ValueError, match="a must have shape"):
        positional_ccmc_distribution(P3, X, torch.ones(2), torch.ones(3), torch.ones(3, 3))
    with pytest.raises(ValueError, match="V must have shape"):
        positional_ccmc_distribution(P3, X, torch.ones(3), torch.ones(3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="b must be strictly positive"):
        positional_ccmc_distribution(P3, X, torch.ones(3), torch.zeros(3), torch.ones(3, 3))


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("P", "match"),
    [
        (torch.ones(2, 3) / 3, "square"),
        ([[0.5, 0.6], [0.5, 0.5]], "row-stochastic"),
        ([[1.2, -0.2], [0.5, 0.5]], "non-negative"),
        ([[float("nan"), 0.5], [0.5, 0.5]], "finite"),
        ([[1.0]], "at least 2 x 2"),
        ([[0.0, 0.0], [0.5, 0.5]], "row-stochastic"),  # a zero row is not a distribution
        ([0.5, 0.5], "dimension"),
    ],
)
def test_bad_transition_matrices(P, match):
    with pytest.raises(ValueError, match=match):
        ccmc_distribution(P, [0, 1])
    with pytest.raises(ValueError, match=match):
        check_transition(P)


def test_positive_required_names_entry():
    with pytest.raises(ValueError, match="strictly positive"):
        check_transition([[1.0, 0.0], [0.5, 0.5]], positive=True)


@pytest.mark.parametrize(
    ("X", "match"),
    [
        ([0, 3], r"\[0, 3\)"),
        ([-1, 0], r"\[0, 3\)"),
        ([], "empty"),
        ([[0, 1], [2, 5]], r"\[0, 3\)"),
        ([[0, 1], []], r"X\[1\] must not be empty"),
    ],
)
def test_bad_prompts(X, match):
    with pytest.raises(ValueError, match=match):
        ccmc_distribution(P3, X)


def test_cross_attention_needs_two_tokens():
    with pytest.raises(ValueError, match="at least 2 tokens"):
        ccmc_distribution(P3, [1], variant="cross")
    with pytest.raises(ValueError, match="variant"):
        ccmc_distribution(P3, [1], variant="both")


def test_float_prompt_rejected():
    with pytest.raises(TypeError, match="integers"):
        ccmc_distribution(P3, [0.5, 1.0])


def test_undefined_transition_raises():
    P = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match="undefined"):
        ccmc_distribution(P, [0, 0])  # keys {0}, but P[0, 0] = 0
    with pytest.raises(ValueError, match="undefined"):
        weighted_transition(P, [1.0, 0.0])
    with pytest.raises(ValueError, match="undefined"):
        sample_trajectories(P, [0], 5, seed=0)


# ---------------------------------------------------------------- sampling


def test_sample_next_is_reproducible_and_unbiased():
    a = sample_next(P3, [0, 1, 0], seed=3, n_samples=20_000)
    b = sample_next(P3, [0, 1, 0], seed=3, n_samples=20_000)
    assert torch.equal(a, b)
    freq = torch.bincount(a, minlength=3).double() / a.numel()
    pi = ccmc_distribution(P3, [0, 1, 0])
    sd = torch.sqrt(pi * (1 - pi) / a.numel())
    assert bool(((freq - pi).abs() <= 5 * sd + 1e-12).all())
    assert int((a == 2).sum()) == 0  # token 2 is not in the prompt


def test_sample_next_batch_shape():
    out = sample_next(P3, [[0, 1], [2, 2]], seed=0, n_samples=4)
    assert out.shape == (2, 4)
    assert bool((out[1] == 2).all())


def test_trajectories_are_reproducible_and_consistent():
    tr = sample_trajectories(P3, [0, 1, 2], 60, seed=1, n_traj=7, record_at=[0, 10, 60])
    tr2 = sample_trajectories(P3, [0, 1, 2], 60, seed=1, n_traj=7, record_at=[0, 10, 60])
    assert torch.equal(tr.tokens, tr2.tokens)
    assert tr.tokens.shape == (7, 63)
    for c, t in enumerate(tr.times.tolist()):
        manual = torch.nn.functional.one_hot(tr.tokens[:, : 3 + t], 3).sum(1).double()
        torch.testing.assert_close(tr.counts[:, c], manual)
        pairs = torch.stack([tr.tokens[:, 2 : 2 + t], tr.tokens[:, 3 : 3 + t]], -1)
        manual_tr = torch.zeros(7, 3, 3, dtype=torch.float64)
        for r in range(7):
            for i, j in pairs[r].tolist():
                manual_tr[r, i, j] += 1
        torch.testing.assert_close(tr.transitions[:, c], manual_tr)
    torch.testing.assert_close(tr.frequencies.sum(-1), torch.ones(7, 3, dtype=torch.float64))


def test_trajectory_first_step_follows_pi():
    R = 20_000
    tr = sample_trajectories(P3, [0, 1, 0], 1, seed=5, n_traj=R)
    freq = torch.bincount(tr.tokens[:, -1], minlength=3).double() / R
    pi = ccmc_distribution(P3, [0, 1, 0])
    assert bool(((freq - pi).abs() <= 5 * torch.sqrt(pi * (1 - pi) / R) + 1e-12).all())


def test_trajectories_with_one_chain_per_trajectory():
    # chain 0 always emits token 0 once it leads; chain 1 never emits token 0 after a 1
    P0 = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    P1 = torch.tensor([[0.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    tr = sample_trajectories(torch.stack([P0, P1]), [0, 1], 20, seed=0)
    assert bool((tr.tokens[0, 2:] == 0).all())
    assert bool((tr.tokens[1, 2:] == 1).all())


def test_cross_trajectories_only_emit_keys():
    tr = sample_trajectories(P3, [1, 2, 0], 30, seed=0, n_traj=50, variant="cross")
    assert int((tr.tokens[:, 3] == 0).sum()) == 0  # first step: keys are {1, 2}


def test_sample_trajectories_bad_arguments():
    with pytest.raises(ValueError, match="disagree"):
        sample_trajectories(torch.stack([P3, P3]), [[0, 1]] * 3, 5, seed=0)
    with pytest.raises(ValueError, match="record_at"):
        sample_trajectories(P3, [0, 1], 5, seed=0, record_at=[6])
    with pytest.raises(ValueError, match="length"):
        sample_trajectories(P3, [0, 1], 0, seed=0)
    with pytest.raises(ValueError, match="seed"):
        sample_trajectories(P3, [0, 1], 3, seed=-1)


# ---------------------------------------------------------------- data sets and likelihood


def test_prompt_data_and_log_likelihood():
    prompts = [[0, 1, 0], [2, 1]]
    data = prompt_data(prompts, [1, 2], 3)
    ll = log_likelihood(P3, data)
    manual = math.log(ccmc_distribution(P3, [0, 1, 0])[1]) + math.log(
        ccmc_distribution(P3, [2, 1])[2]
    )
    assert math.isclose(float(ll), manual, rel_tol=1e-12)
    assert math.isclose(float(log_likelihood(P3, data, average=True)), manual / 2, rel_tol=1e-12)


def test_prompt_data_rejects_impossible_labels():
    with pytest.raises(ValueError, match="does not occur among the key tokens"):
        prompt_data([[0, 1, 0]], [2], 3)
    with pytest.raises(ValueError, match="does not occur among the key tokens"):
        prompt_data([[1, 0]], [0], 3, variant="cross")
    with pytest.raises(ValueError, match="next_tokens must have 2"):
        prompt_data([[0, 1], [1, 1]], [1], 3)


def test_population_data_is_a_distribution():
    prompts = torch.tensor([[0, 1, 2], [2, 2, 0]])
    pop = population_data(P3, prompts, [0.25, 0.75])
    assert pop.n_rows == 6
    assert math.isclose(float(pop.total_weight()), 1.0, rel_tol=1e-12)
    torch.testing.assert_close(pop.weights[:3], 0.25 * ccmc_distribution(P3, prompts[0]))
    with pytest.raises(ValueError, match="prompt_probs"):
        population_data(P3, prompts, [0.5, 0.6])


def test_sample_prompt_data_counts():
    pop = population_data(P3, torch.tensor([[0, 1, 2], [2, 2, 0]]))
    s = sample_prompt_data(pop, 1000, seed=0, n_runs=5)
    assert s.weights.shape == (5, 6)
    assert torch.equal(s.total_weight(), torch.full((5,), 1000.0, dtype=torch.float64))
    s2 = sample_prompt_data(pop, 1000, seed=0, n_runs=5)
    assert torch.equal(s.weights, s2.weights)
    assert bool((s.weights[:, pop.weights == 0] == 0).all())
    # the true population has the smallest loss in expectation: MLE sanity via likelihood
    assert float(log_likelihood(P3, s).mean()) > float(log_likelihood(random_P(3, 9), s).mean())


def test_trajectory_data_rows():
    tokens = torch.tensor([0, 1, 0, 1, 0])
    data = trajectory_data(tokens, 2, 3)
    assert data.counts.tolist() == [[1, 1, 0], [2, 1, 0], [2, 2, 0]]
    assert data.query.tolist() == [1, 0, 1]
    assert data.y.tolist() == [0, 1, 0]
    cross = trajectory_data(tokens, 2, 3, variant="cross")
    assert cross.counts.tolist() == [[1, 0, 0], [1, 1, 0], [2, 1, 0]]


def test_trajectory_data_validates_labels():
    with pytest.raises(ValueError, match="does not occur"):
        trajectory_data(torch.tensor([0, 1, 1, 0, 2]), 2, 3)
    data = trajectory_data(torch.tensor([[0, 1, 1, 0], [1, 0, 0, 0]]), 2, 3)
    assert data.counts.shape == (2, 2, 3)
    assert data.y.tolist() == [[1, 0], [0, 0]]


def test_prompt_statistics_and_with_weights():
    counts, query, single = prompt_statistics([2, 0, 2], 3, variant="cross")
    assert counts.tolist() == [[1.0, 0.0, 1.0]] and query.tolist() == [2] and single
    data = prompt_data([[0, 1]], [1], 3)
    assert isinstance(data, PromptData)
    with pytest.raises(ValueError, match="weights must have shape"):
        data.with_weights([1.0, 2.0])
    with pytest.raises(ValueError, match="non-negative"):
        data.with_weights([-1.0])
    assert data.with_weights(np.array([[2.0], [3.0]])).batch_shape == (2,)


def test_undefined_transitions_raise_instead_of_nan():
    """A prompt whose key tokens j all have P[x_L, j] = 0 has no CCMC transition (Def. 2.1):
    every function that normalises by that mass says so instead of returning NaN."""
    from ccmc_lite.ccmc import random_chain, zero_diagonal

    P = zero_diagonal(random_chain(3, seed=0))
    with pytest.raises(ValueError, match="undefined"):
        ccmc_distribution(P, [0, 0])
    with pytest.raises(ValueError, match="data row 0 has positive weight"):
        log_likelihood(P, prompt_data([[0, 0], [0, 1]], [0, 1], 3))
    with pytest.raises(ValueError, match=r"undefined.*prompt 0"):
        positional_ccmc_distribution(P, [0, 0], torch.ones(2), torch.ones(3), torch.ones(2, 3))
    # a next token of probability zero under a defined transition is -inf, as documented
    assert float(log_likelihood(P, prompt_data([[0, 1]], [1], 3))) == float("-inf")
