"""Tests for ccmc_lite.markov.landscape.

Constructions, exact losses and Hessians (Makkuva et al. 2024).
"""

from __future__ import annotations

import math

import pytest
import sympy as sp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ccmc_lite.markov import (
    MarkovTransformer,
    appendix_d_logits,
    binary_kernel,
    binary_unigram_hessian,
    entropy_rate,
    fit_appendix_d,
    gauge_restrict,
    layer_norm_unigram_hessian,
    loss_plane,
    low_rank_summary,
    population_hessian,
    population_loss,
    random_kernel,
    symbolic_unigram_hessian,
    symmetric_kernel,
    symmetric_threshold,
    theta_pi,
    theta_star,
    unigram_curvature,
    unigram_entropy,
    unigram_hessian,
    unigram_inputs,
)
from ccmc_lite.markov.landscape import _param_layout

prob = st.floats(min_value=0.05, max_value=0.95)


def _model(**kw):
    torch.manual_seed(kw.pop("seed", 0))
    return MarkovTransformer(**kw).double()


@pytest.mark.parametrize(("p", "q"), [(0.2, 0.3), (0.4, 0.6), (0.5, 0.8), (0.9, 0.7)])
@pytest.mark.parametrize("tied", [True, False])
def test_theta_star_reaches_entropy_rate_with_zero_gradient(p, q, tied):
    P = binary_kernel(p, q)
    star = theta_star(_model(K=2, d=3, N=4, tied=tied), p, q)
    loss = population_loss(star, P, method="enumerate")
    loss.backward()
    assert abs(float(loss.detach()) - float(entropy_rate(P))) < 1e-12
    assert max(float(t.grad.abs().max()) for t in star.parameters()) < 1e-12


def test_theta_star_rejects_unsupported_models():
    with pytest.raises(ValueError, match="binary"):
        theta_star(MarkovTransformer(K=3), 0.2, 0.3)
    with pytest.raises(ValueError, match="layer norm"):
        theta_star(MarkovTransformer(K=2, layer_norm=True), 0.2, 0.3)
    with pytest.raises(ValueError, match="FF"):
        theta_star(MarkovTransformer(K=2, feed_forward=False), 0.6, 0.7)
    with pytest.raises(ValueError, match="q"):
        theta_star(MarkovTransformer(K=2), 0.2, 1.3)
    with pytest.raises(TypeError, match="model"):
        theta_star("model", 0.2, 0.3)


@pytest.mark.parametrize("P", [binary_kernel(0.5, 0.8), symmetric_kernel(3, 0.7)])
def test_theta_pi_predicts_the_unigram(P):
    point = theta_pi(_model(K=P.shape[0], d=2, N=3, init_std=0.5), P)
    loss = population_loss(point, P, method="enumerate")
    loss.backward()
    assert abs(float(loss.detach()) - float(unigram_entropy(P))) < 1e-12
    assert max(float(t.grad.abs().max()) for t in point.parameters()) < 1e-12


def test_population_loss_methods_agree_and_validate():
    P = binary_kernel(0.3, 0.4)
    point = theta_pi(_model(K=2, d=3, N=5), P)
    with torch.no_grad():
        point.e.normal_()
    a = population_loss(point, P, method="current")
    b = population_loss(point, P, method="enumerate")
    assert abs(float(a.detach()) - float(b.detach())) < 1e-12
    with pytest.raises(ValueError, match="attention"):
        population_loss(_model(K=2, d=2, N=3), P, method="current")
    with pytest.raises(ValueError, match="max_sequences"):
        population_loss(_model(K=2, d=2, N=20), P)
    with pytest.raises(ValueError, match="K=3"):
        population_loss(point, symmetric_kernel(3, 0.5))
    with pytest.raises(ValueError, match="method"):
        population_loss(point, P, method="exact")


@pytest.mark.parametrize("tied", [True, False])
def test_binary_hessian_matches_autograd(tied):
    P = binary_kernel(0.5, 0.8)
    m = _model(K=2, d=2, N=3, tied=tied)
    with torch.no_grad():
        m.pos.normal_()
    point = theta_pi(m, P)
    H, layout = population_hessian(point, P, method="enumerate")
    where = {n: sl for n, sl, _ in layout}
    names = ["b", "e"] if tied else ["b", "a", "e"]
    idx = torch.cat([torch.arange(where[n].start, where[n].stop) for n in names])
    assert torch.allclose(
        H[idx][:, idx], binary_unigram_hessian(0.5, 0.8, point.pos, tied=tied), atol=1e-12
    )
    mask = torch.ones(H.shape[0], dtype=torch.bool)
    mask[idx] = False
    assert float(H[mask].abs().max()) < 1e-12  # beta rows vanish


