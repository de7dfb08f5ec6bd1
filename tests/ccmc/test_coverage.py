"""Tests for ccmc_lite.ccmc.coverage.

Ildiz et al. 2024, Def. 3.3, Thm 3.4, Obs. 1, Cor 3.5, App. C.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ccmc_lite import ccmc
from ccmc_lite.ccmc import (
    CoverageReport,
    coverage_report,
    draw_cooccurrence_graph,
    restricted_distribution,
)
from ccmc_lite.ccmc.coverage import _cooccurrence_graphs

# Figure 3 in the spirit of the paper: two prompts with query 0 whose other tokens differ.
FIG3 = [[1, 2, 0], [3, 0]]


def test_figure3_self_connected_cross_disconnected():
    sa = coverage_report(FIG3, 4, variant="self")
    ca = coverage_report(FIG3, 4, variant="cross")
    assert bool(sa.connected[0])
    assert not bool(ca.connected[0])
    assert ca.components[0] == [frozenset({1, 2}), frozenset({0}), frozenset({3})]
    assert sa.disconnected_queries == [1, 2, 3]  # no prompt ends with 1, 2 or 3
    assert not sa.consistent


def test_adjacency_edges():
    A = _cooccurrence_graphs(FIG3, 4, variant="self")
    assert A.shape == (4, 4, 4)
    assert bool(A[0, 1, 2]) and bool(A[0, 0, 3]) and not bool(A[0, 1, 3])
    assert not bool(A[1].any())
    Ac = _cooccurrence_graphs(FIG3, 4, variant="cross")
    assert bool(Ac[0, 1, 2]) and not bool(Ac[0, 0, 0]) and bool(Ac[0, 3, 3])


def test_covering_prompt_set_is_consistent():
    prompts = [[a, b, k] for k in range(3) for a in range(3) for b in range(3)]
    for variant in ("self", "cross"):
        rep = coverage_report(prompts, 3, variant=variant)
        assert rep.consistent
        assert bool(rep.identifiable.all())
        assert bool(rep.same_component.all())


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 6),
    st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=6), min_size=1, max_size=8),
)
def test_observation_1(K, raw):
    """Self-attention: G^(k) connected iff every token appears in some prompt of Omega_k."""
    prompts = [[t % K for t in p] for p in raw]
    rep = coverage_report(prompts, K, variant="self")
    for k in range(K):
        in_omega_k = [p for p in prompts if p[-1] == k]
        covered = {t for p in in_omega_k for t in p} == set(range(K))
        assert bool(rep.connected[k]) == covered
        # and the query is a hub: every observed token is adjacent to k
        for t in {t for p in in_omega_k for t in p}:
            assert bool(rep.adjacency[k, k, t])


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 5),
    st.lists(st.lists(st.integers(0, 4), min_size=2, max_size=5), min_size=1, max_size=8),
)
def test_components_partition_the_vertices(K, raw):
    prompts = [[t % K for t in p] for p in raw]
    rep = coverage_report(prompts, K, variant="cross")
    for k in range(K):
        seen = sorted(v for c in rep.components[k] for v in c)
        assert seen == list(range(K))
        assert bool(rep.connected[k]) == (len(rep.components[k]) == 1)


def test_zero_transitions_appendix_c():
    """Def. C.2 (ii): paths may only use tokens v with P[k, v] > 0."""
    P = torch.full((4, 4), 0.25, dtype=torch.float64)
    P[0] = torch.tensor([0.2, 0.3, 0.5, 0.0])  # token 3 never follows token 0
    # plain graph connected through token 3, but 3 is outside the support of row 0
    prompts = [[1, 3, 0], [3, 2, 0], [0, 3, 0]]
    assert bool(coverage_report(prompts, 4, variant="cross").connected[0])
    wrt_P = coverage_report(prompts, 4, variant="cross", P=P)
    assert not bool(wrt_P.connected[0])
    assert wrt_P.components[0] == [frozenset({0}), frozenset({1}), frozenset({2})]
    # the graph over the support {1, 2} is connected when P[0, 0] = P[0, 3] = 0 ...
    P[0] = torch.tensor([0.0, 0.4, 0.6, 0.0])
    assert not bool(coverage_report([[1, 2, 0]], 4, variant="cross").connected[0])
    sparse = coverage_report([[1, 2, 0]], 4, variant="cross", P=P)
    assert bool(sparse.connected[0])
    # ... but tokens 0 and 3 are never keys with query 0, so P*[0, 0] and P*[0, 3] are free
    # (Thm. C.3 as stated misses this): not consistent until both are observed
    assert not sparse.consistent
    covered = [[1, 2, 0], [3, 0, 1, 0], *([j, i, i] for i in (1, 2, 3) for j in range(4))]
    assert coverage_report(covered, 4, variant="cross", P=P).consistent


def test_thm_c3_counterexample_has_two_minimisers():
    """With token 3 a zero transition never observed after query 0, moving mass onto it
    leaves the population loss unchanged: P_GT is not the unique minimiser."""
    P = torch.full((4, 4), 0.25, dtype=torch.float64)
    P[0] = torch.tensor([0.0, 0.4, 0.6, 0.0])
    prompts = [[1, 2, 0]] + [[j, i, i] for i in (1, 2, 3) for j in range(4)]
    data = ccmc.population_data(P, prompts, variant="cross")
    other = P.clone()
    other[0] = torch.tensor([0.0, 0.2, 0.3, 0.5])  # same ratio 0.4 : 0.6 on the keys {1, 2}
    same = ccmc.log_likelihood(other, data) - ccmc.log_likelihood(P, data)
    assert abs(float(same)) < 1e-15
    assert not coverage_report(prompts, 4, variant="cross", P=P).consistent
    observed = [*prompts, [3, 1, 2, 0]]  # now 3 is a key with query 0: mass there costs
    data = ccmc.population_data(P, observed, variant="cross")
    worse = ccmc.log_likelihood(other, data) - ccmc.log_likelihood(P, data)
    assert float(worse) < -1e-3


def test_restricted_distribution():
    P = torch.tensor([[0.2, 0.3, 0.5], [0.5, 0.1, 0.4], [0.1, 0.6, 0.3]], dtype=torch.float64)
    torch.testing.assert_close(
        restricted_distribution(P, 0, {1, 2}), torch.tensor([0.375, 0.625], dtype=torch.float64)
    )
    with pytest.raises(ValueError, match="subset must not be empty"):
        restricted_distribution(P, 0, [])
    with pytest.raises(ValueError, match="k must be"):
        restricted_distribution(P, 3, [0])


def test_bad_prompts_and_arguments():
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        coverage_report([[0, 3]], 3)
    with pytest.raises(ValueError, match="empty"):
        coverage_report([], 3)
    with pytest.raises(ValueError, match="at least 2 tokens"):
        coverage_report([[0]], 3, variant="cross")
    with pytest.raises(ValueError, match="P must be"):
        coverage_report([[0, 1]], 3, P=torch.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="row-stochastic"):
        coverage_report([[0, 1]], 2, P=torch.full((2, 2), 0.4))


def test_summary_and_drawing():
    rep = coverage_report(FIG3, 4, variant="cross")
    assert isinstance(rep, CoverageReport)
    text = rep.summary()
    assert "G^(0) [cross]: DISCONNECTED" in text and "{1, 2}" in text
    fig, ax = plt.subplots()
    draw_cooccurrence_graph(ax, rep, 0, labels=range(1, 5))
    assert "disconnected" in ax.get_title()
    assert len(ax.lines) == 1  # the single edge 2 - 3 (paper labels)
    plt.close(fig)
    with pytest.raises(TypeError, match="CoverageReport"):
        draw_cooccurrence_graph(ax, "nope", 0)
