"""Tests for ccmc_lite.ngram.estimators (Varre et al. 2025, Def. 2.1 and App. F.2)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special

from ccmc_lite.ngram import (
    NGramTask,
    bayes_predictor,
    contiguous_offsets,
    cross_entropy,
    estimator_losses,
    kgram_counts,
    kgram_estimator,
    sample_batch,
    smoothing_losses,
    subset_estimator,
)
from ccmc_lite.ngram.estimators import _subset_counts

# ----------------------------------------------------------------------------- slow reference


def slow_subset_counts(x: list[int], S: int, offsets: tuple[int, ...], t: int) -> list[int]:
    """Def. 2.1 / App. F.2 written as loops: predict x[t+1] from x[0..t] (0-based)."""
    counts = [0] * S
    need = max(offsets) if offsets else 0
    if t + 1 < need:
        return counts
    query = [x[t + 1 - h] for h in offsets]
    for l in range(need, t + 1):
        if [x[l - h] for h in offsets] == query:
            counts[x[l]] += 1
    return counts


token_lists = st.integers(2, 4).flatmap(
    lambda S: st.tuples(st.just(S), st.lists(st.integers(0, S - 1), min_size=4, max_size=14))
)


@settings(max_examples=60, deadline=None)
@given(data=token_lists, k=st.integers(1, 4))
def test_kgram_counts_match_slow_reference(data, k):
    S, seq = data
    x = torch.tensor([seq])
    T = len(seq)
    fast_last = kgram_counts(x, S, k)[0].long().tolist()
    assert fast_last == slow_subset_counts(seq, S, tuple(range(1, k)), T - 1)
    fast_all = kgram_counts(x, S, k, positions="all")[0].long()
    for t in range(T):
        assert fast_all[t].tolist() == slow_subset_counts(seq, S, tuple(range(1, k)), t)


@settings(max_examples=40, deadline=None)
@given(data=token_lists, offsets=st.sets(st.integers(1, 3), max_size=3))
def test_noncontiguous_counts_match_slow_reference(data, offsets):
    S, seq = data
    offs = tuple(sorted(offsets))
    x = torch.tensor([seq, seq[::-1]])
    fast = _subset_counts(x, S, offs).long()
    assert fast[0].tolist() == slow_subset_counts(seq, S, offs, len(seq) - 1)
    assert fast[1].tolist() == slow_subset_counts(seq[::-1], S, offs, len(seq) - 1)


def test_kgram_example_by_hand():
    # x = 0 1 0 2 0 1 0 : after the history "0" came 1, 2, 1 ; after "1 0" came 2 only
    x = torch.tensor([[0, 1, 0, 2, 0, 1, 0]])
    assert kgram_counts(x, 3, 1)[0].tolist() == [4, 2, 1]
    assert kgram_counts(x, 3, 2)[0].tolist() == [0, 2, 1]
    assert kgram_counts(x, 3, 3)[0].tolist() == [0, 0, 1]
    p = kgram_estimator(x, 3, 2)[0]
    torch.testing.assert_close(p, torch.tensor([0, 2 / 3, 1 / 3], dtype=p.dtype))
    q = kgram_estimator(x, 3, 2, smoothing=1.0)[0]
    torch.testing.assert_close(q, torch.tensor([1 / 6, 3 / 6, 2 / 6], dtype=q.dtype))


def test_unsmoothed_without_match_is_uniform():
    x = torch.tensor([[0, 1, 2, 3]])  # the history "3" never occurred before
    assert kgram_counts(x, 4, 2)[0].sum() == 0
    torch.testing.assert_close(kgram_estimator(x, 4, 2)[0], torch.full((4,), 0.25).double())


def test_contiguous_offsets_and_subset_agree():
    assert contiguous_offsets(3) == (1, 2)
    b = sample_batch(NGramTask(S=3, n=3, T=12), 20, seed=0)
    torch.testing.assert_close(
        subset_estimator(b.tokens, 3, (1, 2), smoothing=0.5),
        kgram_estimator(b.tokens, 3, 3, smoothing=0.5),
    )


# ----------------------------------------------------------------------------- Bayes


def test_bayes_predictor_is_the_posterior_mean():
    """S = 2, n = 2: integrate the Beta posterior of the row of the last token numerically."""
    alpha = 0.7
    x = torch.tensor([[0, 1, 1, 0, 1, 1, 1, 0, 0, 1]])
    pred = bayes_predictor(x, 2, 2, alpha)[0]
    seq = x[0].tolist()
    h = seq[-1]
    n1 = sum(1 for a, b in itertools.pairwise(seq) if a == h and b == 1)
    n0 = sum(1 for a, b in itertools.pairwise(seq) if a == h and b == 0)

    def post(p):
        return p ** (alpha - 1 + n1) * (1 - p) ** (alpha - 1 + n0)

    num = integrate.quad(lambda p: p * post(p), 0, 1)[0]
    den = integrate.quad(post, 0, 1)[0]
    assert float(pred[1]) == pytest.approx(num / den, rel=1e-6)


def test_bayes_beats_every_kgram_on_a_fixed_test_set():
    task = NGramTask(S=5, n=3, T=32, alpha=0.5)
    b = sample_batch(task, 20000, seed=11)
    bayes = float(cross_entropy(bayes_predictor(b.tokens, 5, 3, 0.5), b.target).mean())
    for k in (1, 2, 3):
        for beta in (0.1, 0.5, 2.0):
            if k == 3 and beta == 0.5:
                continue  # that is the Bayes predictor itself
            other = estimator_losses(b.tokens, b.target, 5, (k,), smoothing=beta)[k]
            assert bayes < other
    # and it sits above the entropy floor of the true rows
    floor = special.digamma(5 * 0.5 + 1) - special.digamma(0.5 + 1)
    assert bayes > floor


# ----------------------------------------------------------------------------- cross-entropy


def test_cross_entropy_targets():
    p = torch.tensor([[0.5, 0.25, 0.25], [0.0, 0.5, 0.5]])
    y = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]])
    ce = cross_entropy(p, y)
    assert float(ce[0]) == pytest.approx(math.log(2))
    assert float(ce[1]) == pytest.approx(math.log(2))
    tok = cross_entropy(p, torch.tensor([1, 0]))
    assert float(tok[0]) == pytest.approx(math.log(4))
    assert math.isinf(float(tok[1]))
    # a missed token gives an infinite loss for the unsmoothed estimator
    assert math.isinf(float(cross_entropy(p[1:], torch.tensor([[0.1, 0.45, 0.45]]))[0]))


def test_sampled_tokens_give_the_same_mean_loss():
    b = sample_batch(NGramTask(S=3, n=2, T=20, alpha=1.0), 20000, seed=2)
    pred = kgram_estimator(b.tokens, 3, 2, smoothing=1.0)
    gen = torch.Generator().manual_seed(0)
    sampled = torch.multinomial(b.target.float(), 1, generator=gen).squeeze(-1)
    a = float(cross_entropy(pred, b.target).mean())
    s = float(cross_entropy(pred, sampled).mean())
    assert abs(a - s) < 0.03


# ----------------------------------------------------------------------------- bad input


def test_bad_inputs():
    x = torch.tensor([[0, 1, 2]])
    with pytest.raises(ValueError, match="k"):
        kgram_estimator(x, 3, 0)
    with pytest.raises(ValueError, match="tokens"):
        kgram_estimator(torch.tensor([[0, 3]]), 3, 1)
    with pytest.raises(ValueError, match="S"):
        kgram_estimator(x, 1, 1)
    with pytest.raises(ValueError, match="smoothing"):
        kgram_estimator(x, 3, 1, smoothing=-0.1)
    with pytest.raises(ValueError, match="alpha"):
        bayes_predictor(x, 3, 2, 0.0)
    with pytest.raises(ValueError, match="n"):
        bayes_predictor(x, 3, 0, 1.0)
    with pytest.raises(ValueError, match="offsets"):
        _subset_counts(x, 3, (1, 1))
    with pytest.raises(ValueError, match="target"):
        cross_entropy(torch.tensor([[0.5, 0.5]]), torch.tensor([[1.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="positions"):
        kgram_counts(x, 3, 2, positions="first")


def test_all_positions_shape_and_normalisation():
    b = sample_batch(NGramTask(S=4, n=2, T=16), 7, seed=3)
    p = kgram_estimator(b.tokens, 4, 2, smoothing=0.5, positions="all")
    assert p.shape == (7, 16, 4)
    np.testing.assert_allclose(p.sum(-1).numpy(), 1.0)


@pytest.mark.parametrize("offsets", [(), (1,), (2,), (1, 2)])
@pytest.mark.parametrize("sampled", [False, True])
def test_smoothing_losses_equal_one_estimator_per_beta(offsets, sampled):
    """One count, many normalisations: the same numbers as one estimator per beta."""
    batch = sample_batch(NGramTask(S=4, n=3, T=24, alpha=0.5), 64, seed=3)
    target = batch.tokens[:, -1] if sampled else batch.target
    tokens = batch.tokens[:, :-1] if sampled else batch.tokens
    betas = np.array([0.0, 0.1, 0.5, 3.0])
    curve = smoothing_losses(tokens, target, 4, offsets, betas)
    assert curve.shape == (4,) and curve.dtype == torch.float64
    for b, value in zip(betas, curve, strict=True):
        one = cross_entropy(subset_estimator(tokens, 4, offsets, smoothing=b), target).mean()
        assert torch.equal(value, one) or (math.isinf(value) and math.isinf(one)), (b, value, one)
    if offsets == (1,):  # the k-gram of Def. 2.1 with k = 2
        assert float(curve[2]) == estimator_losses(tokens, target, 4, (2,), smoothing=0.5)[2]


@pytest.mark.parametrize(
    ("smoothings", "error", "match"),
    [
        ([], ValueError, "at least one value"),
        ([0.5, -1.0], ValueError, r"smoothings\[1\] must lie in \[0\.0, inf\]"),
        ([0.5, float("nan")], ValueError, r"smoothings\[1\] must be finite"),
        (np.ones((2, 2)), ValueError, r"one-dimensional; got shape \(2, 2\)"),
        ("0.5", TypeError, "smoothings must be a sequence"),
        (0.5, TypeError, "smoothings must be a sequence"),
    ],
)
def test_smoothing_losses_reject_bad_smoothings(smoothings, error, match):
    batch = sample_batch(NGramTask(S=3, n=2, T=8, alpha=0.5), 4, seed=0)
    with pytest.raises(error, match=match):
        smoothing_losses(batch.tokens, batch.target, 3, (1,), smoothings)
