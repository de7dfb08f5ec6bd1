"""Tests for ccmc_lite.ngram.plateau_sweep (plateau lengths across a T/alpha sweep)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from ccmc_lite.ngram import (
    HeadTiming,
    first_heads,
    head_timing,
    plateau_lengths,
    plateau_statistics,
    plot_plateau_sweep,
)

STEPS = np.array([0, 100, 200, 300, 400])


def _weights(previous_at: int | None, two_back_at: int | None, heads: int = 2) -> np.ndarray:
    """(C, H, 2) offset weights: head 0 jumps to the previous token, head 1 to two back."""
    w = np.full((STEPS.size, heads, 2), 0.1)
    if previous_at is not None:
        w[STEPS >= previous_at, 0, 0] = 0.8
    if two_back_at is not None:
        w[STEPS >= two_back_at, 1, 1] = 0.6
    return w


def _sweep() -> tuple[list[tuple[int, float]], np.ndarray]:
    cells = [(16, 0.5), (16, 0.5), (32, 0.5), (32, 0.5), (32, 1.0), (32, 1.0)]
    w = np.stack(
        [
            _weights(100, 200),  # plateau 100
            _weights(100, 300),  # 200
            _weights(100, 400),  # 300
            _weights(200, None),  # censored: at least 500 - 200 = 300
            _weights(None, None),  # never reaches the plateau: left out
            _weights(0, 400),  # 400
        ]
    )
    return cells, w


def test_head_timing_reads_the_first_checkpoint_over_the_threshold():
    cells, w = _sweep()
    timing = head_timing(cells, STEPS, w)
    assert timing[0] == HeadTiming(16, 0.5, 100, 200)
    assert timing[3] == HeadTiming(32, 0.5, 200, None) and timing[3].censored
    assert timing[4].previous is None and timing[4].plateau(500) is None
    assert timing[3].plateau(500) == 300.0 and timing[0].plateau(500) == 100.0
    # a higher threshold: the two-back head (0.6) never counts, every run is censored
    assert all(t.two_back is None for t in head_timing(cells, STEPS, w, threshold=0.7))


def test_plateau_lengths_select_one_cell_and_flag_censoring():
    cells, w = _sweep()
    timing = head_timing(cells, STEPS, w)
    lengths, censored = plateau_lengths(timing, 500, T=32, alpha=0.5)
    np.testing.assert_array_equal(lengths, [300.0, 300.0])
    np.testing.assert_array_equal(censored, [False, True])
    lengths, censored = plateau_lengths(timing, 500, T=32, alpha=1.0)
    np.testing.assert_array_equal(lengths, [400.0])  # the run without a plateau is left out
    assert plateau_lengths(timing, 500, T=64, alpha=0.5)[0].size == 0


def test_first_heads_counts_ties_for_the_previous_token():
    timing = [
        HeadTiming(32, 0.5, 100, 200),
        HeadTiming(32, 0.5, 300, 100),
        HeadTiming(32, 0.5, 100, 100),
        HeadTiming(32, 0.5, None, 100),
        HeadTiming(32, 0.5, None, None),
    ]
    assert first_heads(timing) == {"previous token": 2, "two back": 2, "none": 1}


def test_plateau_statistics_medians_escapes_and_rank_correlation():
    cells, w = _sweep()
    timing = head_timing(cells, STEPS, w)
    stats = plateau_statistics(timing, 500, Ts=[16, 32], alphas=[0.5, 1.0])
    assert stats["med_T16"] == 150.0 and stats["esc_T16"] == 2
    assert stats["med_T32"] == 300.0 and stats["esc_T32"] == 1
    assert stats["med_a50"] == 300.0 and stats["med_a100"] == 400.0
    assert stats["rho_T"] > 0.8  # longer plateaus at T = 32 than at 16
    assert 0.0 < stats["pval_T"] < 1.0
    flat = [HeadTiming(T, 0.5, 0, 100) for T in (16, 16, 32, 32)]
    same = plateau_statistics(flat, 500, Ts=[16, 32], alphas=[0.5])
    assert same["rho_T"] == 0.0 and same["pval_T"] == 1.0  # every length equal: no trend


def test_head_timing_rejects_mismatched_inputs():
    cells, w = _sweep()
    with pytest.raises(ValueError, match="cells has 5 entries but offset_weight has 6 runs"):
        head_timing(cells[:5], STEPS, w)
    with pytest.raises(ValueError, match="checkpoint_steps"):
        head_timing(cells, STEPS[:4], w)
    with pytest.raises(ValueError, match="offsets 1 and 2"):
        head_timing(cells, STEPS, w[..., :1])
    with pytest.raises(ValueError, match="offset_weight"):
        head_timing(cells, STEPS, w[0])  # one run's array, not (R, C, H, n)
    with pytest.raises(ValueError, match="threshold"):
        head_timing(cells, STEPS, w, threshold=1.5)


def test_plot_plateau_sweep_draws_runs_and_medians():
    cells, w = _sweep()
    timing = head_timing(cells, STEPS, w)
    fig, axes = plt.subplots(1, 2)
    plot_plateau_sweep(axes, timing, 500, Ts=[16, 32], alphas=[0.5, 1.0])
    # T panel: 2 cells x (escaped, censored) markers + 2 median bars
    assert len(axes[0].lines) == 6
    assert [t.get_text() for t in axes[1].get_xticklabels()] == ["0.5", "1"]
    assert axes[1].get_legend().get_texts()[0].get_text() == "not escaped by step 500"
    with pytest.raises(ValueError, match="two panels"):
        plot_plateau_sweep(axes[:1], timing, 500, Ts=[16], alphas=[0.5])
    plt.close(fig)
