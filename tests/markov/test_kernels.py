"""Tests for ccmc_lite.markov.kernels and ccmc_lite.core.chains.

Kernels, stationary laws, entropies, sampling.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ccmc_lite.core import torch_generator
from ccmc_lite.markov import (
    binary_entropy_rate,
    binary_kernel,
    check_kernel,
    empirical_transitions,
    entropy,
    entropy_rate,
    enumerate_chains,
    lag_one_covariance,
    mutual_information,
    random_kernel,
    sample_chains,
    stationary_distribution,
    symmetric_kernel,
    unigram_entropy,
)
from ccmc_lite.markov.kernels import _binary_entropy

prob = st.floats(min_value=0.02, max_value=0.98)


def test_binary_kernel_values():
    P = binary_kernel(0.2, 0.3)
    assert torch.allclose(P, torch.tensor([[0.8, 0.2], [0.3, 0.7]], dtype=torch.float64))


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_binary_kernel_rejects_p_and_q_outside_open_interval(bad):
    with pytest.raises(ValueError, match="p"):
        binary_kernel(bad, 0.3)
    with pytest.raises(ValueError, match="q"):
        binary_kernel(0.3, bad)


def test_symmetric_kernel_structure_and_k2_case():
    P = symmetric_kernel(4, 0.6)
    assert torch.allclose(P.diagonal(), torch.full((4,), 0.4, dtype=torch.float64))
    assert torch.allclose(P[0, 1:], torch.full((3,), 0.2, dtype=torch.float64))
    assert torch.allclose(symmetric_kernel(2, 0.3), binary_kernel(0.3, 0.3))


def test_symmetric_kernel_rejects_bad_k_and_p():
    with pytest.raises(ValueError, match="K"):
        symmetric_kernel(1, 0.5)
    with pytest.raises(ValueError, match="p"):
        symmetric_kernel(3, 1.0)


def test_random_kernel_is_reproducible_and_stochastic():
    a, b, c = random_kernel(5, seed=3), random_kernel(5, seed=3), random_kernel(5, seed=4)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.allclose(a.sum(1), torch.ones(5, dtype=torch.float64))
    assert bool((a > 0).all())


def test_check_kernel_rejects_non_stochastic_non_square_and_single_state():
    with pytest.raises(ValueError, match="row"):
        check_kernel([[0.5, 0.4], [0.3, 0.7]])
    with pytest.raises(ValueError, match="square"):
        check_kernel([[0.5, 0.5]])
    with pytest.raises(ValueError, match="K >= 2"):
        check_kernel([[1.0]])
    with pytest.raises(ValueError, match="non-negative"):
        check_kernel([[1.2, -0.2], [0.5, 0.5]])


@given(prob, prob)
def test_stationary_distribution_binary_formula(p, q):
    pi = stationary_distribution(binary_kernel(p, q))
    assert torch.allclose(pi, torch.tensor([q, p], dtype=torch.float64) / (p + q), atol=1e-12)


@given(st.integers(2, 6), st.integers(0, 10_000))
@settings(max_examples=30, deadline=None)
def test_stationary_distribution_is_invariant(K, seed):
    P = random_kernel(K, seed=seed)
    pi = stationary_distribution(P)
    assert torch.allclose(pi @ P, pi, atol=1e-10)
    assert abs(float(pi.sum()) - 1) < 1e-12


def test_stationary_distribution_batched_and_reducible():
    P = torch.stack([binary_kernel(0.2, 0.3), binary_kernel(0.5, 0.8)])
    assert stationary_distribution(P).shape == (2, 2)
    with pytest.raises(ValueError, match="unique stationary"):
        stationary_distribution(torch.eye(2))


def test_entropies_known_values():
    assert math.isclose(float(_binary_entropy(0.5)), math.log(2))
    assert math.isclose(float(entropy([0.25] * 4)), math.log(4))
    assert float(entropy([1.0, 0.0])) == 0.0


@given(prob, prob)
def test_entropy_rate_closed_form_and_mi(p, q):
    P = binary_kernel(p, q)
    assert math.isclose(float(entropy_rate(P)), binary_entropy_rate(p, q), abs_tol=1e-12)
    mi = float(mutual_information(P))
    assert mi >= -1e-12
    assert math.isclose(mi, float(unigram_entropy(P) - entropy_rate(P)), abs_tol=1e-12)


@given(prob)
def test_mutual_information_vanishes_on_switching_line(p):
    assert abs(float(mutual_information(binary_kernel(p, 1 - p)))) < 1e-12


@given(prob, prob)
def test_lag_one_covariance_binary(p, q):
    C = lag_one_covariance(binary_kernel(p, q))
    pi0, pi1 = q / (p + q), p / (p + q)
    assert math.isclose(float(C[1, 1]), pi0 * pi1 * (1 - p - q), abs_tol=1e-12)
    assert torch.allclose(C.sum(0), torch.zeros(2, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(C.sum(1), torch.zeros(2, dtype=torch.float64), atol=1e-12)


def test_sample_chains_shapes_and_reproducibility():
    P = binary_kernel(0.2, 0.3)
    x1 = sample_chains(P, 5, 7, generator=torch_generator(0))
    x2 = sample_chains(P, 5, 7, generator=torch_generator(0))
    assert x1.shape == (5, 7) and x1.dtype == torch.long and torch.equal(x1, x2)
    Ps = torch.stack([P, symmetric_kernel(2, 0.9)])
    assert sample_chains(Ps, 3, 4, generator=torch_generator(1)).shape == (2, 3, 4)
    assert sample_chains(P, 2, 1, generator=torch_generator(1)).shape == (2, 1)


def test_sample_chains_seed_is_a_fresh_generator_and_excludes_generator():
    P = binary_kernel(0.2, 0.3)
    x = sample_chains(P, 5, 7, seed=4)
    assert torch.equal(x, sample_chains(P, 5, 7, seed=4))
    assert torch.equal(x, sample_chains(P, 5, 7, generator=torch_generator(4)))
    assert not torch.equal(x, sample_chains(P, 5, 7, seed=5))
    with pytest.raises(ValueError, match="seed or generator, not both"):
        sample_chains(P, 5, 7, seed=4, generator=torch_generator(4))
    with pytest.raises(ValueError, match="seed"):
        sample_chains(P, 5, 7, seed=-1)
    with pytest.raises(TypeError, match="seed"):
        sample_chains(P, 5, 7, seed="4")


def test_sample_chains_statistics_match_kernel_and_stationary_law():
    P = symmetric_kernel(3, 0.45)
    x = sample_chains(P, 400, 200, generator=torch_generator(5))
    assert (empirical_transitions(x, 3) - P).abs().max() < 0.01
    freq = torch.bincount(x.flatten(), minlength=3).double() / x.numel()
    assert (freq - 1 / 3).abs().max() < 0.01
    # per-run kernels: the second run switches almost always
    Ps = torch.stack([binary_kernel(0.05, 0.05), binary_kernel(0.95, 0.95)])
    xs = sample_chains(Ps, 200, 50, generator=torch_generator(6))
    switch = (xs[..., 1:] != xs[..., :-1]).double().mean((1, 2))
    assert switch[0] < 0.1 and switch[1] > 0.9


def test_sample_chains_initial_law_and_bad_arguments():
    x = sample_chains(symmetric_kernel(3, 0.5), 50, 3, generator=torch_generator(0), init=[0, 0, 1])
    assert bool((x[:, 0] == 2).all())
    with pytest.raises(ValueError, match="init"):
        sample_chains(symmetric_kernel(3, 0.5), 5, 3, init=[0.5, 0.5])
    with pytest.raises(ValueError, match="T"):
        sample_chains(binary_kernel(0.2, 0.3), 5, 0)
    with pytest.raises(ValueError, match="n"):
        sample_chains(binary_kernel(0.2, 0.3), 0, 5)
    with pytest.raises(TypeError, match="generator"):
        sample_chains(binary_kernel(0.2, 0.3), 2, 5, generator=0)
    with pytest.raises(ValueError, match="row"):
        sample_chains([[0.5, 0.4], [0.3, 0.7]], 2, 5)


def test_enumerate_chains_probabilities():
    P = binary_kernel(0.2, 0.3)
    x, prob_ = enumerate_chains(P, 4)
    assert x.shape == (16, 4) and abs(float(prob_.sum()) - 1) < 1e-12
    # P(0, 0, 0, 0) = pi_0 (1 - p)^3
    assert math.isclose(float(prob_[0]), 0.6 * 0.8**3)
    with pytest.raises(ValueError, match="max_sequences"):
        enumerate_chains(P, 20, max_sequences=1000)


def test_empirical_transitions_small_example():
    x = torch.tensor([[0, 1, 1, 0, 0]])
    E = empirical_transitions(x, 2)
    assert torch.allclose(E, torch.tensor([[0.5, 0.5], [0.5, 0.5]], dtype=torch.float64))
    with pytest.raises(ValueError, match="x"):
        empirical_transitions(torch.tensor([[0, 3]]), 2)
