"""Tests for ccmc_lite.ccmc.collapse (Ildiz et al. 2024, Sec. 5, Lemmas 5.2/5.3, Fig. 4/5)."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from ccmc_lite.ccmc import (
    binary_collapse_chain,
    ccmc_distribution,
    collapse_census,
    collapse_explorer,
    collapse_exponent,
    collapse_lower_bound,
    compare_decay_exponents,
    draw_collapse,
    explorer_chain,
    fixed_point,
    interior_rates,
    near_stability_boundary,
    plot_frequency_curves,
    plot_snapshots,
    predicted_decay_exponents,
    random_chain,
    running_frequencies,
    sample_trajectories,
    self_reinforcing_tokens,
    stable_fixed_points,
    stationary_of_reweighted,
    weak_frequency_exact,
    weak_weak_exponent,
    zero_diagonal,
)
from ccmc_lite.ccmc.collapse import _fit_decay_exponents
from ccmc_lite.teaching import loglog_fit


def test_binary_chain_and_exponents():
    P = binary_collapse_chain(0.2)
    torch.testing.assert_close(P, torch.tensor([[0.8, 0.2], [0.8, 0.2]], dtype=torch.float64))
    assert collapse_exponent(0.2) == pytest.approx(0.75)
    assert collapse_exponent(1 / 3) == pytest.approx(0.5)
    assert weak_weak_exponent(1 / 3) == pytest.approx(0.0, abs=1e-12)
    assert weak_weak_exponent(0.4) == pytest.approx(1 / 3)
    assert weak_weak_exponent(0.3) < 0
    np.testing.assert_allclose(collapse_exponent([0.1, 0.25]), [8 / 9, 2 / 3])
    assert collapse_exponent(0.5) == 0.0
    for bad in (0.0, 1.0, float("nan")):
        with pytest.raises(ValueError, match="p must lie in"):
            collapse_exponent(bad)
        with pytest.raises(ValueError, match="p must"):
            binary_collapse_chain(bad)
    for bad in (0.6, [0.2, 0.7]):  # p > 1/2: the weak token would be token 0
        with pytest.raises(ValueError, match=r"p must lie in \(0, 1/2\].*p=.*0\.[67]"):
            collapse_exponent(bad)


def test_random_chain_and_zero_diagonal():
    P = random_chain(5, seed=0)
    torch.testing.assert_close(P.sum(1), torch.ones(5, dtype=torch.float64))
    assert torch.equal(P, random_chain(5, seed=0))
    assert not torch.equal(P, random_chain(5, seed=1))
    Z = zero_diagonal(P)
    assert bool((torch.diagonal(Z) == 0).all())
    torch.testing.assert_close(Z.sum(1), torch.ones(5, dtype=torch.float64))
    # renormalising rows does not change the CCMC
    X = [0, 1, 2, 3, 4, 2]
    unnormalised = P.clone().fill_diagonal_(0)
    manual = torch.tensor([1.0, 1.0, 2.0, 1.0, 1.0], dtype=torch.float64) * unnormalised[2]
    torch.testing.assert_close(ccmc_distribution(Z, X), manual / manual.sum())
    with pytest.raises(ValueError, match="off-diagonal"):
        zero_diagonal(torch.eye(3))


def test_running_frequencies():
    F = running_frequencies([0, 1, 1, 2], 3)
    torch.testing.assert_close(
        F,
        torch.tensor(
            [[1, 0, 0], [1 / 2, 1 / 2, 0], [1 / 3, 2 / 3, 0], [1 / 4, 1 / 2, 1 / 4]],
            dtype=torch.float64,
        ),
    )
    assert running_frequencies(torch.zeros(3, 7, dtype=torch.long), 2).shape == (3, 7, 2)


def test_self_reinforcing_and_predicted_exponents():
    P = torch.tensor([[0.5, 0.3, 0.2], [0.4, 0.3, 0.3], [0.1, 0.2, 0.7]], dtype=torch.float64)
    assert self_reinforcing_tokens(P) == [0, 2]
    alpha = predicted_decay_exponents(P, 0)
    assert math_isnan(alpha[0])
    torch.testing.assert_close(alpha[1:], torch.tensor([1 - 0.3 / 0.5, 1 - 0.2 / 0.5]).double())
    # K = 2: the conjecture reduces to Lemma 5.3's q
    a2 = predicted_decay_exponents(binary_collapse_chain(0.3), 0)
    assert float(a2[1]) == pytest.approx(collapse_exponent(0.3))
    with pytest.raises(ValueError, match="m must be"):
        predicted_decay_exponents(P, [0.0, 0.0, 0.0])
    # an unstable vertex: token 1 prefers 0, so token 0 has a negative exponent (grows)
    assert float(predicted_decay_exponents(P, 1)[0]) < 0
    # local exponents at a nearly collapsed m approach the fixed-point ones
    near = predicted_decay_exponents(P, [1 - 2e-6, 1e-6, 1e-6], losers=[1, 2])
    torch.testing.assert_close(near[1:], alpha[1:], atol=1e-5, rtol=0)


def test_fixed_point_exponents_for_a_two_token_set():
    P = torch.tensor([[0.1, 0.6, 0.3], [0.7, 0.1, 0.2], [0.3, 0.3, 0.4]], dtype=torch.float64)
    m_star = fixed_point(P, [0.5, 0.5, 0.0])
    lam = sum(m_star[i] * P[i, 2] / (m_star[0] * P[i, 0] + m_star[1] * P[i, 1]) for i in (0, 1))
    alpha = predicted_decay_exponents(P, m_star)
    assert float(alpha[2]) == pytest.approx(1 - float(lam))
    assert bool(torch.isnan(alpha[:2]).all())


def test_fit_decay_exponents_recovers_power_laws():
    t = torch.tensor([100.0, 1000.0, 10000.0], dtype=torch.float64)
    freqs = torch.stack([t**-0.5, t**-0.25, 1 - t**-0.5 - t**-0.25], -1)[None].repeat(3, 1, 1)
    slopes = _fit_decay_exponents(t, freqs, t_min=100)
    torch.testing.assert_close(slopes[:2], torch.tensor([-0.5, -0.25], dtype=torch.float64))
    with pytest.raises(ValueError, match="at least two"):
        _fit_decay_exponents(t, freqs, t_min=5000)
    with pytest.raises(ValueError, match="strictly positive"):
        _fit_decay_exponents(t, torch.zeros(1, 3, 2), t_min=0)


def math_isnan(x) -> bool:
    return bool(torch.isnan(torch.as_tensor(x)))


def test_stationary_and_fixed_point():
    P = torch.tensor([[0.1, 0.9], [0.8, 0.2]], dtype=torch.float64)
    m = torch.tensor([0.3, 0.7], dtype=torch.float64)
    mu = stationary_of_reweighted(P, m)
    Pm = P * m[None, :]
    Pm = Pm / Pm.sum(1, keepdim=True)
    torch.testing.assert_close(mu @ Pm, mu)
    # the zero-diagonal-like chain settles on a two-token fixed point m = mu(m)
    m_star = fixed_point(P, [0.5, 0.5])
    torch.testing.assert_close(stationary_of_reweighted(P, m_star), m_star, atol=1e-8, rtol=0)
    e0 = fixed_point(P, [1.0, 0.0], steps=5)
    torch.testing.assert_close(e0, torch.tensor([1.0, 0.0], dtype=torch.float64))


def test_lemma_5_3_decay_rate_small_p():
    """E[m(X_t)_2] decays like t^{-q}; for p = 0.2 the fitted slope is within 0.05 of -q."""
    p, R, T = 0.2, 3000, 3000
    times = np.unique(np.geomspace(100, T, 15).astype(int))
    tr = sample_trajectories(
        binary_collapse_chain(p), [0, 1], T, seed=0, n_traj=R, keep_tokens=False, record_at=times
    )
    fit = loglog_fit(torch.as_tensor(times + 2.0), tr.frequencies[:, :, 1].mean(0))
    assert abs(fit.slope + collapse_exponent(p)) < 0.05


def test_lemma_5_2_every_token_keeps_appearing():
    P = random_chain(4, seed=2)
    tr = sample_trajectories(P, [0, 1, 2, 3], 3000, seed=0, n_traj=50, record_at=[300, 3000])
    new = tr.counts[:, 1] - tr.counts[:, 0]  # visits between t = 300 and t = 3000
    # lower bound of the proof: P(token k at t) >= min_i P[i, k] / t  -> expected >= that sum
    lower = torch.min(P, 0).values * float(np.log(3000 / 300)) * 0.5
    assert bool((new.mean(0) >= lower).all())


def test_plots_and_explorer():
    fig, (a, b) = plt.subplots(1, 2)
    plot_frequency_curves(a, running_frequencies([0, 1, 1, 0, 1], 2), logx=True)
    assert a.get_xscale() == "log" and len(a.lines) == 2
    plot_snapshots(b, torch.tensor([0, 1, 1, 0, 1, 1]), [0, 2], window=3)
    assert len(b.texts) == 6
    plt.close(fig)
    fig = draw_collapse(random_chain(3, seed=0), [0, 1, 2], 40, seed=0)
    assert len(fig.axes) == 2
    plt.close(fig)
    assert explorer_chain(3, "custom", seed=0, custom="1,1; 1,3").tolist() == [
        [0.5, 0.5],
        [0.25, 0.75],
    ]
    assert bool((torch.diagonal(explorer_chain(4, "zero-diagonal", seed=0)) == 0).all())
    with pytest.raises(ValueError, match="square"):
        explorer_chain(3, "custom", seed=0, custom="1,2,3; 1,2,3")
    with pytest.raises(ValueError, match="custom must be rows"):
        explorer_chain(3, "custom", seed=0, custom="a,b; c,d")
    with pytest.raises(ValueError, match="mode"):
        explorer_chain(3, "other", seed=0)
    widget = collapse_explorer()
    assert len(widget.children) >= 6


def test_compare_decay_exponents_on_exact_power_laws():
    P = torch.tensor([[0.5, 0.3, 0.2], [0.4, 0.3, 0.3], [0.1, 0.2, 0.7]], dtype=torch.float64)
    alpha = predicted_decay_exponents(P, 0)
    t = torch.tensor([1e3, 1e4, 1e5], dtype=torch.float64)
    m1, m2 = t ** -alpha[1], t ** -alpha[2]
    freqs = torch.stack([1 - m1 - m2, m1, m2], -1)[None]
    rows = compare_decay_exponents(freqs, t, P, 0, t_min=1e3)
    assert [r[0] for r in rows] == [1, 2]
    for j, measured, conjectured, local in rows:
        assert measured == pytest.approx(conjectured, abs=1e-9)
        assert conjectured == pytest.approx(-float(alpha[j]))
        assert abs(local - conjectured) < 0.05  # the window is close to the vertex


def test_weak_frequency_exact_matches_monte_carlo():
    """The dynamic program over the weak count agrees with simulated trajectories."""
    p, T, R = 0.3, 150, 6000
    exact = weak_frequency_exact(p, T)[0]
    assert np.isnan(exact[:2]).all() and exact[2] == 0.5
    times = np.array([10, 50, 150])
    sim = sample_trajectories(
        binary_collapse_chain(p), [0, 1], T, seed=0, n_traj=R, keep_tokens=False, record_at=times
    )
    weak = sim.frequencies[..., 1].numpy()  # (R, C)
    se = weak.std(0) / np.sqrt(R)
    np.testing.assert_array_less(np.abs(weak.mean(0) - exact[times + 2]), 4 * se + 1e-12)
    # other prompts: a longer one with two weak tokens
    ex2 = weak_frequency_exact([0.2, 0.4], 50, prompt=[0, 1, 1, 0, 0])
    assert ex2.shape == (2, 56) and ex2[0, 5] == pytest.approx(0.4)
    for bad in ([0, 0], [0, 2, 1], []):
        with pytest.raises(ValueError, match="prompt must"):
            weak_frequency_exact(0.2, 10, prompt=bad)
    with pytest.raises(ValueError, match="p must lie in"):
        weak_frequency_exact(0.7, 10)


def test_weak_odds_exact_matches_monte_carlo_and_exceeds_the_plug_in():
    """statistic="odds" is E[S/(L-S)] (eq. (52)); by Jensen it is >= E[m]/(1-E[m])."""
    p, T, R = 0.4, 150, 6000
    odds = weak_frequency_exact(p, T, statistic="odds")[0]
    freq = weak_frequency_exact(p, T)[0]
    assert np.isnan(odds[:2]).all() and odds[2] == 1.0  # prompt [0, 1]: odds 1/1
    times = np.array([10, 50, 150])
    sim = sample_trajectories(
        binary_collapse_chain(p), [0, 1], T, seed=1, n_traj=R, keep_tokens=False, record_at=times
    )
    weak = sim.frequencies[..., 1].numpy()  # (R, C)
    sim_odds = weak / (1 - weak)
    se = sim_odds.std(0) / np.sqrt(R)
    np.testing.assert_array_less(np.abs(sim_odds.mean(0) - odds[times + 2]), 4 * se + 1e-12)
    plug_in = freq[3:] / (1 - freq[3:])
    assert (odds[3:] >= plug_in).all() and odds[-1] > 1.5 * plug_in[-1]  # a real Jensen gap
    # a prompt with two weak and three strong tokens starts at odds 2/3
    assert weak_frequency_exact(0.2, 5, prompt=[0, 1, 1, 0, 0], statistic="odds")[0, 5] == (
        pytest.approx(2 / 3)
    )
    with pytest.raises(ValueError, match="statistic"):
        weak_frequency_exact(0.2, 10, statistic="mean")


def test_collapse_lower_bound_and_the_lemma_53_counterexample():
    """The linearised recursion is a lower bound; the exact mean exceeds t^(-q)."""
    ps = np.array([0.1, 0.2, 0.3])
    T = 2000
    exact = weak_frequency_exact(ps, T)
    t = np.arange(2, T + 3)
    lower = collapse_lower_bound(ps[:, None], t[None, :])
    assert (exact[:, 2:] >= lower - 1e-12).all()
    # the Gamma form equals the product started at the prompt length
    q = collapse_exponent(0.2)
    prod = 0.5 * np.prod(1 - q / np.arange(3, 101))
    assert collapse_lower_bound(0.2, 100) == pytest.approx(prod, rel=1e-10)
    # Lemma 5.3 claims E[m_t] < t^(-q) for large t; for the prompt [0, 1] it is false
    qs = collapse_exponent(ps)
    assert (exact[:, -1] * (T + 2) ** qs > 1.0).all()
    with pytest.raises(ValueError, match="t must be"):
        collapse_lower_bound(0.2, 1)
    with pytest.raises(ValueError, match="prompt_weak"):
        collapse_lower_bound(0.2, 10, prompt_length=2, prompt_weak=2)


def test_stable_fixed_points():
    """K = 2: only the strong vertex; random layers: the self-reinforcing vertices."""
    (S, m, alpha), *rest = stable_fixed_points(binary_collapse_chain(0.3))
    assert not rest and S == (0,)
    assert float(alpha[1]) == pytest.approx(collapse_exponent(0.3), abs=1e-9)
    P = random_chain(5, seed=3)
    vertices = [S[0] for S, _, _ in stable_fixed_points(P) if len(S) == 1]
    assert vertices == self_reinforcing_tokens(P)
    Z = zero_diagonal(P)
    found = stable_fixed_points(Z)
    assert found and all(len(S) >= 2 for S, _, _ in found)
    for S, m, alpha in found:
        torch.testing.assert_close(stationary_of_reweighted(Z, m), m, atol=1e-7, rtol=0)
        assert bool((alpha[[k for k in range(5) if k not in S]] > 0).all())
    with pytest.raises(ValueError, match="K=11"):
        stable_fixed_points(random_chain(11, seed=0))


def test_near_boundary_and_census():
    """Near the boundary every vertex is stable but only barely; the census runs per K."""
    P = random_chain(3, seed=1)
    Q = near_stability_boundary(P, 0.05)
    assert self_reinforcing_tokens(Q) == [0, 1, 2]
    alpha = predicted_decay_exponents(Q, 0)
    assert float(np.nanmin(alpha.numpy())) == pytest.approx(1 - 1 / 1.05)
    with pytest.raises(ValueError, match="delta"):
        near_stability_boundary(P, 0.0)
    layers = [binary_collapse_chain(0.1), Q, random_chain(4, seed=2)]
    rows = collapse_census(layers, 400, n_traj=50, seed=0)
    assert [r["K"] for r in rows] == [2, 3, 4]
    assert rows[0]["limits"] == [(0,)] and rows[0]["single"] == 1
    assert rows[0]["alpha_min"] == pytest.approx(collapse_exponent(0.1))
    assert rows[0]["near"] > 0.9 and rows[1]["alpha_min"] < 0.05
    assert rows[2]["final"].shape == (50, 4)
    with pytest.raises(ValueError, match="Ps"):
        collapse_census([], 10, n_traj=2, seed=0)


def test_collapse_census_limits_memory_not_length(monkeypatch):
    """The size guard counts what is allocated (K + K^2 counts per trajectory), not steps:
    the paper profile's long trajectories used to be refused."""
    from ccmc_lite.core import DEFAULT_LIMITS

    monkeypatch.setitem(DEFAULT_LIMITS, "elements", 100)
    rows = collapse_census([binary_collapse_chain(0.1)], 500, n_traj=4, seed=0)  # 4000 steps
    assert rows[0]["final"].shape == (4, 2)
    with pytest.raises(ValueError, match="len\\(Ps\\) \\* n_traj \\* K \\* K"):
        collapse_census([binary_collapse_chain(0.1)], 5, n_traj=30, seed=0)  # 120 counts


