"""Tests for ccmc_lite.ngram.data (Varre et al. 2025, Sec. 2.2 and App. H)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ccmc_lite.ngram import (
    NGramTask,
    dirichlet,
    dirichlet_mean_entropy,
    entropy,
    estimator_losses,
    flatten_transitions,
    history_codes,
    lifted_stationary,
    lifted_transition_matrix,
    log_uniform,
    sample_batch,
    sample_sequences,
    sample_transitions,
    sample_urn,
    suffix_conditional,
)

# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n": 0}, "n"),
        ({"S": 1}, "S"),
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": -1.0}, "alpha"),
        ({"T": 2, "n": 3}, "T"),
        ({"start": "burn-in"}, "start"),
    ],
)
def test_task_rejects_bad_settings(kwargs, name):
    with pytest.raises(ValueError, match=name):
        NGramTask(**kwargs)


def test_history_codes_rejects_tokens_outside_vocabulary():
    with pytest.raises(ValueError, match="tokens"):
        history_codes(torch.tensor([[0, 1, 5]]), 5, 2)
    with pytest.raises(ValueError, match="tokens"):
        history_codes(torch.tensor([[0, -1, 2]]), 5, 2)


def test_sample_sequences_rejects_short_T():
    P = sample_transitions(NGramTask(S=3, n=3, T=4), (2,), seed=0)
    with pytest.raises(ValueError, match="T"):
        sample_sequences(P, 2, seed=0)


def test_seed_or_generator_required():
    with pytest.raises(ValueError, match="seed"):
        sample_batch(NGramTask(), 4)


def test_urn_needs_uniform_start():
    with pytest.raises(ValueError, match="start"):
        sample_urn(NGramTask(start="stationary"), (4,), seed=0)


# ----------------------------------------------------------------------------- Dirichlet


def test_dirichlet_moments_match_theory():
    alpha, S = 0.5, 5
    x = dirichlet(alpha, (40000,), S, seed=1)
    assert x.shape == (40000, S)
    torch.testing.assert_close(x.sum(-1), torch.ones(40000, dtype=x.dtype))
    a0 = S * alpha
    var = alpha * (a0 - alpha) / (a0**2 * (a0 + 1))  # 0.0457...
    # each coordinate's mean (the overall mean is 1/S for any rows summing to one)
    se = (var / x.shape[0]) ** 0.5
    assert float((x.mean(0) - 1 / S).abs().max()) < 5 * se
    assert float((x.var(0) - var).abs().max()) < 1.5e-3


def test_dirichlet_small_alpha_never_degenerates():
    x = dirichlet(0.02, (5000,), 4, seed=3)
    assert bool(torch.isfinite(x).all())
    torch.testing.assert_close(x.sum(-1), torch.ones(5000, dtype=x.dtype))


def test_dirichlet_same_seed_same_numbers():
    a = dirichlet(0.5, (10,), 3, seed=7)
    b = dirichlet(0.5, (10,), 3, seed=7)
    c = dirichlet(0.5, (10,), 3, seed=8)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_sample_transitions_shape_and_rows():
    task = NGramTask(S=4, n=3, T=8)
    P = sample_transitions(task, (6,), seed=0)
    assert P.shape == (6, 4, 4, 4)
    torch.testing.assert_close(P.sum(-1), torch.ones(6, 4, 4, dtype=P.dtype))


# ----------------------------------------------------------------------------- lifted chain


def test_lifted_matrix_structure():
    S, n = 3, 3
    P = sample_transitions(NGramTask(S=S, n=n, T=5), (1,), seed=0)
    M = lifted_transition_matrix(P, S, n)[0]
    flat = flatten_transitions(P, S, n)[0]
    assert M.shape == (9, 9)
    torch.testing.assert_close(M.sum(-1), torch.ones(9, dtype=M.dtype))
    # history (a, b) -> (b, j) with probability P[a, b, j]
    a, b, j = 2, 1, 0
    assert float(M[a * 3 + b, b * 3 + j]) == pytest.approx(float(flat[a * 3 + b, j]))
    assert float(M[a * 3 + b, 0 * 3 + j]) == 0.0  # (a, b) cannot go to (0, j) since b != 0


@settings(max_examples=20, deadline=None)
@given(S=st.integers(2, 4), n=st.integers(1, 3), seed=st.integers(0, 10_000))
def test_stationary_distribution_is_invariant(S, n, seed):
    P = sample_transitions(NGramTask(S=S, n=n, T=n + 1), (3,), seed=seed)
    pi = lifted_stationary(P, S, n)
    M = lifted_transition_matrix(P, S, n).double()
    torch.testing.assert_close(torch.einsum("bh,bhg->bg", pi, M), pi, atol=1e-10, rtol=0)
    torch.testing.assert_close(pi.sum(-1), torch.ones(3, dtype=pi.dtype))


def test_history_codes_values():
    x = torch.tensor([[1, 2, 0, 2]])
    assert history_codes(x, 3, 0).tolist() == [[0, 0, 0, 0]]
    assert history_codes(x, 3, 1).tolist() == [[1, 2, 0, 2]]
    assert history_codes(x, 3, 2).tolist() == [[-1, 1 * 3 + 2, 2 * 3 + 0, 0 * 3 + 2]]


# ----------------------------------------------------------------------------- sequences


def next_token_probs(P: torch.Tensor, tokens: torch.Tensor, n: int) -> torch.Tensor:
    """The oracle: the row ``P[x_{t-n+2}, ..., x_t, :]`` at every position, ``(B, T, S)``
    (positions without a full history hold the first row; compare from position n - 2)."""
    S = P.shape[-1]
    flat = flatten_transitions(P, S, n)  # (B, S^(n-1), S)
    codes = history_codes(tokens, S, n - 1).clamp_min(0)  # (B, T)
    return torch.gather(flat, 1, codes[..., None].expand(*codes.shape, S))


def test_next_probs_are_the_rows_of_the_history():
    task = NGramTask(S=4, n=3, T=12)
    b = sample_batch(task, 50, seed=0)
    ref = next_token_probs(b.transitions, b.tokens, 3)
    torch.testing.assert_close(b.next_probs[:, 1:], ref[:, 1:])
    # inside the uniform start the next token is uniform
    torch.testing.assert_close(b.next_probs[:, 0], torch.full((50, 4), 0.25, dtype=ref.dtype))
    assert b.target.shape == (50, 4)


def test_sampling_is_reproducible():
    task = NGramTask(S=3, n=2, T=10)
    a = sample_batch(task, 8, seed=5)
    b = sample_batch(task, 8, seed=5)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.transitions, b.transitions)


def test_batch_of_S_tables_needs_the_order():
    """(S, S) is S unigram laws or one bigram table without its batch axis: n= decides."""
    S = 3
    P = sample_transitions(NGramTask(S=S, n=2, T=6), (1,), seed=1)[0]  # one bigram, (3, 3)
    for call in (
        lambda **k: sample_sequences(P, 6, seed=0, **k),
        lambda **k: suffix_conditional(P, 1, 4, **k),
    ):
        with pytest.raises(ValueError, match=r"ambiguous.*pass n="):
            call()
        with pytest.raises(ValueError, match=r"n=2 axes of size S"):
            call(n=2)  # a bigram table needs its batch axis
    # n = 1: three i.i.d. sequences, each from its own row
    x, nxt = sample_sequences(P, 4000, seed=0, n=1)
    assert x.shape == (S, 4000)
    torch.testing.assert_close(nxt[:, 0], P)
    freq = torch.stack([torch.bincount(r, minlength=S) for r in x]).double() / 4000
    assert float((freq - P.double()).abs().max()) < 0.04
    # the same table with its batch axis: order read from the shape, or given, same numbers
    a = sample_sequences(P[None], 50, seed=2)
    b = sample_sequences(P[None], 50, seed=2, n=2)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_sample_batch_with_batch_size_S():
    """sample_batch passes the task's order: a batch of S tables is not ambiguous there."""
    task = NGramTask(S=3, n=3, T=7)
    b = sample_batch(task, 3, seed=0)
    assert b.tokens.shape == (3, 7) and b.transitions.shape == (3, 3, 3, 3)
    ref = next_token_probs(b.transitions, b.tokens, n=3)
    torch.testing.assert_close(b.next_probs[:, 1:], ref[:, 1:])


