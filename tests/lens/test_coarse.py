"""Tests for ccmc_lite.lens.coarse: conditional entropies, coarse gaps and n-gram levels."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ccmc_lite.lens import coarse_gap, coarse_predictor, conditional_entropy, ngram_levels
from ccmc_lite.markov import (
    binary_kernel,
    entropy_rate,
    mutual_information,
    stationary_distribution,
    unigram_entropy,
)
from ccmc_lite.ngram import NGramTask, sample_transitions


def _random_joint(seed: int, n: int, s: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    J = rng.dirichlet(np.ones(n * s)).reshape(n, s)
    return torch.tensor(J)


def test_markov_chain_gap_is_the_mutual_information():
    # Makkuva et al. Remark 2: the unigram's excess loss is I(x_n; x_{n+1}).
    P = binary_kernel(0.5, 0.8)
    joint = stationary_distribution(P)[:, None] * P  # law of (x_n, x_{n+1})
    gap = coarse_gap(joint, groups=[0, 0])  # the statistic forgets x_n
    torch.testing.assert_close(gap, mutual_information(P))
    torch.testing.assert_close(conditional_entropy(joint, [0, 0]), unigram_entropy(P))
    torch.testing.assert_close(conditional_entropy(joint), entropy_rate(P))
    pred = coarse_predictor(joint, [0, 0])
    torch.testing.assert_close(pred, stationary_distribution(P).expand(2, 2))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 6), st.integers(2, 4), st.integers(1, 6))
def test_gap_is_nonnegative_and_zero_for_the_full_context(seed, n, s, n_groups):
    J = _random_joint(seed, n, s)
    groups = torch.tensor(np.random.default_rng(seed + 1).integers(0, n_groups, size=n))
    assert float(coarse_gap(J, groups)) >= -1e-12
    assert abs(float(coarse_gap(J, torch.arange(n)))) < 1e-12
    # coarser statistics lose more: merging all groups into one can only increase the gap
    assert (
        float(coarse_gap(J, torch.zeros(n, dtype=torch.long)))
        >= float(coarse_gap(J, groups)) - 1e-12
    )
    # merging groups pairwise (a coarser statistic) can only increase the gap
    assert float(coarse_gap(J, groups // 2)) >= float(coarse_gap(J, groups)) - 1e-12
    pred = coarse_predictor(J, groups)
    torch.testing.assert_close(pred.sum(1), torch.ones(n, dtype=torch.float64))
    # the gap is the excess cross-entropy of the best coarse predictor over H(y | c)
    cross = -float(torch.special.xlogy(J, pred).sum())
    assert abs(cross - float(conditional_entropy(J)) - float(coarse_gap(J, groups))) < 1e-10


def test_coarse_predictor_is_stationary_for_a_softmax_over_groups():
    # Prop. 3.2 / App. C.2 of Varre et al.: logits that depend only on s(c) have zero
    # population gradient exactly at q(y | s(c)).
    J = _random_joint(3, 6, 3)
    groups = torch.tensor([0, 1, 0, 2, 1, 2])
    theta = coarse_predictor(J, groups)[[0, 1, 3]].log().clone().requires_grad_(True)
    loss = -(J * torch.log_softmax(theta[groups], -1)).sum()
    (grad,) = torch.autograd.grad(loss, theta)
    assert float(grad.abs().max()) < 1e-12


def test_ngram_levels_first_order_chain_matches_markov():
    P = binary_kernel(0.3, 0.6)
    levels = ngram_levels(P, S=2, n=2)
    torch.testing.assert_close(levels, torch.stack([unigram_entropy(P), entropy_rate(P)]))


def test_ngram_levels_decrease_with_k():
    task = NGramTask(S=3, n=3, T=8, alpha=0.5)
    P = sample_transitions(task, (20,), seed=0).double()
    levels = ngram_levels(P, 3, 3)
    assert levels.shape == (20, 3)
    assert bool((levels[:, :-1] >= levels[:, 1:] - 1e-12).all())
    assert bool((levels[:, 0] <= np.log(3) + 1e-12).all())


@pytest.mark.parametrize(
    ("joint", "groups", "match"),
    [
        ([[0.5, 0.6]], None, "joint must sum to 1"),
        ([[-0.5, 1.5]], None, "non-negative"),
        ([[0.5, 0.5]], [0, 1], "one statistic value per context"),
        ([[0.5, 0.5]], [-1], "non-negative statistic ids"),
        ([0.5, 0.5], None, "joint must have 2 dimension"),
    ],
)
def test_bad_input(joint, groups, match):
    with pytest.raises(ValueError, match=match):
        conditional_entropy(joint, groups)


def test_ngram_levels_bad_input():
    with pytest.raises(ValueError, match="S must be >= 2"):
        ngram_levels(torch.ones(1, 1), S=1, n=2)
    with pytest.raises(ValueError, match="P must end with 2 axes of size S=3"):
        ngram_levels(binary_kernel(0.3, 0.6), S=3, n=2)