def test_interior_rates():
    """Negative at a stable interior fixed point; empty at a vertex; K = 2 analytic case."""
    Z = zero_diagonal(random_chain(6, seed=1))
    ((S, m, _),) = stable_fixed_points(Z)
    lam = interior_rates(Z, m)
    assert lam.shape == (len(S) - 1,) and (lam.real < 0).all()
    assert interior_rates(binary_collapse_chain(0.3), [1.0, 0.0]).shape == (0,)
    # K = 2 with P = [[0, 1], [1, 0]]: mu(m) = (1/2, 1/2) for every interior m -> rate -1
    swap = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    np.testing.assert_allclose(interior_rates(swap, [0.5, 0.5]).real, [-1.0], atol=1e-6)
    with pytest.raises(ValueError, match="m must sum to 1"):
        interior_rates(Z, [0.0] * 6)
    with pytest.raises(ValueError, match=r"m must have shape \(6,\)"):
        interior_rates(Z, [0.5, 0.5])


@pytest.mark.parametrize(
    ("p", "prompt"),
    [(0.1, [0, 1]), (0.2, [0, 1]), (0.3, [0, 0, 1]), (0.25, [0, 0, 1, 1]), (0.3, [0, 1, 1])],
)
def test_the_exact_program_converges_to_the_limit_constant(p, prompt):
    """t^q E[m_t] -> S0 Gamma(N0 - p/(1-p)) / Gamma(N0) (two Yule processes), monotonically."""
    import numpy as np

    from ccmc_lite import ccmc

    exact = ccmc.weak_frequency_exact(p, 6000, prompt=prompt)[0]
    q = ccmc.collapse_exponent(p)
    ts = np.array([750, 1500, 3000, 6000]) + len(prompt)
    scaled = ts**q * exact[ts]
    limit = ccmc.collapse_limit_constant(p, prompt_length=len(prompt), prompt_weak=int(sum(prompt)))
    gaps = np.abs(scaled - limit)
    assert np.all(np.diff(gaps) < 0), (scaled, limit)  # closer at every doubling of t
    assert gaps[-1] / limit < 0.03
    # the gap falls like a power of t: extrapolating the last three points lands near it
    r = (scaled[-1] - scaled[-2]) / (scaled[-2] - scaled[-3])
    assert abs(scaled[-1] + (scaled[-1] - scaled[-2]) * r / (1 - r) - limit) / limit < 0.01


