"""Tests for ccmc_lite.ngram.plateaus (automatic plateau detection, Varre et al. 2025, Sec. 5)."""

from __future__ import annotations

import numpy as np
import pytest

from ccmc_lite import ngram
from ccmc_lite.ngram import detect_plateaus, moving_average, nearest_level


def _history():
    """Three flat stretches separated by two transitions with large gradients."""
    rng = np.random.default_rng(0)
    steps = 3000
    loss = np.concatenate(
        [
            np.full(1000, 1.61),
            np.linspace(1.61, 1.55, 100),
            np.full(900, 1.55),
            np.linspace(1.55, 1.44, 100),
            np.full(900, 1.44),
        ]
    )
    grad = np.full(steps, 0.05) + 0.01 * rng.standard_normal(steps)
    grad[1000:1100] = 1.0
    grad[2000:2100] = 1.0
    return grad, loss + 0.001 * rng.standard_normal(steps)


def test_moving_average_values():
    np.testing.assert_allclose(moving_average([1.0, 3.0, 5.0, 7.0], 2), [1.0, 2.0, 4.0, 6.0])
    np.testing.assert_allclose(moving_average([2.0, 4.0], 10), [2.0, 3.0])
    with pytest.raises(ValueError, match="window"):
        moving_average([1.0], 0)
    with pytest.raises(ValueError, match="finite"):
        moving_average([1.0, np.nan], 2)


def test_detect_plateaus_finds_the_three_stages():
    grad, loss = _history()
    plats = detect_plateaus(grad, loss, window=50, threshold=0.2, min_length=300)
    assert len(plats) == 3
    assert [round(p.loss, 2) for p in plats] == [1.61, 1.55, 1.44]
    assert plats[0].start == 0 and 1000 <= plats[0].end <= 1060
    assert plats[1].length > 700 and plats[2].end == 2999
    # the relative rule (within a factor of the quietest stretch) also separates them
    assert len(detect_plateaus(grad, loss, window=50, rel_threshold=2.0, min_length=300)) == 3


def test_short_dips_are_not_plateaus():
    grad, loss = _history()
    assert detect_plateaus(grad, loss, window=50, threshold=0.2, min_length=1200) == []


def test_nearest_level():
    levels = {"uniform": 1.609, "2-gram": 1.62, "3-gram": 1.44}
    assert nearest_level(1.45, levels) == ("3-gram", 1.44)
    assert nearest_level(1.61, levels)[0] == "uniform"
    with pytest.raises(ValueError, match="levels"):
        nearest_level(1.0, {})


def test_offset_attention_and_first_offsets_on_constructions():
    import torch

    from ccmc_lite.ngram import first_offsets, formation_step, offset_attention, theta_star

    uniform = torch.zeros(2, 16, 16)  # A1 = 0: uniform causal attention
    bigram = theta_star(2, S=3, T=16, n_heads=2, c=8.0)["A1"]
    trigram = theta_star(3, S=3, T=16, n_heads=2, c=8.0)["A1"]
    w = offset_attention(trigram, 1)
    assert w.shape == (2,) and w[0] > 0.99 and w[1] < 0.1  # head 2: only row 1 (clamped)
    assert offset_attention(trigram, 2)[1] > 0.99
    # uniform attention puts 1/(t+1) on each key: the average over rows t = 1..14
    expected = np.mean([1 / (t + 1) for t in range(1, 15)])
    assert offset_attention(uniform, 1)[0] == pytest.approx(expected)
    assert offset_attention(trigram, 2, length=8)[1] > 0.99
    stack = [
        torch.stack([uniform, uniform]),
        torch.stack([bigram, uniform]),
        torch.stack([trigram, trigram]),
    ]
    firsts = first_offsets([0, 10, 20], stack, offsets=(1, 2), threshold=0.3)
    assert firsts[0] == [(1, 10), (2, 20)]
    assert firsts[1] == [(1, 20), (2, 20)]
    assert formation_step([0, 10, 20], [0.1, 0.2, 0.9]) == 20
    assert formation_step([0, 10, 20], [0.1, 0.2, 0.25]) == -1
    with pytest.raises(ValueError, match="offset"):
        offset_attention(trigram, 20)


# ------------------------------------------------------------------ detect_stages (loss-based)


def _staged_curve(levels, lengths, drop=8, noise=0.002, seed=0):
    """A loss history with flat stages at ``levels`` joined by linear drops of ``drop`` points."""
    rng = np.random.default_rng(seed)
    parts, bounds, t = [], [], 0
    for i, (lv, n) in enumerate(zip(levels, lengths, strict=True)):
        parts.append(np.full(n, lv))
        bounds.append((t, t + n - 1))
        t += n
        if i + 1 < len(levels):
            parts.append(np.linspace(lv, levels[i + 1], drop + 2)[1:-1])
            t += drop
    y = np.concatenate(parts)
    return y + noise * rng.standard_normal(y.size), bounds


def test_detect_stages_finds_three_known_stages_with_close_levels():
    # uniform 1.68, bigram 1.61, trigram 1.556: the first two differ by only 0.07 nats
    y, bounds = _staged_curve([1.68, 1.61, 1.556], [20, 40, 30])
    found = ngram.detect_stages(y, span=5, tol=0.012, min_separation=0.02)
    assert len(found) == 3
    for st, (a, b), lv in zip(found, bounds, [1.68, 1.61, 1.556], strict=True):
        assert abs(st.loss - lv) < 0.003
        assert a - 2 <= st.start <= a + 3 and b - 3 <= st.end <= b + 2


