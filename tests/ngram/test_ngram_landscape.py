"""Tests for ccmc_lite.ngram.landscape (Varre et al. 2025, Lemma 3.1, Prop. 3.2, Thm. 4.2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ccmc_lite.ngram import (
    NGramTask,
    SimplifiedTransformer,
    SuffixModel,
    decay_fits,
    exact_population_gradient,
    flat_gradient,
    gradient_blocks,
    gradient_norm,
    lemma31_gradient,
    load_parameters,
    next_token_loss,
    sample_batch,
    sample_transitions,
    sample_urn,
    sequence_law,
    statistical_term,
    suffix_law,
    theta_star,
    unmatched_mass,
)


def test_next_token_loss_eps_and_dropping():
    p = torch.tensor([[0.5, 0.5, 0.0]])
    y = torch.tensor([[0.4, 0.4, 0.2]])
    dropped = next_token_loss(p, y, eps=0.0)
    assert float(dropped) == pytest.approx(0.8 * math.log(2))
    clamped = next_token_loss(p, y, eps=1e-8)
    assert float(clamped) == pytest.approx(0.8 * math.log(2) - 0.2 * math.log(1e-8), rel=1e-6)
    with pytest.raises(ValueError, match="eps"):
        next_token_loss(p, y, eps=-1.0)
    with pytest.raises(ValueError, match="shape"):
        next_token_loss(p, y[:, :2])


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_lemma31_residual_score_form_equals_autograd(seed):
    torch.manual_seed(seed)
    m = SimplifiedTransformer(4, 10, 2, init_scale=2.0).double()
    with torch.no_grad():
        m.A1.normal_()
    x, y = sample_urn(NGramTask(S=4, n=3, T=10), (32,), seed=seed)
    g1 = flat_gradient(m, x, y.double(), eps=0.0)
    g2 = lemma31_gradient(m, x, y.double())
    torch.testing.assert_close(g1, g2, atol=1e-10, rtol=1e-8)


def test_unigram_point_is_exactly_stationary():
    """θ*^1 has Q2 = K2 = 0: every score vanishes, so the gradient is exactly zero."""
    b = sample_batch(NGramTask(S=5, n=3, T=16), 256, seed=0)
    m = SimplifiedTransformer(5, 16, 2).double()
    load_parameters(m, theta_star(1, S=5, T=16, n_heads=2, c=5.0))
    g = gradient_norm(m, b.tokens, b.target)
    assert g.naive == 0.0 and g.unbiased_sq == 0.0


def test_gradient_norm_halves_are_consistent():
    b = sample_batch(NGramTask(S=3, n=2, T=12), 512, seed=1)
    torch.manual_seed(0)
    m = SimplifiedTransformer(3, 12, 1).double()
    g = gradient_norm(m, b.tokens, b.target, chunk=100)
    full = flat_gradient(m, b.tokens, b.target).norm()
    assert g.naive == pytest.approx(float(full), rel=1e-8)
    assert g.estimate <= g.naive + 1e-12
    with pytest.raises(ValueError, match="2 sequences"):
        gradient_norm(m, b.tokens[:1], b.target[:1])


@pytest.mark.parametrize("L", [0, 1, 2])
def test_prop32_suffix_model_is_stationary_at_the_suffix_conditional(L):
    """Prop. 3.2: a model whose score depends on the last L tokens is stationary when it
    predicts p(x_{T+1} | last L tokens), although the true law depends on 2 tokens."""
    S, T = 3, 6
    P = sample_transitions(NGramTask(S=S, n=3, T=T), (1,), seed=4)[0]
    tokens, prob, nxt = sequence_law(P, T)
    assert float(prob.sum()) == pytest.approx(1.0)
    m = SuffixModel(S, L)
    target = suffix_law(tokens, prob, nxt, S, L)
    with torch.no_grad():
        m.W.copy_(torch.log(target))
    g = exact_population_gradient(m, tokens, prob, nxt)
    assert float(g.abs().max()) < 1e-12
    with torch.no_grad():
        m.W.add_(0.3 * torch.randn_like(m.W))
    assert float(exact_population_gradient(m, tokens, prob, nxt).abs().max()) > 1e-3


def test_statistical_term_decreases_with_T():
    stats = []
    for T in (16, 64):
        b = sample_batch(NGramTask(S=3, n=3, T=T, alpha=1.0), 3000, seed=0)
        stats.append(statistical_term(b, 2))
    assert stats[1] < 0.5 * stats[0]


def test_gradient_at_theta_star_shrinks_as_T_grows():
    """Thm. 4.2 in a regime where the statistical term is small (S = 3, α = 5): at every c the
    gradient is smaller for longer sequences. (Its fall with c, which the e^{-c} term predicts,
    is within the sampling noise at these sizes: Part III ch. 2 shows it is not resolved.)"""
    norms = {}
    for T in (64, 256):
        b = sample_batch(NGramTask(S=3, n=3, T=T, alpha=5.0), 1024, seed=0)
        m = SimplifiedTransformer(3, T, 2).double()
        for c in (4.0, 8.0):
            load_parameters(m, theta_star(2, S=3, T=T, n_heads=2, c=c))
            norms[T, c] = gradient_norm(m, b.tokens, b.target).naive
    assert norms[256, 4.0] < norms[64, 4.0]
    assert norms[256, 8.0] < norms[64, 8.0]


def test_sequence_law_stationary_start_and_limits():
    P = sample_transitions(NGramTask(S=2, n=2, T=4), (1,), seed=0)[0]
    tokens, prob, _nxt = sequence_law(P, 4, start="stationary")
    assert tokens.shape == (16, 4) and float(prob.sum()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="enumerate"):
        sequence_law(sample_transitions(NGramTask(S=5, n=2, T=20), (1,), seed=0)[0], 20)


def test_gradient_blocks_match_the_flat_gradient():
    b = sample_batch(NGramTask(S=3, n=3, T=10), 64, seed=2)
    m = SimplifiedTransformer(3, 10, 2).double()
    load_parameters(m, theta_star(2, S=3, T=10, n_heads=2, c=6.0))
    blocks = gradient_blocks(m, b.tokens, b.target)
    assert set(blocks) == {"A1", "V1", "Q2", "K2"}
    total = math.sqrt(sum(v**2 for v in blocks.values()))
    assert total == pytest.approx(float(flat_gradient(m, b.tokens, b.target).norm()), rel=1e-10)


def test_decay_fits_tells_power_law_from_exponential():
    T = np.array([8.0, 16, 32, 64, 128])
    power = decay_fits(T, 3.0 * T**-1.0)
    assert power["power"][0] == pytest.approx(1.0) and power["power"][1] < 1e-12
    assert power["exponential"][1] > 0.1
    expo = decay_fits(T, 2.0 * np.exp(-0.05 * T))
    assert expo["exponential"][0] == pytest.approx(0.05) and expo["exponential"][1] < 1e-12
    assert expo["power"][1] > 0.1
    with pytest.raises(ValueError):
        decay_fits(T[:2], [1.0, 0.5])
    with pytest.raises(ValueError):
        decay_fits(T, -T)


def test_unmatched_mass_by_hand():
    from ccmc_lite.ngram import NGramBatch

    # S = 3; the current 1-history is the last token, 0 in both sequences.
    # [1, 0, 1, 2, 0]: "0" was followed by 1 -> present tokens 0, 2 are suppressed (0.2 + 0.5)
    # [0, 2, 1, 2, 0]: "0" was followed by 2 -> present tokens 0, 1 are suppressed (0.2 + 0.3)
    P = torch.full((2, 3, 3), 1 / 3, dtype=torch.float64)
    tokens = torch.tensor([[1, 0, 1, 2, 0], [0, 2, 1, 2, 0]])
    law = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    batch = NGramBatch(tokens=tokens, next_probs=law.expand(2, 5, 3).clone(), transitions=P)
    m = unmatched_mass(batch, 2)
    assert torch.allclose(m, torch.tensor([0.7, 0.5], dtype=torch.float64))
    with pytest.raises(ValueError):
        unmatched_mass(batch, 1)