@pytest.mark.parametrize("tied", [True, False])
def test_kstate_hessian_matches_autograd(tied):
    P = random_kernel(3, seed=7)
    m = _model(K=3, d=2, N=2, tied=tied)
    with torch.no_grad():
        m.pos.normal_()
    point = theta_pi(m, P)
    names = ["b", "E"] if tied else ["b", "A", "E"]
    H, _ = population_hessian(point, P, names, method="enumerate")
    assert torch.allclose(H, unigram_hessian(P, point.pos, tied=tied), atol=1e-12)


@pytest.mark.parametrize("tied", [True, False])
def test_kstate_hessian_with_ff_layer_matches_autograd(tied):
    P = random_kernel(3, seed=8)
    point = theta_pi(_model(K=3, d=3, N=4, tied=tied, init_std=0.6), P)
    with torch.no_grad():
        point.blocks[0].W_2.normal_(0.0, 0.6)  # FF on, attention off
    q, M = unigram_inputs(point)
    names = ["b", "E"] if tied else ["b", "A", "E"]
    H, _ = population_hessian(point, P, names)
    assert torch.allclose(H, unigram_hessian(P, q, tied=tied, ff_jacobian=M), atol=1e-12)


def test_unigram_inputs_at_theta_pi_and_errors():
    point = theta_pi(_model(K=3, d=2, N=4), symmetric_kernel(3, 0.5))
    q, M = unigram_inputs(point)
    assert torch.allclose(q, point.pos.detach()) and torch.allclose(M, torch.eye(2, dtype=M.dtype))
    with pytest.raises(ValueError, match="attention"):
        unigram_inputs(_model(K=3, d=2, N=4))
    with pytest.raises(ValueError, match="ff_jacobian"):
        unigram_hessian(symmetric_kernel(3, 0.5), point.pos, ff_jacobian=torch.eye(3))