def test_tokens_follow_the_rows():
    """Empirical transition frequencies of long sequences match P (one fixed chain)."""
    task = NGramTask(S=3, n=2, T=4000)
    P = sample_transitions(task, (1,), seed=2)
    x, _ = sample_sequences(P, 4000, seed=3)
    counts = torch.zeros(3, 3)
    counts.index_put_((x[0, :-1], x[0, 1:]), torch.ones(3999), accumulate=True)
    freq = counts / counts.sum(-1, keepdim=True)
    assert float((freq - P[0].float()).abs().max()) < 0.06


def test_stationary_start_window_has_law_pi():
    """Lemma H.3: with the stationary start every (n-1)-window has law π."""
    S, n = 3, 3
    P = sample_transitions(NGramTask(S=S, n=n, T=6), (1,), seed=4).expand(60000, S, S, S)
    x, _ = sample_sequences(P.contiguous(), 6, start="stationary", seed=5)
    pi = lifted_stationary(P[:1], S, n)[0]
    for t in (1, 4):  # window ending at t
        code = x[:, t - 1] * S + x[:, t]
        freq = torch.bincount(code, minlength=S * S).double() / x.shape[0]
        assert float((freq - pi).abs().max()) < 0.012


def test_urn_sampler_matches_forward_sampler_in_law():
    task = NGramTask(S=5, n=3, T=32, alpha=0.5)
    x1, y1 = sample_urn(task, (20000,), seed=0)
    b = sample_batch(task, 20000, seed=1)
    l1 = estimator_losses(x1, y1.double(), 5, (2, 3), smoothing=0.5)
    l2 = estimator_losses(b.tokens, b.target, 5, (2, 3), smoothing=0.5)
    for k in (2, 3):
        assert abs(l1[k] - l2[k]) < 0.02
    assert abs(float(entropy(y1.double()).mean()) - float(entropy(b.target).mean())) < 0.02


