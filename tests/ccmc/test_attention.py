"""Tests for ccmc_lite.ccmc.attention.

Ildiz et al. 2024, Sec. 2.2-2.3, Lemmas 2.2/2.5, Thm 2.6, A.2.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ccmc_lite.ccmc import (
    attention_scores,
    ccmc_distribution,
    check_embeddings,
    cross_attention,
    embed,
    logits_from_weights,
    next_token_distribution,
    positional_ccmc_distribution,
    positional_embeddings,
    positional_factors,
    project_onto_subspace,
    random_embeddings,
    self_attention,
    subspace_basis,
    transition_from_weights,
    weights_from_logits,
    weights_from_transition,
)
from ccmc_lite.ccmc.attention import _subspace_projectors, _tied_classifier


def setup(K: int, extra: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    d = K + extra
    E = random_embeddings(K, d, seed=seed)
    W = torch.randn(d, d, generator=g, dtype=torch.float64)
    return g, d, E, W


def head_atol(E: torch.Tensor) -> float:
    """Rounding in C = (E E^T)^{-1} E grows like cond(E)^2 * eps."""
    return 1e-12 + 1e-14 * float(torch.linalg.cond(E)) ** 2


# ---------------------------------------------------------------- Lemma 2.2


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 6), st.integers(0, 3), st.integers(1, 10), st.integers(0, 10_000))
def test_lemma_2_2_attention_output_is_embedded_ccmc(K, extra, L, seed):
    """f_W(X) = E^T pi^X with pi^X the CCMC of P^W (Lemma 2.2), and C f_W(X) = pi^X."""
    g, _d, E, W = setup(K, extra, seed)
    X = torch.randint(0, K, (3, L), generator=g)
    P = transition_from_weights(W, E)
    pi = ccmc_distribution(P, X)
    torch.testing.assert_close(self_attention(W, E, X), pi @ E, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(next_token_distribution(W, E, X), pi, rtol=0, atol=head_atol(E))


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 5), st.integers(0, 2), st.integers(2, 8), st.integers(0, 10_000))
def test_cross_attention_is_the_cross_ccmc(K, extra, L, seed):
    g, _d, E, W = setup(K, extra, seed)
    X = torch.randint(0, K, (4, L), generator=g)
    P = transition_from_weights(W, E)
    pi = ccmc_distribution(P, X, variant="cross")
    torch.testing.assert_close(cross_attention(W, E, X), pi @ E, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(
        next_token_distribution(W, E, X, variant="cross"), pi, rtol=0, atol=head_atol(E)
    )


def test_transition_from_weights_book_convention():
    # E = I: P[i, j] = softmax_j(W[j, i]) -- row i is the paper's column pi_i = S(E W e_i)
    W = torch.tensor([[0.0, 1.0], [2.0, 0.5]], dtype=torch.float64)
    P = transition_from_weights(W, torch.eye(2))
    torch.testing.assert_close(P[0], torch.softmax(W[:, 0], 0))
    torch.testing.assert_close(P[1], torch.softmax(W[:, 1], 0))
    torch.testing.assert_close(logits_from_weights(W, torch.eye(2)), W.T)


def test_attention_scores_sum_to_one():
    _, _, E, W = setup(3, 1, 0)
    s = attention_scores(W, E, [0, 1, 2, 1])
    assert s.shape == (4,)
    assert abs(float(s.sum()) - 1) < 1e-12
    assert attention_scores(W, E, [0, 1, 2, 1], variant="cross").shape == (3,)
    assert embed(E, [[0, 1]]).shape == (1, 2, 4)


# ---------------------------------------------------------------- Def. 2.4 and Lemma 2.5


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 6), st.integers(0, 3), st.integers(1, 8), st.integers(0, 10_000))
def test_lemma_2_5_projection_changes_nothing(K, extra, L, seed):
    g, _d, E, W = setup(K, extra, seed)
    X = torch.randint(0, K, (3, L), generator=g)
    Wp = project_onto_subspace(W, E)
    torch.testing.assert_close(self_attention(Wp, E, X), self_attention(W, E, X))
    torch.testing.assert_close(project_onto_subspace(Wp, E), Wp)  # idempotent
    # the removed part is orthogonal to S_E
    B = subspace_basis(E)
    inner = torch.einsum("aij,ij->a", B, W - Wp)
    assert float(inner.abs().max()) < 1e-9
    if L >= 2:
        torch.testing.assert_close(cross_attention(Wp, E, X), cross_attention(W, E, X))


def test_subspace_dimension_and_generators():
    K, d = 3, 5
    E = random_embeddings(K, d, seed=1)
    B = subspace_basis(E)
    assert B.shape == (K * (K - 1), d, d)
    gram = torch.einsum("aij,bij->ab", B, B)
    torch.testing.assert_close(gram, torch.eye(K * (K - 1), dtype=torch.float64))
    # every generator (e_i - e_j) e_k^T of Def. 2.4 lies in S_E
    for i in range(K):
        for j in range(K):
            for k in range(K):
                G = torch.outer(E[i] - E[j], E[k])
                torch.testing.assert_close(project_onto_subspace(G, E), G)
    Pi_D, Pi_R = _subspace_projectors(E)
    torch.testing.assert_close(Pi_D @ Pi_D, Pi_D)
    assert abs(float(torch.trace(Pi_D)) - (K - 1)) < 1e-10
    assert abs(float(torch.trace(Pi_R)) - K) < 1e-10


def test_identity_embedding_subspace_is_zero_column_sums():
    W = torch.arange(9.0).reshape(3, 3).double()
    Wp = project_onto_subspace(W, torch.eye(3))
    torch.testing.assert_close(Wp.sum(0), torch.zeros(3, dtype=torch.float64))
    torch.testing.assert_close(Wp, W - W.mean(0, keepdim=True))


# ---------------------------------------------------------------- Thm. 2.6


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 6), st.integers(0, 3), st.integers(0, 10_000))
def test_theorem_2_6_round_trip(K, extra, seed):
    """P -> W (in S_E) -> P is the identity; W in S_E -> P -> W is the identity."""
    g, _d, E, W = setup(K, extra, seed)
    P = torch.softmax(2 * torch.randn(K, K, generator=g, dtype=torch.float64), -1)
    W_P = weights_from_transition(P, E)
    torch.testing.assert_close(project_onto_subspace(W_P, E), W_P)
    torch.testing.assert_close(transition_from_weights(W_P, E), P, rtol=1e-9, atol=1e-12)
    # P -> W solves with C = (E E^T)^{-1} E on both sides: rounding in the logits grows
    # like cond(E)^2 (seen: 2.6e-8 at cond(E) = 420 with the old fixed atol of 1e-9).
    w_atol = 1e-9 + 1e-12 * float(torch.linalg.cond(E)) ** 2
    Ws = project_onto_subspace(W, E)
    torch.testing.assert_close(
        weights_from_transition(transition_from_weights(Ws, E), E), Ws, rtol=1e-7, atol=w_atol
    )
    # uniqueness: any W with the same P differs from W_P only outside S_E
    torch.testing.assert_close(
        project_onto_subspace(W, E),
        weights_from_transition(transition_from_weights(W, E), E),
        rtol=1e-7,
        atol=w_atol,
    )


def test_inverse_map_closed_form_for_identity_embeddings():
    P = torch.tensor([[0.2, 0.3, 0.5], [0.5, 0.1, 0.4], [0.1, 0.6, 0.3]], dtype=torch.float64)
    W = weights_from_transition(P, torch.eye(3))
    logP = torch.log(P).T  # column i = log of row i of P
    torch.testing.assert_close(W, logP - logP.mean(0, keepdim=True))
    torch.testing.assert_close(weights_from_logits(torch.log(P), torch.eye(3)), W)


def test_batched_inverse_map():
    E = random_embeddings(3, 4, seed=2)
    Ps = torch.softmax(torch.randn(5, 3, 3, dtype=torch.float64), -1)
    Ws = weights_from_transition(Ps, E)
    assert Ws.shape == (5, 4, 4)
    torch.testing.assert_close(transition_from_weights(Ws, E), Ps)


# ---------------------------------------------------------------- App. A, Lemma A.2


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 5), st.integers(1, 6), st.integers(0, 10_000))
def test_lemma_a2_positional_ccmc(K, L, seed):
    E, U, C = positional_embeddings(K, L, K + L + 1, seed=seed)
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(K + L + 1, K + L + 1, generator=g, dtype=torch.float64)
    X = torch.randint(0, K, (4, L), generator=g)
    a, b, V = positional_factors(W, E, U)
    P = transition_from_weights(W, E)
    model = next_token_distribution(W, E, X, C=C, U=U)
    torch.testing.assert_close(model, positional_ccmc_distribution(P, X, a, b, V))
    torch.testing.assert_close(C @ E.T, torch.eye(K, dtype=torch.float64))
    assert float((C @ U.T).abs().max()) < 1e-10


def test_positions_matter_with_positional_embeddings():
    K, L = 3, 4
    E, U, C = positional_embeddings(K, L, 9, seed=0)
    W = 3 * torch.randn(9, 9, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    a = next_token_distribution(W, E, [0, 1, 2, 1], C=C, U=U)
    b = next_token_distribution(W, E, [2, 0, 1, 1], C=C, U=U)  # same counts, same query
    assert float((a - b).abs().max()) > 1e-3
    # without positions the two prompts (same counts, same query) are indistinguishable
    torch.testing.assert_close(
        next_token_distribution(W, E, [0, 1, 2, 1], C=_tied_classifier(E)),
        next_token_distribution(W, E, [2, 0, 1, 1], C=_tied_classifier(E)),
    )


# ---------------------------------------------------------------- bad input


def test_embeddings_violating_assumption_2_3():
    with pytest.raises(ValueError, match="d >= K"):
        check_embeddings(torch.randn(4, 3))
    with pytest.raises(ValueError, match="linearly independent rows"):
        check_embeddings(torch.tensor([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="finite"):
        check_embeddings(torch.tensor([[1.0, float("nan")], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="d >= K"):
        next_token_distribution(torch.zeros(2, 2), torch.randn(3, 2), [0, 1])
    with pytest.raises(ValueError, match="linearly independent"):
        weights_from_transition(torch.full((2, 2), 0.5), torch.ones(2, 3))
    with pytest.raises(ValueError, match="linearly independent"):
        project_onto_subspace(torch.eye(2), torch.ones(2, 2))


def test_bad_classifier_and_positions():
    E = torch.eye(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="C E\\^T = I"):
        next_token_distribution(torch.zeros(3, 3), E, [0, 1], C=2 * E)
    E5, U, _C = positional_embeddings(2, 2, 4, seed=0)
    with pytest.raises(ValueError, match="C U\\^T = 0"):
        next_token_distribution(torch.zeros(4, 4), E5, [0, 1], C=_tied_classifier(E5), U=U + 1)
    with pytest.raises(ValueError, match="d must be >= K \\+ L"):
        positional_embeddings(3, 3, 5, seed=0)
    with pytest.raises(ValueError, match="U must have shape"):
        embed(E, [0, 1], U=torch.zeros(3, 3))


def test_zero_entry_has_no_weights():
    with pytest.raises(ValueError, match="strictly positive"):
        weights_from_transition([[1.0, 0.0], [0.5, 0.5]], torch.eye(2))
    with pytest.raises(ValueError, match="row-stochastic"):
        weights_from_transition([[0.7, 0.7], [0.5, 0.5]], torch.eye(2))
    with pytest.raises(ValueError, match="K x K"):
        weights_from_transition(torch.full((3, 3), 1 / 3), torch.eye(2))


def test_shape_errors():
    E = torch.eye(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="W must have shape"):
        self_attention(torch.zeros(2, 2), E, [0, 1])
    with pytest.raises(ValueError, match="at least 2 tokens"):
        cross_attention(torch.zeros(3, 3), E, [0])
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        self_attention(torch.zeros(3, 3), E, [0, 4])
    with pytest.raises(ValueError, match="Theta must have shape"):
        weights_from_logits(torch.zeros(2, 2), E)


def test_tied_classifier_inverts_embeddings():
    E = random_embeddings(4, 7, seed=3)
    torch.testing.assert_close(_tied_classifier(E) @ E.T, torch.eye(4, dtype=torch.float64))
    torch.testing.assert_close(_tied_classifier(torch.eye(3)), torch.eye(3, dtype=torch.float64))