@given(prob, prob, st.integers(1, 4), st.integers(2, 6), st.integers(0, 1000))
@settings(max_examples=40, deadline=None)
def test_schur_complement_is_switching_term_plus_covariance(p, q, d, N, seed):
    pos = torch.randn(N, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    H = binary_unigram_hessian(p, q, pos) / (p * q / (p + q) ** 2)
    schur = H[1:, 1:] - torch.outer(H[1:, 0], H[0, 1:])
    cov = torch.cov(pos.T, correction=0).reshape(d, d)
    assert torch.allclose(
        schur, 2 * (p + q - 1) * torch.eye(d, dtype=torch.float64) + cov, atol=1e-10
    )


@given(prob, prob)
def test_binary_curvature_is_switching_factor(p, q):
    pi0, pi1 = q / (p + q), p / (p + q)
    curv = unigram_curvature(binary_kernel(p, q))
    assert math.isclose(float(curv[0]), 2 * pi0 * pi1 * (p + q - 1), abs_tol=1e-12)


@given(st.integers(2, 9), prob)
def test_symmetric_kernel_threshold(K, p):
    curv = unigram_curvature(symmetric_kernel(K, p))
    expected = (p * K / (K - 1) - 1) / K
    assert torch.allclose(curv, torch.full((K - 1,), expected, dtype=torch.float64), atol=1e-12)
    if abs(expected) > 1e-12:  # at p = p*(K) the curvature is 0 up to rounding
        assert (float(curv[0]) > 0) == (p > symmetric_threshold(K))


def test_symmetric_threshold_values():
    assert symmetric_threshold(2) == 0.5 and math.isclose(symmetric_threshold(5), 0.8)
    with pytest.raises(ValueError, match="K"):
        symmetric_threshold(1)


@given(prob, prob)
@settings(max_examples=20)
def test_untied_hessian_is_indefinite_off_the_switching_line(p, q):
    if abs(p + q - 1) < 0.05:
        return
    pos = 0.02 * torch.randn(16, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    eig = torch.linalg.eigvalsh(binary_unigram_hessian(p, q, pos, tied=False))
    assert eig[0] < 0 < eig[-1]


def test_symbolic_hessian_equals_formula_k2():
    derived, formula, symbols = symbolic_unigram_hessian(2, d=1, N=2)
    diff = (derived - formula).applyfunc(lambda e: sp.cancel(sp.expand(e)))
    assert diff == sp.zeros(*diff.shape)
    assert len(symbols["coords"]) == 4


def test_gauge_restrict_removes_flat_directions():
    P = symmetric_kernel(3, 0.9)
    H = unigram_hessian(P, torch.zeros(4, 2, dtype=torch.float64))
    assert float(torch.linalg.eigvalsh(H)[0]) == pytest.approx(0.0, abs=1e-12)  # flat
    Hs = gauge_restrict(H, 3, 2)
    assert Hs.shape == (6, 6) and float(torch.linalg.eigvalsh(Hs)[0]) > 0  # p > 2/3: minimum
    with pytest.raises(ValueError, match="H"):
        gauge_restrict(H, 3, 3)


def test_param_layout_and_unknown_names():
    m = MarkovTransformer(K=2, d=3, N=4)
    layout = _param_layout(m, ["b", "e"])
    assert layout[0][1] == slice(0, 1) and layout[1][1] == slice(1, 4)
    with pytest.raises(ValueError, match="unknown parameter"):
        _param_layout(m, ["a"])


def test_loss_plane_centre_and_validation():
    P = binary_kernel(0.5, 0.8)
    point = theta_pi(_model(K=2, d=2, N=6), P)
    v = torch.ones(2, dtype=torch.float64)
    Z = loss_plane(point, P, [{"e": v}, {"b": torch.tensor(1.0)}], [-0.5, 0.0, 0.5], [0.0, 0.3])
    assert Z.shape == (3, 2)
    assert abs(float(Z[1, 0]) - float(unigram_entropy(P))) < 1e-12
    assert float(Z[0, 0]) > float(Z[1, 0]) and float(Z[2, 0]) > float(Z[1, 0])  # p+q>1: bowl
    with pytest.raises(ValueError, match="unknown parameter"):
        loss_plane(point, P, [{"zz": v}, {"b": torch.tensor(1.0)}], [0.0], [0.0])
    with pytest.raises(ValueError, match="shape"):
        loss_plane(point, P, [{"e": torch.ones(3)}, {"b": torch.tensor(1.0)}], [0.0], [0.0])


def test_appendix_d_formula_reproduces_paper_numbers():
    l1, l0 = appendix_d_logits(0.3618, -0.1539, 0.3264, -0.1229, 5, d=4, r=16)
    assert abs(l1 - 0.8191) < 1e-3 and abs(l0 + 1.3897) < 1e-3
    assert abs(1 / (1 + math.exp(-l1)) - 0.694) < 1e-3
    with pytest.raises(ValueError, match="beta"):
        appendix_d_logits(0.3, -0.1, 0.3, 0.0, 17, d=4, r=16)


def test_fit_appendix_d_recovers_a_planted_low_rank_model():
    m = MarkovTransformer(K=2, d=4, N=6, ff_width=8).double()
    v = torch.tensor([1.0, -1, 1, 1], dtype=torch.float64)
    w = torch.tensor([1.0, 1, -1, 1, -1, -1, 1, -1], dtype=torch.float64)
    with torch.no_grad():
        m.e.copy_(0.36 * v)
        m.pos.copy_(-0.15 * v.expand(6, 4))
        m.blocks[0].W_1.copy_(0.33 * torch.outer(w, v))
        m.blocks[0].W_2.copy_(m.blocks[0].W_1.T)
        m.b.fill_(-0.12)
    fit = fit_appendix_d(m)
    assert fit["e"] == pytest.approx(0.36) and fit["p"] == pytest.approx(-0.15)
    assert fit["w1"] == pytest.approx(0.33) and fit["W2_vs_W1T"] == pytest.approx(1.0)
    assert fit["W1_rank1"] == pytest.approx(1.0) and fit["beta"] == 4
    summary = low_rank_summary(m)
    assert float(summary["W_1"][1]) < 1e-10
    with pytest.raises(ValueError, match="binary"):
        fit_appendix_d(MarkovTransformer(K=3))


@pytest.mark.parametrize("tied", [True, False])
def test_layer_norm_unigram_hessian_matches_autograd(tied):
    torch.manual_seed(4)
    model = MarkovTransformer(K=2, d=3, N=3, tied=tied, layer_norm=True).double()
    with torch.no_grad():
        model.pos.normal_()
        model.lnf_w.uniform_(0.5, 1.5)
        model.lnf_b.normal_()
    P = binary_kernel(0.3, 0.9)
    point = theta_pi(model, P)
    alpha = ["b", "e"] if tied else ["b", "a", "e"]
    names = [*alpha, "pos", "lnf_w", "lnf_b"]
    H, _ = population_hessian(point, P, names, method="current")
    k = 4 if tied else 7
    formula = layer_norm_unigram_hessian(
        0.3, 0.9, point.pos, tied=tied, weight=point.lnf_w, bias=point.lnf_b
    )
    assert torch.allclose(H[:k, :k], formula, atol=1e-12)
    assert H[:, k:].abs().max() < 1e-12  # β flat, no α-β coupling


def test_layer_norm_unigram_hessian_reduces_and_validates():
    pos = torch.randn(5, 4, dtype=torch.float64)
    H = layer_norm_unigram_hessian(0.6, 0.7, pos)
    ones = torch.cat([torch.zeros(1), torch.ones(4)]).double()
    assert (H @ ones).abs().max() < 1e-12  # e ∝ 1 is an exact symmetry at the initial gain
    assert torch.allclose(H, H.T)
    with pytest.raises(ValueError):
        layer_norm_unigram_hessian(0.6, 0.7, pos, weight=torch.ones(3))
    with pytest.raises(ValueError):
        layer_norm_unigram_hessian(1.5, 0.7, pos)
    with pytest.raises(ValueError):
        layer_norm_unigram_hessian(0.6, 0.7, torch.ones(4))