def test_urn_shapes_alpha_and_query():
    task = NGramTask(S=3, n=2, T=10, alpha=1.0)
    x, y = sample_urn(task, (2, 4), seed=0, alpha=torch.tensor([[0.5], [2.0]]))
    assert x.shape == (2, 4, 10) and y.shape == (2, 4, 3)
    torch.testing.assert_close(y.sum(-1), torch.ones(2, 4))
    a1 = sample_urn(task, (6,), seed=3)
    a2 = sample_urn(task, (6,), seed=3, query_pos=torch.tensor(9))
    assert torch.equal(a1[0], a2[0]) and torch.equal(a1[1], a2[1])
    with pytest.raises(ValueError, match="query_pos"):
        sample_urn(task, (6,), seed=3, query_pos=torch.tensor(10))


@pytest.mark.parametrize("n", [1, 2, 3])
def test_urn_draws_do_not_depend_on_the_block_size(monkeypatch, n):
    # the urn loop runs over blocks of sequences; a sequence's tokens and target must be the
    # same whichever block it falls in (blocks of 5 and 8 against one block of all 37)
    import ccmc_lite.ngram.data as data

    task = NGramTask(S=4, n=n, T=12, alpha=0.7)
    gen = torch.Generator().manual_seed(4)
    kwargs = dict(
        alpha=torch.rand(37, generator=gen) + 0.1,
        query_pos=torch.randint(max(n - 2, 0), 12, (37,), generator=gen),
    )
    whole = sample_urn(task, (37,), seed=9, **kwargs)
    for block in (5, 8):
        monkeypatch.setattr(data, "_URN_BLOCK", block)
        parts = sample_urn(task, (37,), seed=9, **kwargs)
        assert torch.equal(parts[0], whole[0]) and torch.equal(parts[1], whole[1])
    assert len(set(whole[0][:, -1].tolist())) > 1  # not a degenerate draw


def _urn_reference(u, S: int, n: int, alpha) -> list[list[int]]:
    """A plain Pólya urn, one sequence and one step at a time, driven by the uniforms ``u``.

    ``x_{t+1}`` is the number of ``s < S - 1`` whose cumulative weight (float32 entries
    ``N_h(s) + alpha``, summed in float64 and rounded, as ``torch.cumsum`` does) is below
    ``u_t (N_h + S alpha)``; the first ``n - 1`` tokens are ``floor(S u_t)``.
    """
    import numpy as np

    m, out = n - 1, []
    for row, a in zip(u.numpy(), np.broadcast_to(np.float32(alpha), len(u)), strict=True):
        counts: dict[tuple[int, ...], np.ndarray] = {}
        x = [min(int(np.float32(v) * np.float32(S)), S - 1) for v in row[:m]]
        for v in row[m:]:
            h = tuple(x[len(x) - m :])
            c = counts.setdefault(h, np.zeros(S, np.float32))
            cdf = np.cumsum((c + a).astype(np.float64)).astype(np.float32)
            tok = int((cdf[:-1] < np.float32(v) * cdf[-1]).sum())
            c[tok] += 1
            x.append(tok)
        out.append(x)
    return out