def test_detect_stages_never_labels_a_descent():
    y = np.linspace(1.7, 1.5, 60)  # steady descent of 0.0034 per point
    assert ngram.detect_stages(y, span=5, tol=0.01) == []


def test_detect_stages_rejects_a_slow_linear_descent():
    # 0.07 nats over 64 evaluations: 0.0044 per window of five, below the default tol,
    # so every window looks flat; the slope test across the stretch rejects it
    y = np.linspace(1.68, 1.61, 64)
    assert ngram.detect_stages(y) == []
    # the same descent between two real levels leaves the two levels, and only them
    y = np.concatenate([np.full(20, 1.75), np.linspace(1.68, 1.61, 64), np.full(20, 1.55)])
    found = ngram.detect_stages(y)
    assert [round(st.loss, 3) for st in found] == [1.75, 1.55]
    assert found[0].end <= 20 and found[1].start >= 84


def test_detect_stages_sees_stages_through_evaluation_noise():
    # noise of s.d. 0.005 (the default tol) on a staircase: a fixed tolerance found nothing
    y, bounds = _staged_curve([1.68, 1.61, 1.556], [30, 40, 30], noise=0.005, seed=3)
    found = ngram.detect_stages(y)
    assert len(found) == 3
    for st, (a, b), lv in zip(found, bounds, [1.68, 1.61, 1.556], strict=True):
        assert abs(st.loss - lv) < 0.005
        # the raised tolerance blurs each boundary by up to the 8-point drop's length
        assert a - 8 <= st.start <= a + 8 and b - 8 <= st.end <= b + 8
    # and noise alone, without stages below it, is one stage, not several
    flat = 1.6 + 0.005 * np.random.default_rng(4).standard_normal(80)
    assert len(ngram.detect_stages(flat)) == 1


def test_detect_stages_short_level_needs_a_short_span():
    # a level of 4 evaluations between two drops: a window of five cannot fit on it
    y = np.concatenate([np.full(12, 1.7), [1.66], np.full(4, 1.62), [1.59], np.full(12, 1.55)])
    assert [round(s.loss, 2) for s in ngram.detect_stages(y, span=5)] == [1.7, 1.55]
    found = ngram.detect_stages(y, span=3)
    assert [round(s.loss, 2) for s in found] == [1.7, 1.62, 1.55]
    assert (found[1].start, found[1].end) == (13, 16)


def test_detect_stages_merges_levels_closer_than_min_separation():
    # two stretches 0.005 apart separated by a small bump: one stage, not two
    y, _ = _staged_curve([1.610, 1.605], [30, 30], drop=2, noise=0.0)
    y[30:32] += 0.02
    found = ngram.detect_stages(y, span=3, tol=0.004, min_separation=0.02)
    assert len(found) == 1
    assert ngram.detect_stages(y, span=3, tol=0.004, min_separation=0.001)[1].loss < 1.607


def test_detect_stages_uses_steps_and_validates():
    y, _ = _staged_curve([1.6, 1.5], [10, 10], drop=4, noise=0.0)
    steps = 100 * np.arange(y.size)
    found = ngram.detect_stages(y, steps, span=3, tol=0.01)
    assert found[0].start == 0 and found[1].start in (1400, 1500)  # true start 1400
    assert found[-1].end == 100 * (y.size - 1)
    with pytest.raises(ValueError):
        ngram.detect_stages(y, steps[:-1])
    with pytest.raises(ValueError):
        ngram.detect_stages(y, steps[::-1].copy())
    with pytest.raises(ValueError):
        ngram.detect_stages(y, tol=0.0)


def test_label_stages_from_offsets():
    stages = [ngram.Stage(0, 100, 1.68), ngram.Stage(200, 400, 1.61), ngram.Stage(600, 800, 1.55)]
    steps = np.array([50, 300, 700])
    w1 = np.array([[0.1, 0.1], [0.6, 0.5], [0.7, 0.1]])
    w2 = np.array([[0.1, 0.1], [0.05, 0.05], [0.02, 0.7]])
    labels = [st.label for st in ngram.label_stages(stages, steps, w1, w2)]
    assert labels == ["uniform", "bigram", "trigram"]
    with pytest.raises(ValueError):
        ngram.label_stages(stages, steps, w1[:2], w2)


def test_absent_mass_and_histogram_levels():
    import torch

    tokens = torch.tensor([[0, 1, 0, 1], [2, 2, 2, 2]])
    target = torch.tensor([[0.5, 0.25, 0.25], [0.1, 0.0, 0.9]], dtype=torch.float64)
    am = ngram.absent_mass(tokens, target, 3)
    assert torch.allclose(am, torch.tensor([0.25, 0.1], dtype=torch.float64))
    lv = ngram.histogram_levels(tokens, target, 3, ks=(1,), betas=[1.0])
    # k = 1: the in-context histogram; absent tokens cost -log(eps)
    p = torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    expect = float(-(target * torch.log(p + 1e-8)).sum(-1).mean())
    assert abs(lv[1][0] - expect) < 1e-12
    with pytest.raises(ValueError):
        ngram.absent_mass(tokens, target[:, :2], 3)
    with pytest.raises(ValueError):
        ngram.histogram_levels(tokens, target, 3, betas=[])