def test_the_limit_constant_is_gamma_q_for_the_prompt_with_each_token_once():
    """For [0, 1]: Gamma(1 - p/(1-p)) = Gamma(q) > 1, so Lemma 5.3's bound fails (SymPy)."""
    import sympy as sp

    from ccmc_lite import ccmc

    p = sp.symbols("p", positive=True)
    q = (1 - 2 * p) / (1 - p)
    assert sp.simplify(1 - p / (1 - p) - q) == 0  # N0 - p_bar with N0 = 1 is q
    for pv in (0.05, 0.2, 0.35, 0.45, 0.499):
        c = ccmc.collapse_limit_constant(pv)
        assert c == pytest.approx(float(sp.gamma(q.subs(p, pv))), rel=1e-12) and c > 1
    assert ccmc.collapse_limit_constant(0.3, prompt_length=3, prompt_weak=1) < 1  # [0, 0, 1]
    with pytest.raises(ValueError, match="below 1/2"):
        ccmc.collapse_limit_constant(0.5)


@pytest.mark.parametrize("prompt", [(0, 1), (1, 0), (0, 1, 1), (0, 0, 1)])
def test_weak_weak_exact_equals_enumeration_of_all_continuations(prompt):
    """Every continuation of 6 tokens, weighted by eq. (48): the expected weak->weak count."""
    from ccmc_lite import ccmc

    def enumerate_all(p: float, length: int) -> list[float]:
        out = []
        for t in range(length + 1):
            total = 0.0
            for seq in itertools.product([0, 1], repeat=t):
                x, prob = list(prompt), 1.0
                for y in seq:
                    weak = sum(x) * p / (sum(x) * p + (len(x) - sum(x)) * (1 - p))
                    prob *= weak if y == 1 else 1 - weak
                    x.append(y)
                total += prob * sum(a == b == 1 for a, b in itertools.pairwise(x))
            out.append(total)
        return out

    exact = ccmc.weak_weak_exact([0.3, 0.45], 6, prompt=prompt)
    for i, p in enumerate((0.3, 0.45)):
        np.testing.assert_allclose(exact[i, len(prompt) :], enumerate_all(p, 6), atol=1e-14)
    assert np.isnan(exact[:, : len(prompt)]).all()


def test_weak_weak_exact_validates_its_arguments():
    from ccmc_lite import ccmc

    with pytest.raises(ValueError, match="both tokens"):
        ccmc.weak_weak_exact(0.3, 10, prompt=(0, 0))
    with pytest.raises(ValueError, match="p"):
        ccmc.weak_weak_exact(0.7, 10)
    with pytest.raises(ValueError, match="length"):
        ccmc.weak_weak_exact(0.3, 10**9)