@pytest.mark.parametrize(("S", "n", "T"), [(5, 3, 16), (2, 1, 9), (3, 2, 12), (3, 4, 10)])
def test_urn_tokens_are_those_of_a_plain_urn_with_the_same_uniforms(S, n, T):
    # sample_urn's first draw is the (N, T) uniforms; from them a per-sequence loop gives
    # the tokens exactly, with the task's alpha (one shared value) or one alpha per sequence
    task = NGramTask(S=S, n=n, T=T, alpha=0.3)
    u = torch.rand(200, T, generator=torch.Generator().manual_seed(11))
    alphas = torch.rand(200, generator=torch.Generator().manual_seed(12)) + 0.05
    tokens, _ = sample_urn(task, (200,), seed=11)
    assert tokens.tolist() == _urn_reference(u, S, n, task.alpha)
    tokens, _ = sample_urn(task, (200,), seed=11, alpha=alphas)
    assert tokens.tolist() == _urn_reference(u, S, n, alphas.numpy())


def test_urn_shared_alpha_equals_the_same_alpha_per_sequence():
    # the shared concentration is added as one number (faster); the draws are those of a
    # tensor holding it for every sequence
    task = NGramTask(S=4, n=3, T=20, alpha=0.7)
    shared = sample_urn(task, (3, 50), seed=5)
    each = sample_urn(task, (3, 50), seed=5, alpha=torch.full((3, 50), 0.7))
    assert torch.equal(shared[0], each[0]) and torch.equal(shared[1], each[1])


# ----------------------------------------------------------------------------- App H


def test_suffix_conditional_full_history_is_P():
    task = NGramTask(S=3, n=3, T=8)
    P = sample_transitions(task, (4,), seed=0)
    cond = suffix_conditional(P, 3, 8)
    torch.testing.assert_close(cond, flatten_transitions(P, 3, 3).double())


def test_lemma_h5_stationary_conditionals_are_time_homogeneous():
    S, n = 3, 3
    P = sample_transitions(NGramTask(S=S, n=n, T=8), (2,), seed=1)
    pi = lifted_stationary(P, S, n).reshape(2, S, S)  # π[a, b]
    flat = flatten_transitions(P, S, n).double().reshape(2, S, S, S)
    # Lemma H.5 with l = 1: p(x_{t+1} = j | x_t = b) = Σ_a π[a, b] P[a, b, j] / Σ_a π[a, b]
    num = torch.einsum("zab,zabj->zbj", pi, flat)
    h5 = num / pi.sum(1)[..., None]
    for T in (3, 9, 30):
        torch.testing.assert_close(suffix_conditional(P, 2, T, start="stationary"), h5)
    # the uniform start converges to the same conditional as T grows
    far = suffix_conditional(P, 2, 200, start="uniform")
    torch.testing.assert_close(far, h5, atol=1e-8, rtol=0)


def test_entropy_and_uniform_level():
    assert float(entropy(torch.tensor([0.5, 0.5, 0.0]))) == pytest.approx(math.log(2))
    assert log_uniform(5) == pytest.approx(math.log(5))
    with pytest.raises(ValueError, match="S"):
        log_uniform(1)


def test_dirichlet_mean_entropy_closed_form_and_monte_carlo():
    # alpha = 1: psi(S + 1) - psi(2) = H_S - 1, e.g. 1/2 + 1/3 for S = 3
    assert dirichlet_mean_entropy(3, 1.0) == pytest.approx(5 / 6, abs=1e-12)
    assert dirichlet_mean_entropy(2, 1.0) == pytest.approx(0.5, abs=1e-12)
    for S, alpha in ((5, 0.5), (3, 2.0), (2, 0.1)):
        rows = dirichlet(alpha, (100_000,), S, seed=S)
        mc = float(entropy(rows).mean())
        assert dirichlet_mean_entropy(S, alpha) == pytest.approx(mc, abs=0.01)
        assert 0 < dirichlet_mean_entropy(S, alpha) < math.log(S)
    # alpha -> infinity: rows concentrate on the uniform law
    assert dirichlet_mean_entropy(4, 1e6) == pytest.approx(math.log(4), abs=1e-5)
    with pytest.raises(ValueError, match="alpha"):
        dirichlet_mean_entropy(3, 0.0)
    with pytest.raises(ValueError, match="S"):
        dirichlet_mean_entropy(1, 1.0)
